"""The warm cuda launch path: per JITKernel, a table from a cheap key of the call to a loaded kernel, so a warm
`k[grid](...)` packs its arguments and calls the driver without binding, specialisation or the artifact cache
(runtime/fastkey.py writes the key out per pattern of argument classes).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from operator import itemgetter
from typing import Any

from tilec.compiler.artifact import Artifact

from .cuda import _duck_device, is_duck_tensor, load
from .errors import ArgumentError
from .grid import check_grid

_FAST_ENTRIES = 4096  # a FastPath table's bound: past it the table starts again


class FastPath:
    """Per JITKernel: a table from a cheap key of the call (argument types, alignment, int classes,
    keyword values) to a loaded kernel, so a warm `k[grid](...)` skips binding, specialisation and
    the artifact cache. Calls the table cannot answer return False and take the full path."""

    def __init__(
        self, params, constexpr_names: set[str] | None = None, tensor_type=None, stream_of=None,
        value_names: Iterable[str] = (),
    ) -> None:  # fmt: skip
        """`value_names`: parameters whose values (a tensor: its shape) choose the kernel beyond their
        class: an autotune key's arguments (the tuned config) and those a heuristic reads."""
        self.names = [p.name for p in params]
        consts = constexpr_names if constexpr_names is not None else {p.name for p in params if p.constexpr}
        self.const_pos = tuple(i for i, n in enumerate(self.names) if n in consts)
        values = set(value_names)
        self.value_pos = tuple(i for i, n in enumerate(self.names) if n in values and i not in self.const_pos)
        # a call that passes every constexpr positionally (a launch through a warmed handle) takes them in one go
        self.const_get = itemgetter(*self.const_pos) if self.const_pos else None
        self.const_need = self.const_pos[-1] + 1 if self.const_pos else 0
        self.table: dict = {}
        self.tensor = tensor_type
        self.stream_of = stream_of
        self._multi_gpu = False  # with one GPU, the first tensor's is_cuda stands for its device
        self.ducks: set[type] = set()  # classes of duck-typed tensors seen on a CUDA device (remember())
        self.keyers: dict[int, Any] = {}  # per arity: the key written out for one pattern of classes (fastkey.py)

    @property
    def multi_gpu(self) -> bool:
        return self._multi_gpu

    @multi_gpu.setter
    def multi_gpu(self, value: bool) -> None:
        self._multi_gpu = value
        self.keyers.clear()  # they read the device as this said when they were written

    def _key(self, args: tuple, kwargs: dict):
        """(key, raw values of the positional arguments) or (None, None) for calls it does not handle: the
        written-out key of this arity where the call's classes are its pattern, else the general one."""
        keyer = self.keyers.get(len(args))
        if keyer is not None:
            got = keyer(args, kwargs)
            if got is not None:
                return got
        return self._key_any(args, kwargs)

    def _key_any(self, args: tuple, kwargs: dict):
        """The general key: (key, raw values of the positional arguments) or (None, None).
        Per argument: (dtype, 16-byte aligned) for tensors, Triton's int classes (equal to 1, or
        (divisible by 16, fits in i32)), float, a bool with its value; then keyword items, positional constexprs and the
        first tensor's device (is_cuda where there is one GPU: cheaper than get_device)."""
        tensor = self.tensor
        key = [tuple(kwargs.items())] if kwargs else [None]  # cheaper than the items one by one
        raw = []
        k_add, r_add = key.append, raw.append
        dev = None
        for a in args:
            t = type(a)
            if t is tensor:
                p = a.data_ptr()
                r_add(p)
                k_add((a.dtype, p & 15 == 0))
                if dev is None:
                    dev = a.get_device() if self._multi_gpu else a.is_cuda
            elif t is int:
                r_add(a)
                k_add(1 if a == 1 else (a & 15 == 0, -2147483648 <= a < 2147483648))
            elif t is float:
                r_add(a)
                k_add(float)
            elif t is bool:  # an i1 argument or a flag given positionally (FlagGems' kernels take several)
                r_add(int(a))
                k_add((bool, a))  # never equal to an int's class (True == 1)
            elif a is None or t is str:  # a constexpr's value (None also for a pointer or an int: Triton's too)
                r_add(a)
                k_add((t, a))
            elif t in self.ducks:  # a duck-typed tensor (a library's strided buffer): as a tensor, by its device
                p = int(a.data_ptr())
                r_add(p)
                k_add((a.dtype, p & 15 == 0))
                d = _duck_device(a)
                if d is None:
                    return None, None
                if dev is None:
                    dev = d if self._multi_gpu else True
            else:
                return None, None
        k_add(dev)
        if self.const_pos:
            n = len(args)
            if n >= self.const_need:
                k_add(self.const_get(args))
            elif self.const_pos[0] < n:
                k_add(tuple(args[i] for i in self.const_pos if i < n))
        if self.value_pos and self.value_pos[0] < len(args):
            given = [args[i] for i in self.value_pos if i < len(args)]
            k_add(tuple(a.shape if type(a) is tensor else a for a in given))
        return tuple(key), raw

    def launch(self, grid, args: tuple, kwargs: dict) -> bool:
        key, raw = self._key(args, kwargs)
        if key is None:
            return False
        try:
            entry = self.table.get(key)
        except TypeError:  # an unhashable keyword value
            return False
        if entry is None:
            return False
        lau, picks, device, rest, kernel = entry
        if type(grid) is not tuple:
            grid = self._grid(grid, args, kwargs, rest)
        if picks is not None:
            raw = raw[:picks] if type(picks) is int else [raw[i] if i >= 0 else v for i, v in picks]
        try:  # Launcher.__call__, inlined: this is the hot path
            lau.pack(lau.buf, 0, *raw)
        except struct.error as exc:
            raise ArgumentError(f"cannot pass these arguments to {kernel.name} ({exc})") from None
        if grid != lau.grid:
            lau.config.gridDimX, lau.config.gridDimY, lau.config.gridDimZ = check_grid(grid, {})
            lau.grid = grid
        if not (lau.config.gridDimX and lau.config.gridDimY and lau.config.gridDimZ):
            return True  # a grid of no programs launches nothing
        stream = self.stream_of(device)
        if stream != lau.stream:
            lau.config.hStream = stream or None
            lau.stream = stream
        rc = lau.fn(*lau.argv)
        if rc:
            kernel.fail(rc)
        return True

    def _grid(self, grid, args: tuple, kwargs: dict, rest: dict) -> tuple:
        if callable(grid):
            meta = dict(zip(self.names, args, strict=False), **kwargs)
            if rest:  # defaults and heuristics: none of them among this key's arguments (remember())
                meta.update(rest)
            grid = grid(meta)
        return (grid,) if isinstance(grid, int) else tuple(grid)

    def key_of(self, args: tuple, kwargs: dict):
        """The table's key of a call that reached a CUDA build (torch's tensor class and stream getter set
        on the first, duck-typed tensor classes learnt from it), or None where the key cannot say it."""
        if self.tensor is None:
            import torch

            self.tensor = torch.Tensor
            self.multi_gpu = torch.cuda.device_count() > 1
            getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            self.stream_of = getter if getter else (lambda d: int(torch.cuda.current_stream(d).cuda_stream))
        for a in args:
            t = type(a)
            if t is not self.tensor and t not in (int, float) and is_duck_tensor(a) and _duck_device(a) is not None:
                self.ducks.add(t)
        if len(args) not in self.keyers:  # the first pattern of classes seen at this arity gets its written-out key
            from .fastkey import make_keyer

            keyer = make_keyer(self, args)
            if keyer is not None:
                self.keyers[len(args)] = keyer
        return self._key(args, kwargs)[0]

    def remember(
        self, args: tuple, kwargs: dict, runtime_names: list[str], art: Artifact, full: dict
    ) -> None:
        if any(n in kwargs for n in runtime_names) or art.metadata.get("tma"):
            return  # a kernel with TMA takes tensor maps encoded per launch (runtime/launch.py): no fast path
        key = self.key_of(args, kwargs)
        if key is None:
            return
        pos = {n: i for i, n in enumerate(self.names[: len(args)])}
        picks = [(pos[n], None) if n in pos else (-1, full[n]) for n in runtime_names]
        if [i for i, _ in picks] == list(range(len(args))):
            picks = None  # the positional arguments are exactly the runtime arguments, in order
        elif [i for i, _ in picks] == list(range(len(picks))):
            picks = len(picks)  # they lead the positional arguments (constexprs follow: a warmed handle's launch)
        device = next((a.get_device() if type(a) is self.tensor else _duck_device(a) or 0
                       for a in args if type(a) is self.tensor or type(a) in self.ducks), 0)  # fmt: skip
        given = set(self.names[: len(args)]) | set(kwargs)
        rest = {k: v for k, v in full.items() if k not in given}  # defaults and heuristics, for grid(meta)
        kernel = load(art, device)
        if kernel.fast is None:
            return
        if len(self.table) >= _FAST_ENTRIES:  # keys with values (autotune keys, heuristics) can be many
            self.table.clear()
        try:
            self.table[key] = (kernel.fast, picks, device, rest, kernel)
        except TypeError:
            return

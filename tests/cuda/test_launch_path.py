"""The warm cuda launch path without a GPU: FastPath's key and table, and Launcher's packing of
arguments, grid and stream, with a libc function standing in for cuLaunchKernelEx (called through
ctypes exactly as the driver entry is) and a small class standing in for torch tensors."""

from __future__ import annotations

import ctypes
import struct

import pytest

from tests.kernels import source
from tilec import client
from tilec.client import ArgumentError, GridError
from tilec.runtime.cuda import Launcher, _LaunchConfig
from tilec.runtime.fastpath import FastPath


class Tensor:
    def __init__(self, ptr: int, dtype: str = "float32", device: int = 0, is_cuda: bool = True) -> None:
        self._ptr, self.dtype, self._device, self.is_cuda = ptr, dtype, device, is_cuda

    def data_ptr(self) -> int:
        return self._ptr

    def get_device(self) -> int:
        return self._device


def _noop():
    fn = ctypes.CDLL(None).getpid
    fn.restype = ctypes.c_int
    return fn


class Kernel:
    """A loaded kernel as FastPath sees it: a Launcher whose driver entry records what it would launch."""

    name = "add_kernel"

    def __init__(self, kinds: list[str]) -> None:
        self.fast = Launcher(0x1000, 128, 512, kinds, None)
        self.calls: list = []
        fmt = "=" + "".join({"ptr": "Q", "i32": "i"}[k] for k in kinds)

        def record(cfg, func, params, extra) -> int:
            lau = self.fast
            c = lau.config
            raw = [_slot(lau, i, f) for i, f in enumerate(fmt[1:])]
            self.calls.append((raw, (c.gridDimX, c.gridDimY, c.gridDimZ), c.hStream))
            return 0

        self.fast.fn = record

    def fail(self, rc: int) -> None:
        raise AssertionError(rc)


def _slot(launcher: Launcher, i: int, fmt: str):
    addr = launcher.params[i]
    size = struct.calcsize(fmt)
    return struct.unpack("=" + fmt.lstrip("="), ctypes.string_at(addr, size))[0]


def test_launcher_packs_arguments_at_aligned_offsets() -> None:
    lau = Launcher(0x1024, 256, 1024, ["i32", "ptr", "f32", "f64", "u32", "i64"], _noop())
    lau([-5, 0xDEAD0000BEEF, 1.5, 2.25, 7, -(2**40)], (3, 2), 0)  # the stand-in returns its pid, not 0
    assert [_slot(lau, i, f) for i, f in enumerate("=i =Q =f =d =I =q".split())] == [-5, 0xDEAD0000BEEF, 1.5, 2.25, 7, -(2**40)]
    offsets = [lau.params[i] - ctypes.addressof(lau.buf) for i in range(6)]
    assert offsets == [0, 8, 16, 24, 32, 40]
    cfg = _LaunchConfig.from_address(lau.argv[0].value)
    assert (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.sharedMemBytes) == (3, 2, 1, 256, 1024)
    assert _LaunchConfig.hStream.offset == 32 and ctypes.sizeof(_LaunchConfig) == 56  # cuda.h's CUlaunchConfig
    lau([1, 2, 3.0, 4.0, 5, 6], (9,), 0xABC0)
    assert (cfg.gridDimX, cfg.gridDimY, cfg.hStream) == (9, 1, 0xABC0)
    assert _slot(lau, 0, "=i") == 1


def test_launcher_rejects_bad_grids_and_arguments() -> None:
    lau = Launcher(0x1024, 128, 0, ["ptr", "i32"], _noop())
    with pytest.raises(GridError):
        lau([16, 1], (-1,), 0)
    assert lau([16, 1], (0, 4), 0) == 0  # no programs: nothing launched, success
    with pytest.raises(ArgumentError):
        lau([-1, 1], (1,), 0)  # a negative pointer
    with pytest.raises(ArgumentError):
        lau([16], (1,), 0)  # too few


def _fast(kinds=("ptr", "ptr", "ptr", "i32")) -> tuple[FastPath, Kernel, client.JITKernel]:
    k = client.jit(source("vector_add"), "add_kernel")
    fp = FastPath(k.params, tensor_type=Tensor, stream_of=lambda device: 0x50 + device)
    return fp, Kernel(list(kinds)), k


def test_fast_path_key_separates_specialisations() -> None:
    fp, _, _ = _fast()
    x, y, o = Tensor(1 << 20), Tensor(2 << 20), Tensor(3 << 20)
    base, raw = fp._key((x, y, o, 1024), {"BLOCK_SIZE": 256})
    assert raw == [1 << 20, 2 << 20, 3 << 20, 1024]
    same, _ = fp._key((Tensor(5 << 20), y, o, 2048), {"BLOCK_SIZE": 256})
    assert same == base  # other pointers and sizes of the same classes share the kernel
    others = [
        ((Tensor(1 << 20, "float16"), y, o, 1024), {"BLOCK_SIZE": 256}),  # dtype
        ((Tensor((1 << 20) + 4), y, o, 1024), {"BLOCK_SIZE": 256}),  # alignment
        ((x, y, o, 1001), {"BLOCK_SIZE": 256}),  # not divisible by 16
        ((x, y, o, 1), {"BLOCK_SIZE": 256}),  # equal to 1
        ((x, y, o, 2**33), {"BLOCK_SIZE": 256}),  # i64
        ((x, y, o, 1024), {"BLOCK_SIZE": 512}),  # constexpr
        ((x, y, o, 1024), {"BLOCK_SIZE": 256, "num_warps": 8}),  # launch option
        ((Tensor(1 << 20, is_cuda=False), y, o, 1024), {"BLOCK_SIZE": 256}),  # a host tensor
    ]
    keys = {fp._key(a, kw)[0] for a, kw in others}
    assert base not in keys and len(keys) == len(others)
    fp.multi_gpu = True
    assert fp._key((Tensor(1 << 20, device=1), y, o, 1024), {})[0] != fp._key((x, y, o, 1024), {})[0]
    fp.multi_gpu = False
    # a bool (FlagGems passes flags positionally) is its own class, by value: never the key of an int 1
    flags = {fp._key((x, y, o, v), {})[0] for v in (True, False, 1, 0)}
    assert len(flags) == 4 and fp._key((x, y, o, True), {})[1] == [1 << 20, 2 << 20, 3 << 20, 1]
    # None and a string (constexprs given positionally: Triton specialises None, Liger passes reduction="mean")
    # key by value, each its own class: never the key of another value or of an int
    values = {fp._key((x, y, o, v), {})[0] for v in (None, "a", "b", 0, 1, True)}
    assert None not in values and len(values) == 6 and fp._key((x, y, o, None), {})[1] == [1 << 20, 2 << 20, 3 << 20, None]
    assert fp._key((x, y, o, object()), {})[0] is None  # anything else: the full path
    assert fp._key((x, y, o, 1024, 256), {})[0] != fp._key((x, y, o, 1024, 512), {})[0]  # positional constexpr


def test_fast_path_launches_known_keys_only() -> None:
    fp, kern, _ = _fast()
    x, y, o = Tensor(1 << 20), Tensor(2 << 20), Tensor(3 << 20)
    assert not fp.launch((1,), (x, y, o, 1024), {"BLOCK_SIZE": 256})
    key, _ = fp._key((x, y, o, 1024), {"BLOCK_SIZE": 256})

    fp.table[key] = (kern.fast, None, 0, {"BLOCK_SIZE": 256}, kern)
    assert fp.launch((4,), (x, y, o, 1024), {"BLOCK_SIZE": 256})
    assert fp.launch(lambda meta: (meta["n_elements"] // meta["BLOCK_SIZE"],), (x, y, o, 2048), {"BLOCK_SIZE": 256})
    assert kern.calls == [([1 << 20, 2 << 20, 3 << 20, 1024], (4, 1, 1), 0x50),
                          ([1 << 20, 2 << 20, 3 << 20, 2048], (8, 1, 1), 0x50)]  # fmt: skip
    with pytest.raises(GridError):
        fp.launch((-1,), (x, y, o, 1024), {"BLOCK_SIZE": 256})
    calls = len(kern.calls)
    assert fp.launch((0,), (x, y, o, 1024), {"BLOCK_SIZE": 256}) and len(kern.calls) == calls  # nothing launched
    assert not fp.launch((1,), (x, y, o, 1024), {"BLOCK_SIZE": [256]})  # unhashable keyword: full path


AUTOTUNED = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n", "x_ptr"])
@triton.jit
def add_tuned(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
"""

HEURISTIC = """
import triton
import triton.language as tl


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1.0)
    else:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 2.0, mask=offs < n)
"""


class ShapedTensor(Tensor):
    def __init__(self, ptr: int, shape: tuple) -> None:
        super().__init__(ptr)
        self.shape = shape


def test_value_names_are_the_autotune_key_and_what_heuristics_read() -> None:
    assert client.jit(AUTOTUNED, "add_tuned").value_names() == {"n", "x_ptr"}
    assert client.jit(HEURISTIC, "add_one").value_names() == {"n", "BLOCK"}
    assert client.jit(source("vector_add"), "add_kernel").value_names() == set()


def test_autotuned_fast_path_is_memoised_per_tuning_key() -> None:
    """A warm autotuned launch is a table hit, as a plain one is, while the autotune key's values (a tensor
    key: its shape) are those the config was chosen for; other values take the full path (tune or lookup)."""
    k = client.jit(AUTOTUNED, "add_tuned")
    fp = FastPath(k.params, tensor_type=ShapedTensor, stream_of=lambda device: 0, value_names=k.value_names())
    kern = Kernel(["ptr", "ptr", "ptr", "i32"])
    x, y, o = ShapedTensor(1 << 20, (4096,)), ShapedTensor(2 << 20, (4096,)), ShapedTensor(3 << 20, (4096,))
    key, _ = fp._key((x, y, o, 4096), {})
    fp.table[key] = (kern.fast, None, 0, {"BLOCK": 128}, kern)
    grid = lambda meta: (triton_cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    assert fp.launch(grid, (ShapedTensor(5 << 20, (4096,)), y, o, 4096), {})
    assert kern.calls[-1][1] == (32, 1, 1)
    assert not fp.launch(grid, (x, y, o, 4000), {})  # same class of n (divisible by 16), another value
    assert not fp.launch(grid, (ShapedTensor(1 << 20, (8192,)), y, o, 4096), {})  # the key tensor's shape
    assert fp.launch(grid, (x, ShapedTensor(2 << 20, (8192,)), o, 4096), {})  # y is not in the key
    assert len(kern.calls) == 2


def test_heuristic_values_choose_the_fast_path_entry() -> None:
    """A heuristic computed from an int's value (EVEN = n % BLOCK == 0) must not be served from the entry of
    another value of the same class: 4000 and 4096 are both divisible by 16, only one by 1024."""
    k = client.jit(HEURISTIC, "add_one")
    fp = FastPath(k.params, tensor_type=Tensor, stream_of=lambda device: 0, value_names=k.value_names())
    kern = Kernel(["ptr", "ptr", "i32"])
    x, o = Tensor(1 << 20), Tensor(2 << 20)
    key, _ = fp._key((x, o, 4096), {"BLOCK": 1024})
    fp.table[key] = (kern.fast, None, 0, {"EVEN": True}, kern)
    assert fp.launch((4,), (x, o, 4096), {"BLOCK": 1024})
    assert not fp.launch((4,), (x, o, 4000), {"BLOCK": 1024})


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Strided:
    """A library's duck-typed tensor (FlagGems' StridedBuffer): data_ptr(), dtype and a device, no torch class."""

    def __init__(self, ptr: int, dtype: str = "float32", device: str = "cuda:0") -> None:
        self._ptr, self.dtype, self.device = ptr, dtype, device

    def data_ptr(self) -> int:
        return self._ptr


def test_fast_path_takes_duck_typed_tensors_seen_on_a_cuda_device() -> None:
    fp, kern, _ = _fast()
    x, y, o = Strided(1 << 20), Tensor(2 << 20), Strided(3 << 20)
    assert fp._key((x, y, o, 1024), {})[0] is None  # a class not seen yet: the full path (remember() learns it)
    fp.ducks.add(Strided)
    key, raw = fp._key((x, y, o, 1024), {})
    assert key is not None and raw == [1 << 20, 2 << 20, 3 << 20, 1024]
    assert fp._key((Strided(5 << 20), y, o, 2048), {})[0] == key
    assert fp._key((Strided((1 << 20) + 4), y, o, 1024), {})[0] != key  # alignment
    assert fp._key((Strided(1 << 20, "float16"), y, o, 1024), {})[0] != key  # dtype
    assert fp._key((Strided(1 << 20, device="cpu"), y, o, 1024), {})[0] is None  # a host buffer: the full path
    fp.table[key] = (kern.fast, None, 0, {}, kern)
    assert fp.launch((2,), (Strided(7 << 20), y, o, 1024), {})
    assert kern.calls[-1][0] == [7 << 20, 2 << 20, 3 << 20, 1024]


def test_written_out_keys_equal_the_general_key() -> None:
    """FastPath writes its key out for the first pattern of argument classes seen at an arity (fastkey.py).
    Over patterns of tensors (dtypes, alignments, host or device), ints of every class, floats and bools, with
    and without keywords, constexprs given positionally or not, tuning-key values and several devices, the
    written-out key and raw values equal the general key's; a call of another pattern gets the general key."""
    import itertools
    import random

    from tilec.runtime.fastkey import make_keyer

    rng = random.Random(5)
    k = client.jit(AUTOTUNED, "add_tuned")  # value names n and x_ptr (a tensor: its shape)
    k2 = client.jit(source("vector_add"), "add_kernel")  # constexpr BLOCK_SIZE last

    def tensor() -> ShapedTensor:
        t = ShapedTensor(rng.choice([1 << 20, (1 << 20) + 4, 3 << 20]), (rng.choice([64, 4096]),))
        t.dtype = rng.choice(["float32", "float16"])
        t.is_cuda = rng.random() < 0.9
        t._device = rng.choice([0, 1])
        return t

    def value(kind: str):  # type: ignore[no-untyped-def]
        return {"t": tensor, "i": lambda: rng.choice([1, 0, 16, 1001, 2**33, -5, 2**31]),
                "f": lambda: rng.choice([0.5, 1.0]), "b": lambda: rng.choice([True, False]),
                "n": lambda: None, "s": lambda: rng.choice(["mean", "sum"])}[kind]()  # fmt: skip

    checked = 0
    for kernel, multi in itertools.product((k, k2), (False, True)):
        for kinds in itertools.product("tibf", repeat=4):
            for extra in ((), ("i",), ("i", "i"), ("n", "s")):
                fp = FastPath(kernel.params, tensor_type=ShapedTensor, stream_of=lambda d: 0,
                              value_names=kernel.value_names())  # fmt: skip
                fp.multi_gpu = multi
                pattern = (*kinds, *extra)
                keyer = make_keyer(fp, tuple(value(c) for c in pattern))
                for _ in range(4):
                    args = tuple(value(c) for c in pattern)
                    kw = rng.choice([{}, {"BLOCK_SIZE": 256}, {"num_warps": 8, "BLOCK": 64}])
                    assert keyer(args, kw) == fp._key_any(args, kw), (pattern, args, kw, keyer.source)
                    checked += 1
                other = tuple(value("f" if c not in "fn" else "i") for c in pattern)
                assert keyer(other, {}) is None  # another pattern: the general key answers
    assert checked == 2 * 2 * 4**4 * 4 * 4
    fp, _, _ = _fast()
    x, y, o = Tensor(1 << 20), Tensor(2 << 20), Tensor(3 << 20)
    fp.key_of((x, y, o, 1024), {})
    assert 4 in fp.keyers and fp._key((x, y, o, object()), {}) == (None, None)  # the general key refuses it
    assert fp._key((x, y, o, "a"), {}) == fp._key_any((x, y, o, "a"), {}) != (None, None)  # it answers a string
    fp.multi_gpu = True
    assert fp.keyers == {}  # written for one device: written again when next asked


def test_keyword_arguments_that_continue_the_positional_ones_become_positional() -> None:
    """A call that names runtime arguments (Liger-Kernel's way) has one form for the warm path's key: the
    keywords that continue the positional arguments, in parameter order, join them; launch options stay
    keywords, and so does anything after a gap (the full path binds it by name)."""
    k = client.jit(source("vector_add"), "add_kernel")  # x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE
    x, y, o = Tensor(1 << 20), Tensor(2 << 20), Tensor(3 << 20)
    named = {"x_ptr": x, "y_ptr": y, "out_ptr": o, "n_elements": 4096, "BLOCK_SIZE": 256, "num_warps": 4}
    assert k.positional((), named) == ((x, y, o, 4096, 256), {"num_warps": 4})
    assert k.positional((x, y), {"out_ptr": o, "n_elements": 4096}) == ((x, y, o, 4096), {})
    gap = {"out_ptr": o, "BLOCK_SIZE": 256}
    assert k.positional((x,), gap) == ((x,), gap)  # y_ptr missing: left for binding to name
    assert k.positional((x, y, o, 4096), {"num_warps": 8}) == ((x, y, o, 4096), {"num_warps": 8})
    # constexprs alone by name: left as they are (the warm path keys them as keywords, at no cost to the call)
    assert k.positional((x, y, o, 4096), {"BLOCK_SIZE": 256}) == ((x, y, o, 4096), {"BLOCK_SIZE": 256})
    fp = FastPath(k.params, tensor_type=Tensor, stream_of=lambda d: 0)
    assert fp._key(*k.positional((), named))[0] == fp._key((x, y, o, 4096, 256), {"num_warps": 4})[0] is not None

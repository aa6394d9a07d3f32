"""torch.compile with tilec: every Triton kernel PyTorch Inductor generates is compiled by tilec (looked up in
and published to the shared cache when a server is configured) and launched by tilec's runtime.

    import tilec.inductor
    compiled = torch.compile(model, backend=tilec.inductor.backend)   # this model only
    tilec.inductor.install()                                           # or: every torch.compile of the process

How: Inductor's generated wrapper asks `AsyncCompile.triton(kernel_name, source)` for each kernel and then
calls `kernel.run(*args, stream=...)`. While tilec is on, that method returns a `TilecKernel` instead of
Inductor's CachingAutotuner: the module source goes to `tilec.jit` as it is (the frontend reads the
`@triton_heuristics` decorator as data, tilec's config space stands in for Inductor's heuristics), and
`run` launches with the grid Inductor's launcher would use. Triton never compiles these kernels. A kernel
tilec cannot compile falls back to Inductor's own path, with one warning naming it (see `stats()`).
torch is imported only when the integration is used.
"""

from __future__ import annotations

import contextlib
import struct
import threading
import warnings
from typing import Any

from tilec.compiler.errors import CompileError
from tilec.compiler.frontend import read_kernel
from tilec.compiler.frontend.inductor import launch_grid

__all__ = ["TilecKernel", "backend", "install", "installed", "stats", "uninstall"]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"original": None, "global": False, "server": None}
_ACTIVE = threading.local()  # set while tilec.inductor.backend compiles a graph
_STATS = {"tilec": 0, "fallback": 0, "fallback_kernels": []}
_GRID_NAMES = {"xnumel", "ynumel", "znumel", "r0_numel"}  # what launch_grid (frontend/inductor.py) reads


class TilecKernel:
    """One Inductor kernel as tilec runs it: `run(*args, stream=...)` as the generated wrapper calls it."""

    def __init__(self, kernel_name: str, source: str, server: Any, fallback: Any):
        from ._jit import jit

        self.kernel_name = kernel_name
        self.source = source
        self.ks = read_kernel(source, kernel_name, filename=f"{kernel_name}.py")
        if self.ks.inductor is None:
            raise CompileError(f"{kernel_name} has no Inductor decorator")
        self.spec = self.ks.inductor
        self.runtime_names = [p.name for p in self.ks.params if not p.constexpr]
        self.names = self.runtime_names + self.spec.extra_launcher_args
        self.jit = jit(source, kernel_name, server=server)
        self._fallback_factory = fallback
        self._fallback: Any = None
        # the grid of a warm launch, by the values it is computed from (the numels, a fixed grid's arguments):
        # the config is chosen per tuning key, the numels and the dtypes of the kernel's signature, which an
        # Inductor kernel is generated for
        fixed = [g for g in self.spec.inductor_meta.get("fixed_grid") or () if isinstance(g, str)]
        self._grid_pos = [i for i, n in enumerate(self.names) if n in _GRID_NAMES or n in fixed]
        self._grids: dict[tuple, tuple[int, int, int]] = {}
        # the warm launch: per the values of the arguments that are not tensors, the loaded kernel's launcher,
        # its grid and the positions of the tensors (set by the first full-path launch: see _remember_grid)
        self._warm: dict[tuple, tuple] = {}
        self._value_pos: tuple[int, ...] | None = None

    def run(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        """Launch on the stream Inductor's wrapper passes (else the current stream of the arguments' device).
        A warm launch (the same values of the non-tensor arguments as an earlier one, every tensor 16-byte
        aligned) packs the tensors' addresses and launches: an Inductor kernel's signature, dtypes and
        constexprs are fixed by its source, so nothing else can choose another build."""
        if self._fallback is not None:
            self._fallback.run(*args, stream=stream, **kwargs)
            return
        n = len(self.runtime_names)
        if self._value_pos is not None and not kwargs:
            try:
                warm = self._warm.get(tuple([args[i] for i in self._value_pos]))
            except (IndexError, TypeError):
                warm = None
            if warm is not None:
                lau, grid, tensors, kernel, device, multi_gpu = warm
                raw = list(args[:n])
                bits = 0
                try:
                    for i in tensors:
                        bits |= (p := raw[i].data_ptr())
                        raw[i] = p
                    if not bits & 15 and not (multi_gpu and args[tensors[0]].get_device() != device):
                        lau.pack(lau.buf, 0, *raw)
                        if grid != lau.grid:
                            lau.config.gridDimX, lau.config.gridDimY, lau.config.gridDimZ = grid
                            lau.grid = grid
                        if type(stream) is not int:
                            stream = self._stream_of(device)
                        if stream != lau.stream:
                            lau.config.hStream = stream or None
                            lau.stream = stream
                        rc = lau.fn(*lau.argv)
                        if rc:
                            kernel.fail(rc)
                        return
                except (AttributeError, struct.error):  # not the arguments it was made for: the full path
                    pass
        try:
            at = tuple(args[i] for i in self._grid_pos)
            grid = self._grids.get(at)
        except (IndexError, TypeError):  # too few arguments, or an unhashable one: the full path says why
            at, grid = None, None
        try:
            if grid is not None:
                self.jit.run(grid, args[:n], {})
                return
            values = dict(zip(self.names, args, strict=False))
            spec = self.spec
            self.jit.run(lambda meta: launch_grid(spec, meta, values), args[:n], {})
        except CompileError as exc:
            self._fall_back(exc)
            self._fallback.run(*args, stream=stream, **kwargs)
            return
        if at is not None:
            self._remember_grid(at, args, n, values)

    def _remember_grid(self, at: tuple, args: tuple, n: int, values: dict) -> None:
        """After a full-path launch: the grid its warm entry's config gives, for launches with these values,
        and the warm launch of these non-tensor values where the call's tensors were all 16-byte aligned."""
        fast = self.jit.__dict__.get("_cuda_fast")
        key = fast._key(args[:n], {})[0] if fast is not None else None
        entry = fast.table.get(key) if key is not None else None
        if entry is None:
            return
        if len(self._grids) >= 4096:
            self._grids.clear()
            self._warm.clear()
        grid = self._grids[at] = launch_grid(self.spec, entry[3], values)
        lau, picks, device, _, kernel = entry
        tensors = tuple(i for i, a in enumerate(args[:n]) if type(a) is fast.tensor)
        positions = tuple(i for i in range(len(args)) if i not in tensors)
        grid = tuple(grid) + (1,) * (3 - len(grid))
        if picks is not None or not tensors or any(args[i].data_ptr() & 15 for i in tensors) or 0 in grid:
            return
        if self._value_pos is None:
            self._value_pos = positions
        elif positions != self._value_pos:
            return
        self._stream_of = fast.stream_of
        self._warm[tuple(args[i] for i in positions)] = (lau, grid, tensors, kernel, device, fast.multi_gpu)

    def _fall_back(self, exc: Exception) -> None:
        warnings.warn(f"tilec could not compile Inductor's {self.kernel_name} ({exc}); Inductor's own Triton path "
                      "runs it", RuntimeWarning, stacklevel=3)  # fmt: skip
        self._fallback = self._fallback_factory()
        _STATS["tilec"] -= 1
        _STATS["fallback"] += 1
        _STATS["fallback_kernels"].append(self.kernel_name)

    # what Inductor's wrapper or tools may read off a kernel object
    def precompile(self, *args: Any, **kwargs: Any) -> None:
        return None

    @property
    def inductor_meta(self) -> dict:
        return dict(self.spec.inductor_meta)


def _triton(self: Any, kernel_name: str, source_code: str, device_str: str = "cuda") -> Any:
    original = _STATE["original"]
    if not (_STATE["global"] or getattr(_ACTIVE, "on", False)) or device_str != "cuda":
        return original(self, kernel_name, source_code, device_str)

    def fallback() -> Any:
        kernel = original(self, kernel_name, source_code, device_str)
        return kernel.result() if hasattr(kernel, "result") else kernel

    try:
        kernel = TilecKernel(kernel_name, source_code, _STATE["server"], fallback)
    except CompileError as exc:
        warnings.warn(f"tilec cannot read Inductor's {kernel_name} ({exc}); Inductor's own Triton path runs it",
                      RuntimeWarning, stacklevel=2)  # fmt: skip
        _STATS["fallback"] += 1
        _STATS["fallback_kernels"].append(kernel_name)
        return original(self, kernel_name, source_code, device_str)
    _STATS["tilec"] += 1
    return kernel


def _patch(server: Any) -> None:
    from torch._inductor.async_compile import AsyncCompile

    with _LOCK:
        if _STATE["original"] is None:
            _STATE["original"] = AsyncCompile.triton
            AsyncCompile.triton = _triton
        if server is not None:
            _STATE["server"] = server


def install(server: Any = None) -> None:
    """Every Triton kernel Inductor generates from now on in this process goes through tilec. `server`: a
    tilec server (URL or Client) for the shared cache; None: TILEC_URL if set; False: none."""
    _patch(server)
    _STATE["global"] = True


def uninstall() -> None:
    """Kernels generated from now on take Inductor's own path again (ones already made stay with tilec)."""
    _STATE["global"] = False


def installed() -> bool:
    return bool(_STATE["global"])


def stats() -> dict:
    """How many kernels tilec compiled and launched, and which ones fell back to Inductor's path."""
    return {"tilec": _STATS["tilec"], "fallback": _STATS["fallback"],
            "fallback_kernels": list(_STATS["fallback_kernels"])}  # fmt: skip


def backend(gm: Any, example_inputs: Any, server: Any = None, **options: Any) -> Any:
    """A torch.compile backend: Inductor, with tilec compiling and launching every kernel of this graph.
    `torch.compile(model, backend=tilec.inductor.backend)`; Inductor options as torch.compile's `options`
    through functools.partial(backend, options={...})."""
    from torch._inductor.compile_fx import compile_fx

    _warn_if_no_cuda_inputs(example_inputs)
    _patch(server)
    patches = dict(options.pop("options", None) or {})
    with _active():
        return compile_fx(gm, example_inputs, config_patches=patches)


NO_CUDA_WARNING = (
    "tilec.inductor: this graph's tensors are not on a CUDA device, and for those Inductor generates C++, "
    "not Triton kernels: tilec compiles none of them (stats() stays at 0); tilec takes over Inductor's "
    "Triton kernels of CUDA tensors"
)
_warned_no_cuda = False


def _warn_if_no_cuda_inputs(example_inputs: Any) -> None:
    """Once per process: a graph without CUDA tensors runs Inductor's C++ kernels, none of them tilec's;
    said, rather than stats() quietly reading 0/0."""
    global _warned_no_cuda
    tensors = [t for t in example_inputs if hasattr(t, "device")]
    if _warned_no_cuda or not tensors or any(t.device.type == "cuda" for t in tensors):
        return
    _warned_no_cuda = True
    warnings.warn(NO_CUDA_WARNING, RuntimeWarning, stacklevel=3)


@contextlib.contextmanager
def _active():
    saved = getattr(_ACTIVE, "on", False)
    _ACTIVE.on = True
    try:
        yield
    finally:
        _ACTIVE.on = saved

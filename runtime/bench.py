"""Benchmarking one compiled artifact on a resolved launch (compiler/tune/launch.py): on the host
(wall time per launch) or on a CUDA GPU (events around each launch, L2 flushed between), and in a
replaceable child process, so a kernel that faults or hangs fails its trial, not the tuner.
"""

from __future__ import annotations

import math
import os
import platform
import signal
import time
from collections.abc import Callable
from typing import Any

from tilec.compiler.artifact import Artifact, parse_target
from tilec.compiler.tune.launch import LaunchDescriptionError as DescriptionError
from tilec.compiler.tune.launch import ResolvedLaunch, host_arrays
from tilec.compiler.tune.stats import Timing, adaptive

from .errors import KernelAssertionError, LaunchError, TilecError
from .sandbox import Child, Limits, clean
from .standby import standby

FAULT_KINDS = ("fault", "crash", "timeout", "launch")
_L2_FLUSH_BYTES = 256 << 20  # larger than the L2 of any GPU so far (H100: 50 MiB)
_WARMUP = 3  # cuda launches after the first (which loads and checks), untimed


class TrialFault(TilecError):
    """A trial that produced no timing. `kind`: "fault" (the kernel faulted: illegal address, trap,
    device assert), "crash" (the bench process died), "timeout" (no answer in time) or "launch" (the
    launch was refused: bad grid, arguments, resources, a binary for another GPU)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(kind, message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def _grid_env(config: dict) -> dict:
    """A config as the grid sees it: its kwargs and launch options side by side. The tuner's form
    {"kwargs": {...}, "num_warps": 4, "num_stages": 3} is flattened; a flat dict is taken as it is."""
    if isinstance(config.get("kwargs"), dict):
        return {**config["kwargs"], **{k: v for k, v in config.items() if k != "kwargs"}}
    return dict(config)


def _grid(resolved: ResolvedLaunch, config: dict) -> tuple[int, int, int]:
    try:
        return resolved.grid(_grid_env(config))
    except DescriptionError as exc:
        raise TrialFault("launch", f"the grid cannot be computed for this config: {exc}") from None


def _arg_names(art: Artifact, resolved: ResolvedLaunch) -> list[str]:
    """The runtime arguments in the binary's order: its own names where it records them (cpu)."""
    names = [a.get("name") for a in art.metadata.get("args", [])]
    if names and all(n in resolved.tensors or n in resolved.scalars for n in names):
        return names
    return list(resolved.params)


def _scalar(value: int | float | bool) -> int | float:
    return int(value) if isinstance(value, bool) else value


# ---- cpu ----------------------------------------------------------------------------------------------


class CpuBench:
    """Times cpu artifacts over host arrays made once: wall time of each launch (perf_counter)."""

    def __init__(self, resolved: ResolvedLaunch, seed: int = 0) -> None:
        self.resolved = resolved
        self.arrays = host_arrays(resolved, seed)
        self._loaded: tuple[str, Any] | None = None  # (launch_key, CpuKernel): one engine alive at a time

    def _kernel(self, art: Artifact):
        from .cpu import CpuKernel

        if self._loaded is None or self._loaded[0] != art.launch_key:
            self._loaded = None  # drop the previous engine before linking the next
            self._loaded = (art.launch_key, CpuKernel(art))
        return self._loaded[1]

    def _raw_args(self, art: Artifact) -> list[int | float]:
        r = self.resolved
        return [
            self.arrays[n].ctypes.data if n in r.tensors else _scalar(r.scalars[n])
            for n in _arg_names(art, r)
        ]

    def time(
        self,
        art: Artifact,
        config: dict,
        *,
        rel: float = 0.01,
        min_reps: int = 5,
        max_reps: int = 200,
        max_seconds: float = 1.0,
        graph: bool = False,  # no graphs on the host: accepted so callers need not know the target
    ) -> Timing:
        grid = _grid(self.resolved, config)
        try:
            kernel = self._kernel(art)
            raw = self._raw_args(art)
            kernel.launch(raw, grid)  # warm-up: pages the arrays in, starts nothing lazily later
        except KernelAssertionError as exc:
            raise TrialFault("fault", str(exc)) from None
        except LaunchError as exc:
            raise TrialFault("launch", str(exc)) from None

        def sample(n: int) -> list[float]:
            out = []
            for _ in range(n):
                t0 = time.perf_counter()
                kernel.launch(raw, grid)
                out.append((time.perf_counter() - t0) * 1e3)
            return out

        try:
            return adaptive(sample, rel=rel, min_reps=min_reps, max_reps=max_reps, max_seconds=max_seconds)
        except KernelAssertionError as exc:
            raise TrialFault("fault", str(exc)) from None

    def device_info(self) -> dict:
        return cpu_device_info()


def cpu_device_info() -> dict:
    return {
        "gpu_model": None,
        "driver_version": None,
        "cuda_version": None,
        "sm_clock_mhz": None,
        "mem_clock_mhz": None,
        "arch": "cpu",
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
    }


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


# ---- cuda ---------------------------------------------------------------------------------------------


class CudaBench:
    """Times cubins on one GPU: the inputs copied to device buffers once; per repetition the L2 is
    flushed (a 256 MiB memset), then events around the launch (or around a graph replay of it), all on
    the legacy default stream; one synchronisation per batch. A fault leaves the context dead: every
    later call raises TrialFault("fault") (BenchProcess replaces the process)."""

    def __init__(self, resolved: ResolvedLaunch, seed: int = 0, device: int = 0) -> None:
        from . import cuda as rt

        self.rt, self.drv = rt, rt._driver()
        self.resolved, self.device = resolved, device
        self.ctx = rt._context(device)  # the device's primary context, made current
        self.dead: str | None = None
        self.buffers: dict[str, int] = {}
        for name, arr in host_arrays(resolved, seed).items():
            ptr = int(rt.check(self.drv.cuMemAlloc(max(1, arr.nbytes))))
            self.buffers[name] = ptr
            if arr.nbytes:
                rt.check(self.drv.cuMemcpyHtoD(ptr, arr.ctypes.data, arr.nbytes))
        self.flush = int(rt.check(self.drv.cuMemAlloc(_L2_FLUSH_BYTES)))
        self.events: list[tuple[Any, Any]] = []
        self._loaded: tuple[str, Any] | None = None

    # -- helpers

    def _call(self, result, kind: str = "launch") -> Any:
        """Unpack a driver result; an error becomes a TrialFault ("fault" once the context is dead)."""
        try:
            return self.rt.check(result)
        except LaunchError as exc:
            raise self._fault(kind, str(exc)) from None

    def _fault(self, kind: str, message: str) -> TrialFault:
        """A launch-time error is a fault when the context no longer synchronises (sticky error)."""
        if kind != "fault":
            err = self.drv.cuCtxSynchronize()[0]
            if int(err) == 0:
                return TrialFault(kind, message)
        self.dead = message
        return TrialFault("fault", message)

    def _kernel(self, art: Artifact):
        if self._loaded is not None and self._loaded[0] == art.launch_key:
            return self._loaded[1]
        if self._loaded is not None:
            self.drv.cuModuleUnload(self._loaded[1].module)  # one module resident at a time
            self._loaded = None
        try:
            kernel = self.rt.CudaKernel(art)
        except LaunchError as exc:
            raise self._fault("launch", f"cannot load the cubin: {exc}") from None
        self._loaded = (art.launch_key, kernel)
        return kernel

    def _event_pairs(self, n: int) -> list[tuple[Any, Any]]:
        flags = self.drv.CUevent_flags.CU_EVENT_DEFAULT
        while len(self.events) < n:
            self.events.append(
                (self._call(self.drv.cuEventCreate(flags)), self._call(self.drv.cuEventCreate(flags)))
            )
        return self.events[:n]

    def _sync(self) -> None:
        self._call(self.drv.cuCtxSynchronize(), "fault")  # an error here comes from the kernel: a fault

    def release(self) -> None:
        """Free what this launch holds on the GPU (buffers, the L2 flush buffer, events, the loaded module), for
        a kept child's next bench; raises TrialFault when the context is dead (the child is not kept then)."""
        if self.dead is not None:
            raise TrialFault("fault", self.dead)
        self._sync()
        if self._loaded is not None:
            self._call(self.drv.cuModuleUnload(self._loaded[1].module))
            self._loaded = None
        for start, end in self.events:
            self._call(self.drv.cuEventDestroy(start))
            self._call(self.drv.cuEventDestroy(end))
        self.events = []
        for ptr in [*self.buffers.values(), self.flush]:
            self._call(self.drv.cuMemFree(ptr))
        self.buffers, self.flush = {}, 0
        self._sync()

    # -- timing

    def time(
        self,
        art: Artifact,
        config: dict,
        *,
        rel: float = 0.01,
        min_reps: int = 10,
        max_reps: int = 1000,
        max_seconds: float = 2.0,
        graph: bool = False,
    ) -> Timing:
        if self.dead is not None:
            raise TrialFault("fault", f"the CUDA context died in an earlier trial: {self.dead}")
        grid = _grid(self.resolved, config)
        kernel = self._kernel(art)
        r = self.resolved
        raw = [self.buffers[n] if n in r.tensors else _scalar(r.scalars[n]) for n in r.params]
        if art.metadata.get("tma"):  # block pointers loaded by TMA: their tensor maps, from these arguments
            from .tma import tensor_maps

            try:
                raw += tensor_maps(raw, art.metadata["tma"])
            except TilecError as exc:  # an argument TMA cannot take, or the driver refused the encoding
                raise self._fault("launch", f"cannot encode the kernel's tensor maps: {exc}") from None

        def launch(stream: int = 0) -> None:
            try:
                kernel.launch(raw, grid, stream)
            except LaunchError as exc:
                raise self._fault("launch", str(exc)) from None

        launch()
        self._sync()  # the first run alone: a fault is caught before any timing
        for _ in range(_WARMUP):
            launch()
        self._sync()
        run, cleanup = (launch, None) if not graph else self._graph(kernel, raw, grid)
        try:
            return adaptive(
                self._sampler(run), rel=rel, min_reps=min_reps, max_reps=max_reps, max_seconds=max_seconds
            )
        finally:
            if cleanup is not None:
                cleanup()

    def _sampler(self, run: Callable[[], None]) -> Callable[[int], list[float]]:
        drv = self.drv
        words = _L2_FLUSH_BYTES // 4

        def sample(n: int) -> list[float]:
            pairs = self._event_pairs(n)
            for start, end in pairs:
                self._call(drv.cuMemsetD32Async(self.flush, 0, words, 0))
                self._call(drv.cuEventRecord(start, 0))
                run()
                self._call(drv.cuEventRecord(end, 0))
            self._sync()
            return [float(self._call(drv.cuEventElapsedTime(s, e))) for s, e in pairs]

        return sample

    def _graph(self, kernel, raw: list, grid: tuple) -> tuple[Callable[[], None], Callable[[], None]]:
        """The launch captured once in a CUDA graph (on a stream of its own: the legacy stream cannot
        capture); replays go to the default stream like plain launches."""
        drv = self.drv
        stream = self._call(drv.cuStreamCreate(drv.CUstream_flags.CU_STREAM_NON_BLOCKING))
        try:
            self._call(
                drv.cuStreamBeginCapture(stream, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            )
            refused = None
            try:
                kernel.launch(raw, grid, int(stream))
            except LaunchError as exc:
                refused = str(exc)
            # ended before anything else: no synchronisation is legal while capturing
            ended = drv.cuStreamEndCapture(stream)
            if refused is not None:
                raise self._fault("launch", refused)
            graph = self._call(ended)
            try:
                exe = self._call(drv.cuGraphInstantiate(graph, 0))
            finally:
                drv.cuGraphDestroy(graph)
        finally:
            drv.cuStreamDestroy(stream)

        def replay() -> None:
            self._call(drv.cuGraphLaunch(exe, 0))

        return replay, lambda: drv.cuGraphExecDestroy(exe)

    def device_info(self) -> dict:
        return cuda_device_info(self.device)


def cuda_device_info(device: int = 0) -> dict:
    """GPU model, the NVIDIA driver (kernel module) and the CUDA version it supports, the rated
    (boost) SM and memory clocks, and the arch; None where the driver does not say. Needs no context,
    so a tune's parent process asks it while the bench child is still starting."""
    from . import cuda as rt

    drv = rt._driver()
    rt._init()
    dev = rt.check(drv.cuDeviceGet(device))
    attr = drv.CUdevice_attribute

    def mhz(name: str) -> int | None:
        a = getattr(attr, name, None)  # clock attributes may leave future drivers
        if a is None:
            return None
        err, khz = drv.cuDeviceGetAttribute(a, dev)
        return None if int(err) != 0 or khz <= 0 else round(khz / 1000)

    err, name = drv.cuDeviceGetName(256, dev)
    err_v, version = drv.cuDriverGetVersion()
    return {
        "gpu_model": name.split(b"\0", 1)[0].decode(errors="replace") if int(err) == 0 else None,
        "driver_version": _nvidia_driver(),
        "cuda_version": f"{version // 1000}.{version % 1000 // 10}" if int(err_v) == 0 else None,
        "sm_clock_mhz": mhz("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
        "mem_clock_mhz": mhz("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"),
        "arch": f"sm_{rt.device_sm(device)}",
    }


def device_info(target: str, device: int = 0) -> dict:
    """What a trial records of the machine that timed it, asked in this process (no bench needed)."""
    return cpu_device_info() if target == "cpu" else cuda_device_info(device)


def _nvidia_driver() -> str | None:
    """The kernel driver's version ("580.159.04"), which cuDriverGetVersion does not give (only CUDA's)."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            words = f.readline().split()
    except OSError:
        return None
    return next((w for w in words if w[:1].isdigit() and w.count(".") >= 1), None)


def make_bench(
    target: str, resolved: ResolvedLaunch, seed: int = 0, *, device: int = 0
) -> CpuBench | CudaBench:
    """The bench of a target string ("cpu", "cuda:sm_90"); a cuda target must be the GPU's own arch."""
    kind, sm = parse_target(target)
    if kind == "cpu":
        return CpuBench(resolved, seed)
    from .cuda import device_sm

    have = device_sm(device)
    if have != sm:
        raise TrialFault("launch", f"target {target} cannot run on GPU {device}, which is sm_{have}")
    return CudaBench(resolved, seed, device)


# ---- the bench process (the parent's side; the child's is runtime/bench_child.py) ---------------------------


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "the bench process stopped answering"
    if code < 0:
        try:
            return f"the bench process died of signal {signal.Signals(-code).name}"
        except ValueError:
            return f"the bench process died of signal {-code}"
    return f"the bench process exited with status {code}"


def _timing(value: Any) -> Timing:
    """A Timing from the child's JSON, every field checked: finite, non-negative times, a whole count."""
    try:
        t = Timing(**{k: value[k] for k in ("median_ms", "lo_ms", "hi_ms", "reps", "converged")})
    except (TypeError, KeyError) as exc:
        raise TrialFault("crash", "the bench process answered a malformed timing") from exc
    times = (t.median_ms, t.lo_ms, t.hi_ms)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
               for x in times) or not isinstance(t.reps, int) or t.reps < 1:  # fmt: skip
        raise TrialFault("crash", "the bench process answered a malformed timing")
    return t


class BenchProcess:
    """A bench in a sandboxed child process (runtime/sandbox.py: exec'd fresh, empty environment, limits,
    namespaces, seccomp), replaced after a fault, a crash or a timeout: a kernel that faults fails its
    trial, not the worker. The child starts at construction (overlapping the caller's compiles);
    `timeout_s` bounds each call after start-up, `start_timeout_s` the start (imports, arrays, device
    buffers); `limits` what the child may use. Not for use from several threads."""

    def __init__(
        self,
        target: str,
        resolved: ResolvedLaunch,
        seed: int = 0,
        timeout_s: float = 60.0,
        *,
        device: int = 0,
        start_timeout_s: float = 120.0,
        limits: Limits | None = None,
        owner: Any = None,
    ) -> None:
        self._spec = (target, resolved, seed, device)
        # whose launch this is (a tune worker passes the job's submit token): a GPU child may then come from,
        # and go back to, the keep of that owner's children (runtime/standby.py), never another owner's
        self.owner = owner if target != "cpu" else None
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.limits = limits or Limits()
        self.restarts = 0
        self.layers: dict[str, Any] = {}  # what the child's sandbox applied (its answer to the start)
        self._child: Child | None = None
        self._ready = False
        self._spawned = 0
        self.start_wait_s = 0.0  # seconds the calls have waited on a child's start (imports, context, arrays)
        self._start()

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def _start(self) -> None:
        kind = "cpu" if self._spec[0] == "cpu" else "cuda"
        self._child = standby.take(kind, self._spec[3], self.limits, self.owner)
        self._child.jobs += 1
        try:
            self._child.send(self._local_spec())
        except (BrokenPipeError, OSError):  # a child started ahead that has died since: a fresh one
            self._child.kill()
            self._child = standby.spawn(kind, self._spec[3], self.limits)
            self._child.send(self._local_spec())
        self._ready = False
        if self._spawned:
            self.restarts += 1
        self._spawned += 1

    def _local_spec(self) -> tuple:
        target, resolved, seed, device = self._spec
        return target, resolved, seed, self._child.local(device)

    def _discard(self) -> int | None:
        """Kill the child (if alive) and forget it; its exit code."""
        child, self._child = self._child, None
        if child is None:
            return None
        return child.kill(grace_s=0.2)  # a child that just crashed: let its exit code arrive

    def _ask(self, message: tuple | None, timeout: float, doing: str) -> Any:
        child = self._child
        if message is not None:
            try:
                child.send(message)
            except (BrokenPipeError, OSError):
                raise TrialFault("crash", f"{_exit_reason(self._discard())} {doing}") from None
        if not child.poll(timeout):
            self._discard()
            raise TrialFault("timeout", f"no answer in {timeout:g} s {doing}; the bench process was killed")
        try:
            reply = child.recv()
        except (EOFError, OSError, ValueError):
            raise TrialFault("crash", f"{_exit_reason(self._discard())} {doing}") from None
        if isinstance(reply, dict) and "ok" in reply:
            return reply["ok"]
        kind = reply.get("fault") if isinstance(reply, dict) else None
        if kind not in FAULT_KINDS:
            self._discard()
            raise TrialFault("crash", f"the bench process answered something else than a result {doing}")
        if kind != "launch":  # after a fault the context is dead; after a crash the state is unknown
            self._discard()
        raise TrialFault(kind, clean(reply.get("message", "")))

    def _ensure(self) -> None:
        if self._child is None:
            self._start()
        if not self._ready:
            began = time.perf_counter()
            try:
                layers = self._ask(None, self.start_timeout_s, "while starting")
            except TrialFault:
                self._discard()  # a child that could not start has exited, whatever the kind
                raise
            finally:
                self.start_wait_s += time.perf_counter() - began
            self.layers = layers if isinstance(layers, dict) else {}
            self._ready = True

    def time(self, art: Artifact, config: dict, **kw: Any) -> Timing:
        """Bench.time in the child; raises TrialFault (the child is replaced on the next call)."""
        self._ensure()
        return _timing(
            self._ask(("time", art, config, kw), self.timeout_s, f"while timing {art.kernel_name}")
        )

    def device_info(self) -> dict:
        self._ensure()
        info = self._ask(("info",), self.timeout_s, "while reading the device")
        if not isinstance(info, dict):
            raise TrialFault("crash", "the bench process answered a malformed device description")
        return {
            clean(k, 40): v if isinstance(v, (int, float)) or v is None else clean(v, 120)
            for k, v in info.items()
        }

    def close(self) -> None:
        if self._child is None:
            return
        if self.owner is not None and self._ready and self._reset():
            return
        try:
            self._child.send(("close",))
        except (BrokenPipeError, OSError):
            pass
        child, self._child = self._child, None
        if standby.count:  # a worker: the next job need not wait for this child's exit
            import threading

            threading.Thread(target=child.kill, kwargs={"grace_s": min(5.0, self.timeout_s)}, daemon=True).start()
        else:
            child.kill(grace_s=min(5.0, self.timeout_s))

    def _reset(self) -> bool:
        """Hand a healthy child back to its owner's keep (its launch's GPU memory freed): True when kept."""
        child = self._child
        if standby.keep_max <= 0 or not child.alive():
            return False
        try:
            child.send(("reset",))
            ok = child.poll(min(10.0, self.timeout_s)) and child.recv() == {"ok": True}
        except (BrokenPipeError, EOFError, OSError, ValueError):
            ok = False
        if not ok or not standby.keep(child, "cuda", self._spec[3], self.limits, self.owner):
            return False  # close() ends it as any other
        self._child = None
        return True

    def __enter__(self) -> BenchProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

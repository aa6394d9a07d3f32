"""The drop-in: `tilec.install()` routes every `@triton.jit` kernel made afterwards through tilec (its
compiler, the team's server and cache), leaving a library's own host decorators and Python to run as they
do under Triton: `triton.autotune` and `triton.heuristics` objects call the kernel's `run`, which is
tilec's. A kernel tilec cannot compile runs under Triton, with one warning, and is counted in
`tilec.stats()`; with TILEC_STRICT=1 that is an error instead. `python -m tilec run script.py` (or
TILEC_TRITON=1 with `import tilec`) installs it before the script runs.
"""

from __future__ import annotations

import os
import threading
import types
import warnings
from typing import Any

from tilec.compiler.errors import CompileError, OutOfResourcesError, StaticAssertionError

from ._exceptions import ArgumentError, TargetError

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"installed": False, "patched": [], "classes": {}}
_STATS: dict[str, Any] = {"routed": 0, "launched": 0, "fallbacks": 0, "reasons": {}, "kernels": set()}
# Triton's launch options that tilec's launch has no use for (it plans its own)
_TRITON_ONLY_OPTIONS = frozenset({"num_ctas", "maxnreg", "debug", "enable_fp_fusion", "launch_cooperative_grid",
                        "launch_pdl", "num_buffers_warp_spec", "num_consumer_groups", "reg_dec_producer",
                        "reg_inc_consumer", "instrumentation_mode", "fpsan_homomorphic_casts", "stream"})  # fmt: skip
_FALLBACK_ERRORS = (CompileError, ArgumentError, TargetError, NotImplementedError)


class RoutedKernel(Exception):
    """TILEC_STRICT=1 (or =fallback): a kernel that tilec could not take (its reason is the message)."""


def install(*, strict: bool | None = None) -> None:
    """Route `@triton.jit` kernels decorated from now on through tilec. `strict` (None: TILEC_STRICT=1 or
    =fallback) makes a kernel tilec cannot compile an error instead of a warning and Triton's own compile.
    (TILEC_STRICT=1 also makes every launch that would compile or tune a StrictError: client/_strict.py.)"""
    import triton
    import triton.runtime.jit as rjit

    with _LOCK:
        if strict is not None:
            _STATE["strict"] = strict
        if _STATE["installed"]:
            return
        original = rjit.jit
        try:  # every option a Triton config carries (this Triton's), besides the two tilec plans with
            _STATE["triton_options"] = frozenset(triton.Config({}).all_kwargs()) - {"num_warps", "num_stages"}
        except Exception:  # noqa: BLE001 - an older Triton: the fixed list below stands
            _STATE["triton_options"] = frozenset()
        _STATE["dropped"] = _TRITON_ONLY_OPTIONS | _STATE["triton_options"]  # what run() leaves out

        def jit(fn: Any = None, **options: Any) -> Any:
            if fn is None:
                return lambda f: jit(f, **options)
            return route(original(fn, **options))

        jit.__doc__ = original.__doc__
        jit.__wrapped__ = original  # type: ignore[attr-defined]
        for owner in (triton, rjit):
            _STATE["patched"].append((owner, "jit", owner.jit))
            owner.jit = jit  # type: ignore[attr-defined]
        _wrap_autotune(triton)
        _STATE["installed"] = True


def _wrap_autotune(triton: Any) -> None:
    """`triton.autotune` (wherever Triton exports it) made to give autotuners with the cached path of
    _dropin_tune.py; left alone where this Triton has no such decorator."""
    import importlib

    from ._dropin_tune import wrap_autotune

    original = getattr(triton, "autotune", None)
    if original is None:
        return
    fast = wrap_autotune(original)
    for name in ("triton", "triton.runtime", "triton.runtime.autotuner"):
        try:
            owner = importlib.import_module(name)
        except ImportError:
            continue
        if getattr(owner, "autotune", None) is original:
            _STATE["patched"].append((owner, "autotune", original))
            owner.autotune = fast  # type: ignore[attr-defined]


def uninstall() -> None:
    """Undo install() for kernels decorated afterwards (those routed already stay routed)."""
    with _LOCK:
        for owner, name, value in reversed(_STATE["patched"]):
            setattr(owner, name, value)
        _STATE["patched"].clear()
        _STATE["installed"] = False


def stats() -> dict[str, Any]:
    """Kernels routed, launches tilec ran, kernels left to Triton and why (name -> first reason), and how
    many distinct kernels tilec launched (`kernels`)."""
    return {**_STATS, "reasons": dict(_STATS["reasons"]), "kernels": len(_STATS["kernels"])}


def _strict() -> bool:
    if "strict" in _STATE:
        return bool(_STATE["strict"])
    from ._strict import fallback_is_error

    return fallback_is_error()


def route(obj: Any) -> Any:
    """Make a Triton JITFunction (or InterpretedFunction) launch through tilec: its class becomes a subclass
    whose `run` is tilec's; everything else (its attributes, Triton's own compile for the fallback) stays.
    Returns the routed object (the same one, or a copy of its state where its class cannot change)."""
    cls = type(obj)
    routed = _STATE["classes"].get(cls)
    if routed is None:
        routed = type(f"Tilec{cls.__name__}", (_Routed, cls), {"__module__": __name__, "__slots__": ()})
        _STATE["classes"][cls] = routed
    try:
        obj.__class__ = routed
    except TypeError:  # a layout __class__ cannot change (Triton's interpreter): a copy of its state
        copy = routed.__new__(routed)
        copy.__dict__.update(obj.__dict__)
        obj = copy
    with _LOCK:
        _STATS["routed"] += 1
    return obj


class _Routed:
    """The mixin over Triton's class (see route())."""

    __slots__ = ()  # the object's layout stays its class's, so its __class__ can change

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        """Triton's warmup, less its pass over the arguments where none is a torch.dtype (those it wraps in a
        MockTensor first, and so does this): the fused-softmax tutorial warms before every launch."""
        for a in args:
            if type(a).__name__ == "dtype":
                return super().warmup(*args, grid=grid, **kwargs)  # type: ignore[misc]
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    def run(self, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        kernel = _kernel(self)
        dropped = _STATE.get("dropped", _TRITON_ONLY_OPTIONS)
        launch = kwargs if dropped.isdisjoint(kwargs) else {k: v for k, v in kwargs.items() if k not in dropped}
        if warmup and kernel is not None:  # `kernel.warmup(...)`: build now, launch later through the handle
            try:
                return _warmed(kernel, args, launch, kernel.warm(args, launch))
            except (OutOfResourcesError, StaticAssertionError) as exc:
                raise _config_refused(exc) from exc
            except _FALLBACK_ERRORS as exc:
                _give_up(self, exc)
                kernel = None
        if warmup:
            return self._triton_run(args, grid, warmup, kwargs)
        if kernel is not None:
            try:
                kernel.run(grid, args, launch)
                with _LOCK:
                    _STATS["launched"] += 1
                    _STATS["kernels"].add(id(self))
                return Launched(kernel, args, launch)
            except (OutOfResourcesError, StaticAssertionError) as exc:  # this config only: Triton's autotuner
                raise _config_refused(exc) from exc  # prunes it, as its own
            except _FALLBACK_ERRORS as exc:
                _give_up(self, exc)
        return self._triton_run(args, grid, warmup, kwargs)

    def _triton_run(self, args: tuple, grid: Any, warmup: bool, kwargs: dict) -> Any:
        """Triton's own run (the fallback). Triton's compile entry points live on the instance, set when its
        device cache first makes a binder; where that cache was filled without them (seen under Triton 3.6 on
        tutorial 03: "no attribute 'ASTSource'"), they are set here first."""
        if "ASTSource" not in self.__dict__ and hasattr(self, "create_binder"):
            self.create_binder()  # type: ignore[attr-defined]
        return super().run(*args, grid=grid, warmup=warmup, **kwargs)  # type: ignore[misc]


def _config_refused(exc: CompileError) -> Exception:
    """tilec's refusal of one config as Triton's own: a config too large for the block is OutOfResources, a
    failed tl.static_assert is CompileTimeAssertionFailure. Triton's autotuner skips either (it times the
    config as infinitely slow); neither is a reason to run the whole kernel under Triton."""
    if isinstance(exc, OutOfResourcesError):
        from triton.runtime.errors import OutOfResources

        return OutOfResources(exc.required, exc.limit, exc.resource)
    from triton.compiler.errors import CompileTimeAssertionFailure

    return CompileTimeAssertionFailure(None, None, str(exc))  # no Triton source or node: the message says where


class Launched:
    """What a routed `run` returns, in place of Triton's CompiledKernel: `handle[grid](*args)` launches the same
    specialisation again (as a library's launch cache does: FlagGems' LibEntry keeps the first run's kernel
    and calls it with the runtime arguments, in parameter order, or with every argument)."""

    def __init__(self, kernel: Any, args: tuple, kwargs: dict) -> None:
        # every routed launch returns one, and most callers drop it: what a launch through it needs waits for one
        self.kernel = kernel
        self.args, self.kwargs = args, kwargs  # the call that made the handle: what a later launch leaves out
        self._options: dict | None = None

    @property
    def names(self) -> list[str]:
        return _names(self.kernel)[0]

    @property
    def runtime(self) -> list[str]:
        return _names(self.kernel)[1]

    @property
    def options(self) -> dict:
        """Its launch options (num_warps, ...): a launch with every argument passes these alone."""
        if self._options is None:
            names = self.names
            self._options = {k: v for k, v in self.kwargs.items() if k not in names and k not in _TRITON_ONLY_OPTIONS}
        return self._options

    def __getitem__(self, grid: Any) -> Any:
        return lambda *args, **kwargs: self.launch(grid, args, kwargs)

    def launch(self, grid: Any, args: tuple, kwargs: dict) -> None:
        if not kwargs and len(args) == len(self.names):  # every argument in order (as Triton's handle takes)
            grid = tuple(grid) if type(grid) is list else grid
            options = self.options
            fast = self.kernel.__dict__.get("_cuda_fast")  # the warm path straight, as JITKernel.run takes it
            if fast is None or not fast.launch(grid, args, options):
                self.kernel.run(grid, args, options)
        else:
            self._launch_merged(grid, args, kwargs)
        with _LOCK:
            _STATS["launched"] += 1

    def _launch_merged(self, grid: Any, args: tuple, kwargs: dict) -> None:
        if not kwargs and (plan := self._runtime_plan()) is not None and len(args) == len(plan[1]):
            # the runtime arguments alone, in order (FlagGems' LibEntry launches this way every time): put them
            # into the call's arguments as the first launch through this handle laid them out
            values, slots, options = plan
            values = list(values)
            for i, a in zip(slots, args, strict=True):
                values[i] = a
            self.kernel.run(tuple(grid) if isinstance(grid, list) else grid, tuple(values), options)
            return
        order = self.names if len(args) == len(self.names) else self.runtime
        if len(args) > len(order):
            raise ArgumentError(f"{self.kernel.name}: {len(args)} arguments for {len(order)} parameters")
        call = {**dict(zip(self.names, self.args, strict=False)), **self.kwargs}
        call.update(zip(order, args, strict=False))
        call.update(kwargs)
        options = {k: v for k, v in call.items() if k not in self.names and k not in _TRITON_ONLY_OPTIONS}
        positional: list = []
        for n in self.names:  # positional as far as they go (the shape a warm launch's fast path takes)
            if n not in call:
                break
            positional.append(call.pop(n))
        rest = {k: v for k, v in call.items() if k in self.names}
        self.kernel.run(
            tuple(grid) if isinstance(grid, list) else grid, tuple(positional), {**rest, **options}
        )

    def _runtime_plan(self) -> tuple[list, list[int], dict] | None:
        """For a launch with the runtime arguments alone: every parameter's value from the call that made the
        handle (the runtime ones to be replaced), the positions of the runtime parameters, and the launch
        options; worked out once per handle and kept while its call stays the same. None where the handle's
        call does not give every parameter (the general merge binds the rest by name)."""
        made = (self.args, self.kwargs)
        kept = self.__dict__.get("_plan")
        if kept is not None and kept[0][0] is made[0] and kept[0][1] is made[1]:
            return kept[1]
        call = {**dict(zip(self.names, self.args, strict=False)), **self.kwargs}
        plan = None
        if all(n in call for n in self.names):
            options = {k: v for k, v in call.items() if k not in self.names and k not in _TRITON_ONLY_OPTIONS}
            runtime = set(self.runtime)
            plan = ([call[n] for n in self.names], [i for i, n in enumerate(self.names) if n in runtime], options)
        self._plan = (made, plan)
        return plan


def _names(kernel: Any) -> tuple[list[str], list[str]]:
    """A kernel's parameter names and its runtime (not constexpr) ones, worked out once per kernel."""
    got = kernel.__dict__.get("_dropin_names")
    if got is None:
        params = kernel.params
        got = kernel.__dict__["_dropin_names"] = ([p.name for p in params], [p.name for p in params if not p.constexpr])
    return got


class Warmed(Launched):
    """What a routed `warmup` returns: the handle, with what callers read of Triton's CompiledKernel
    (registers, spills, shared memory; `_init_handles()` does nothing: the launch loads the binary)."""

    def __init__(self, kernel: Any, args: tuple, kwargs: dict, art: Any) -> None:
        super().__init__(kernel, args, kwargs)
        self.art = art
        self.n_regs, self.n_spills, self.metadata = _facts(art, int(kwargs.get("num_warps", 4)))
        self.name = art.kernel_name

    def _init_handles(self) -> None:
        return None


def _warmed(kernel: Any, args: tuple, kwargs: dict, art: Any) -> Warmed:
    """The handle of a build, one per build and launch options as Triton keeps one CompiledKernel per
    specialisation: the fused-softmax tutorial warms before every launch, and a handle made again each time
    costs that call its facts and options. The handle takes the latest call's arguments (what a launch with
    the runtime arguments alone leaves out: the constexprs, the same for every call that reaches this build)."""
    kept = kernel.__dict__.setdefault("_dropin_handles", {})
    got = kept.get(id(art))
    if got is not None and got.art is art and got.kwargs == kwargs:
        got.args = args
        return got
    handle = Warmed(kernel, args, kwargs, art)
    if len(kept) >= 256:
        kept.clear()
    kept[id(art)] = handle
    return handle


def _facts(art: Any, num_warps: int) -> tuple[int, int, types.SimpleNamespace]:
    """(n_regs, n_spills, metadata) of a warmed handle. n_regs counts registers as the SM hands them out
    (a warp's in units of 256: 8 a thread), not ptxas's exact count: callers size grids by this figure (the
    fused-softmax tutorial takes 65536 // (n_regs * 32 * num_warps) blocks an SM), and 28 registers on 8 warps
    would promise 9 resident blocks where 8 fit, a second wave."""
    meta = art.metadata
    return (-(-int(meta.get("registers", 0)) // 8) * 8, int(meta.get("spill_stores", 0)),
            types.SimpleNamespace(shared=int(meta.get("shared_bytes", 0)), name=art.kernel_name, num_warps=num_warps))  # fmt: skip


def _kernel(obj: Any) -> Any:
    """The tilec kernel for a routed function, made on first launch (None once it went to Triton)."""
    state = obj.__dict__.get("_tilec_state")
    if state is None:
        from ._jit import JITKernel
        from ._resolve import resolve

        state = obj.__dict__["_tilec_state"] = {"kernel": None}
        server = os.environ.get("TILEC_URL") or None
        try:
            state["kernel"] = kernel = JITKernel(None, bundle=resolve(obj.fn), server=server)
            kernel.debug = bool(getattr(obj, "debug", False)) or os.environ.get("TRITON_DEBUG") == "1"
        except _FALLBACK_ERRORS as exc:
            _give_up(obj, exc)
    return state["kernel"]


def _give_up(obj: Any, exc: BaseException) -> None:
    name = f"{obj.fn.__module__}.{obj.fn.__qualname__}"
    if _strict():
        raise RoutedKernel(f"tilec cannot run {name}: {exc}") from exc
    obj.__dict__["_tilec_state"] = {"kernel": None}
    with _LOCK:
        _STATS["fallbacks"] += 1
        _STATS["reasons"].setdefault(name, f"{type(exc).__name__}: {exc}")
    warnings.warn(f"tilec: {name} runs under Triton: {exc}", RuntimeWarning, stacklevel=4)

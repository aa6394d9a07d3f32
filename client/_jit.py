"""`client.jit`: a Triton-language kernel made launchable as `kernel[grid](*args, **constexprs)`.

Each call binds arguments to parameters, specialises (dtypes, constexprs, hints) and reuses the compiled
artifact for that specialisation from an in-memory cache. Autotuned kernels time their configs on the
actual arguments (restoring every array between trials) and keep the winner per autotune key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from tilec.compiler.artifact import Artifact, CompileOptions
from tilec.compiler.pipeline import compile_kernel

from ._exceptions import ArgumentError
from ._grid import check_grid
from ._launch import ArgSpec, BF16Array, launch, select_target, specialise

_LAUNCH_OPTIONS = ("num_warps", "num_stages")
_TRIALS = 3


def _read_source(source_or_path: str | os.PathLike) -> tuple[str, str]:
    text = str(source_or_path)
    if "\n" not in text and len(text) < 4096 and Path(text).is_file():
        return Path(text).read_text(), text
    return text, "<source>"


class JITKernel:
    """A kernel read from source; index it with a grid to launch."""

    def __init__(self, source_or_path: str | os.PathLike, name: str | None = None):
        from tilec.compiler.frontend import read_kernel

        self.source, filename = _read_source(source_or_path)
        self.ks = read_kernel(self.source, name, filename=filename)
        self.name = self.ks.name
        self.params = self.ks.params
        self.cache: dict[tuple, Artifact] = {}
        self.best_configs: dict[tuple, dict] = {}
        self.compile_count = 0
        self.trials: dict[tuple, list[tuple[dict, float]]] = {}

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    # ---- binding -----------------------------------------------------------------------------------

    def bind(self, args: tuple, kwargs: dict) -> tuple[dict[str, Any], dict[str, Any]]:
        """Parameter name -> value (given ones only), and the launch options found in kwargs."""
        if len(args) > len(self.params):
            raise ArgumentError(f"{self.name} takes {len(self.params)} arguments, got {len(args)} positional")
        bound = {p.name: a for p, a in zip(self.params, args, strict=False)}
        names = {p.name for p in self.params}
        options = {}
        for k, v in kwargs.items():
            if k in _LAUNCH_OPTIONS:
                options[k] = v
                if k not in names:
                    continue  # as in Triton, a parameter of the same name gets the value too
            if k not in names:
                raise ArgumentError(f"{self.name} has no parameter '{k}'")
            elif k in bound:
                raise ArgumentError(f"argument '{k}' given twice")
            else:
                bound[k] = v
        return bound, options

    def complete(self, bound: dict[str, Any]) -> dict[str, Any]:
        """Fill heuristics and defaults; every parameter must end with a value."""
        from tilec.compiler.frontend.literal import evaluate_heuristic

        full = dict(bound)
        for p in self.params:
            if p.name not in full and p.has_default:
                full[p.name] = p.default
        for pname, text in self.ks.heuristics.items():
            if pname not in bound:
                full[pname] = evaluate_heuristic(text, full)
        missing = [p.name for p in self.params if p.name not in full]
        if missing:
            raise ArgumentError(f"{self.name} is missing argument(s) {', '.join(repr(m) for m in missing)}")
        return full

    # ---- compile -----------------------------------------------------------------------------------

    def specialisation(self, full: dict[str, Any]) -> tuple[dict[str, ArgSpec], dict[str, Any]]:
        specs, constexprs = {}, {}
        for p in self.params:
            if p.constexpr or full[p.name] is None:  # Triton: a None argument is the constexpr None
                constexprs[p.name] = full[p.name]
            else:
                specs[p.name] = specialise(p.name, full[p.name])
        return specs, constexprs

    def runtime_names(self, full: dict[str, Any]) -> list[str]:
        """The parameters passed at launch: not constexpr, and not None (None specialises as a constant)."""
        return [p.name for p in self.params if not p.constexpr and full[p.name] is not None]

    def artifact(self, full: dict[str, Any], options: CompileOptions) -> Artifact:
        specs, constexprs = self.specialisation(full)
        key = (
            tuple(sorted(specs.items())),
            tuple(sorted((k, repr(v)) for k, v in constexprs.items())),
            options,
        )
        art = self.cache.get(key)
        if art is None:
            signature = {n: s.type for n, s in specs.items()}
            hints = {n: dict(s.hints) for n, s in specs.items() if s.hints}
            art = compile_kernel(self.source, self.name, signature=signature, constexprs=constexprs, hints=hints,
                                 options=options, emit="object" if options.target == "cpu" else "cubin")  # fmt: skip
            self.compile_count += 1
            self.cache[key] = art
        return art

    # ---- launch ------------------------------------------------------------------------------------

    def run(self, grid: Any, args: tuple, kwargs: dict) -> None:
        fast = self.__dict__.get("_cuda_fast")
        if fast is not None and fast.launch(grid, args, kwargs):
            return  # warm cuda launch (client/_runtime_cuda.py FastPath)
        bound, opts = self.bind(args, kwargs)
        target = select_target(list(bound.values()))
        if self.ks.autotune is not None and self.ks.autotune.configs:
            self._run_autotuned(grid, bound, opts, target)
            return
        full = self.complete(bound)
        art = self._run_once(grid, full, opts, target)
        if target.startswith("cuda"):
            from ._runtime_cuda import FastPath

            self.__dict__.setdefault("_cuda_fast", FastPath(self.params))
            self._cuda_fast.remember(args, kwargs, self.runtime_names(full), art, full)

    def _run_once(self, grid: Any, full: dict[str, Any], opts: dict, target: str) -> Artifact:
        options = CompileOptions(target="cpu" if target == "cpu" else target, **opts)
        art = self.artifact(full, options)
        g = check_grid(grid, full)
        runtime_args = [full[n] for n in self.runtime_names(full)]
        launch(options.target, art, runtime_args, g)
        return art

    def _config_args(self, bound: dict[str, Any], cfg) -> tuple[dict[str, Any], dict]:
        merged = dict(bound)
        for k, v in cfg.kwargs.items():
            if k in bound:
                raise ArgumentError(f"argument '{k}' is set by the autotune configs; do not pass it")
            merged[k] = v
        opts = {k: getattr(cfg, k) for k in _LAUNCH_OPTIONS if getattr(cfg, k, None) is not None}
        return self.complete(merged), opts

    def tuning_key(self, bound: dict[str, Any]) -> tuple:
        parts = []
        for k in self.ks.autotune.key:
            v = bound.get(k)
            is_array = hasattr(v, "shape") and hasattr(v, "dtype") and not isinstance(v, np.generic)
            parts.append((k, (tuple(v.shape), str(v.dtype)) if is_array else repr(v)))
        dtypes = tuple((k, specialise(k, v).type) for k, v in sorted(bound.items()) if _is_runtime(v))
        return tuple(parts), dtypes

    def _run_autotuned(self, grid: Any, bound: dict[str, Any], opts: dict, target: str) -> None:
        key = self.tuning_key(bound)
        cfg = self.best_configs.get(key)
        if cfg is None:
            cfg = self._tune(grid, bound, opts, target, key)
        full, cfg_opts = self._config_args(bound, cfg)
        self._run_once(grid, full, {**cfg_opts, **opts}, target)

    def _tune(self, grid: Any, bound: dict[str, Any], opts: dict, target: str, key: tuple):
        """Time every config on the actual arguments. Every array argument (NumPy, torch, CuPy) is restored
        after each trial run, so tuning leaves them as the one real run after it finds them; the decorator's
        reset_to_zero arguments are zeroed before each run, the real one included."""
        spec = self.ks.autotune
        saved = {k: (v, snap) for k, v in bound.items() if (snap := _snapshot(v)) is not None}
        unknown = sorted(set(spec.reset_to_zero) - set(saved))
        if unknown:
            raise ArgumentError(f"autotune reset_to_zero names {unknown}, which are not array arguments given")
        zero = [bound[k] for k in spec.reset_to_zero]
        timings = []
        for cfg in spec.configs:
            full, cfg_opts = self._config_args(bound, cfg)
            times = []
            for trial in range(_TRIALS + 1):  # the first run compiles and is not timed
                _zero(zero)
                t0 = time.perf_counter()
                self._run_once(grid, full, {**cfg_opts, **opts}, target)
                _synchronize(target)
                if trial:
                    times.append(time.perf_counter() - t0)
                _restore(saved.values())
            timings.append((cfg, sorted(times)[len(times) // 2]))
        _zero(zero)
        best = min(timings, key=lambda t: t[1])[0]
        self.best_configs[key] = best
        self.trials[key] = [(dict(c.kwargs), t) for c, t in timings]
        return best


def _data(v: np.ndarray | BF16Array) -> np.ndarray:
    return v.bits if isinstance(v, BF16Array) else v


def _snapshot(v: Any) -> Any | None:
    """A copy of an array argument's contents (None for scalars): NumPy/bf16 arrays, torch tensors, CuPy arrays."""
    if isinstance(v, np.ndarray | BF16Array):
        return _data(v).copy()
    if hasattr(v, "clone") and hasattr(v, "copy_"):  # torch
        return v.clone()
    if hasattr(v, "__cuda_array_interface__") and hasattr(v, "copy"):  # CuPy and kin
        return v.copy()
    return None


def _restore(saved: Iterable[tuple[Any, Any]]) -> None:
    for v, snap in saved:
        if hasattr(v, "copy_"):
            v.copy_(snap)
        else:
            _data(v)[...] = snap


def _zero(arrays: list[Any]) -> None:
    for v in arrays:
        if hasattr(v, "zero_"):
            v.zero_()
        else:
            _data(v)[...] = 0


def _synchronize(target: str) -> None:
    """GPU launches are asynchronous: wait for the trial to end before reading the clock."""
    if target.startswith("cuda"):
        from ._runtime_cuda import synchronize

        synchronize()


def _is_runtime(v: Any) -> bool:
    return isinstance(v, np.ndarray | BF16Array | np.generic | int | float)


def jit(source_or_path: str | os.PathLike, name: str | None = None) -> JITKernel:
    """Read a Triton-language kernel (source text or a path to a .py file) for launching."""
    return JITKernel(source_or_path, name)

"""Triton's decorator API on tilec: `@tilec.jit`, `@tilec.autotune(configs=[tilec.Config(...)], key=[...])`,
`@tilec.heuristics({...})`, `tilec.Config`, `tilec.cdiv`, `tilec.next_power_of_2`.

A decorated function is read through its module by the client's resolver (client/_resolve.py) into a
kernel bundle; host decisions (evaluated configs, heuristics, hooks, pruning) stay in this process.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class Config:
    """One autotune config, as Triton's: meta-parameters, warps, stages, and an optional pre_hook(args)."""

    def __init__(self, kwargs: dict[str, Any], num_warps: int = 4, num_stages: int = 3, num_ctas: int = 1,
                 maxnreg: int | None = None, pre_hook: Callable | None = None) -> None:  # fmt: skip
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> dict[str, Any]:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}

    def __repr__(self) -> str:
        items = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({items}, num_warps: {self.num_warps}, num_stages: {self.num_stages})"


def as_config(c: Any) -> Config:
    """A tilec.Config from one of ours or of Triton's (same attribute names)."""
    if isinstance(c, Config):
        return c
    return Config(dict(c.kwargs), getattr(c, "num_warps", 4) or 4, getattr(c, "num_stages", 3) or 3,
                  getattr(c, "num_ctas", 1) or 1, getattr(c, "maxnreg", None), getattr(c, "pre_hook", None))  # fmt: skip


@dataclass
class HostAutotune:
    """What @tilec.autotune decided on the host; the configs go into the bundle as data."""

    configs: list[Config]
    key: list[str]
    prune_configs_by: dict | None = None
    reset_to_zero: list[str] = field(default_factory=list)
    restore_value: list[str] = field(default_factory=list)
    pre_hook: Callable | None = None
    post_hook: Callable | None = None
    warmup: int | None = None
    rep: int | None = None

    def bundle_data(self) -> dict:
        return {
            "configs": [{"kwargs": dict(c.kwargs), "num_warps": c.num_warps, "num_stages": c.num_stages}
                        for c in self.configs],
            "key": list(self.key),
            "reset_to_zero": list(self.reset_to_zero),
            "restore_value": list(self.restore_value),
        }  # fmt: skip

    def prune(self, configs: list[Config], args: dict[str, Any]) -> list[Config]:
        """prune_configs_by, run here as Triton runs it: early_config_prune(configs, named_args, **kwargs),
        then perf_model(**args, **config kwargs) ranking the top_k (an int, or a fraction of the list)."""
        by = self.prune_configs_by or {}
        early = by.get("early_config_prune")
        if early is not None:
            configs = [as_config(c) for c in early(configs, args)]
        model, top_k = by.get("perf_model"), by.get("top_k")
        if model is not None and top_k:
            k = int(len(configs) * top_k) if isinstance(top_k, float) and top_k <= 1.0 else int(top_k)
            if k < len(configs):
                scored = sorted(configs, key=lambda c: model(**args, **c.all_kwargs()))
                configs = scored[:k]
        return configs


def jit(fn: Any = None, name: str | None = None, **options: Any) -> Any:
    """`@tilec.jit` over a kernel function (`@tilec.jit(...)` too), or `tilec.jit(source_or_path, name)`:
    a function is read through its module (client/_resolve.py), text or a path as before."""
    from ._jit import jit as jit_source

    if fn is None:
        return lambda f: jit(f, name, **options)
    if isinstance(fn, types.FunctionType):
        return kernel_from_function(
            fn, **{k: v for k, v in options.items() if k in ("server", "trusted_keys", "cache")}
        )
    return jit_source(fn, name, **options)


def kernel_from_function(fn: types.FunctionType, **kw: Any) -> Any:
    import os

    from ._jit import JITKernel
    from ._resolve import resolve

    server = kw.pop("server", None)
    if server is None:
        server = os.environ.get("TILEC_URL") or None
    kernel = JITKernel(None, bundle=resolve(fn), server=server or None, **kw)
    kernel.fn = fn
    kernel.__doc__ = fn.__doc__
    kernel.__name__ = fn.__name__  # type: ignore[attr-defined]
    kernel.__module__ = fn.__module__
    return kernel


def refresh(kernel: Any) -> Any:
    """Re-resolve `kernel`'s bundle with its host autotune/heuristics data (after a decorator changed them)."""
    from ._resolve import resolve

    data = kernel.host_autotune.bundle_data() if kernel.host_autotune is not None else None
    kernel._set_bundle(resolve(kernel.fn, autotune=data, heuristics=tuple(kernel.host_heuristics)))
    kernel.cache.clear()
    return kernel


def autotune(configs: list, key: list[str], prune_configs_by: dict | None = None, reset_to_zero: list | None = None,
             restore_value: list | None = None, pre_hook: Callable | None = None, post_hook: Callable | None = None,
             warmup: int | None = None, rep: int | None = None, **_ignored: Any) -> Callable[[Any], Any]:  # fmt: skip
    """`@tilec.autotune(...)` over a @tilec.jit kernel: the configs are timed on the launch's own arguments
    (or found in the server's shared results) per value of `key`; hooks and pruning run in this process."""

    def wrap(kernel: Any) -> Any:
        _check_kernel(kernel, "autotune")
        kernel.host_autotune = HostAutotune([as_config(c) for c in configs], list(key), prune_configs_by,
                                            list(reset_to_zero or []), list(restore_value or []), pre_hook,
                                            post_hook, warmup, rep)  # fmt: skip
        return refresh(kernel)

    return wrap


def heuristics(values: dict[str, Callable[[dict], Any]]) -> Callable[[Any], Any]:
    """`@tilec.heuristics({"BLOCK": lambda args: ...})`: each value computed from the launch's arguments."""

    def wrap(kernel: Any) -> Any:
        _check_kernel(kernel, "heuristics")
        kernel.host_heuristics = {**dict(values), **kernel.host_heuristics}
        return refresh(kernel)

    return wrap


def _check_kernel(kernel: Any, what: str) -> None:
    if getattr(kernel, "fn", None) is None or not hasattr(kernel, "host_heuristics"):
        raise TypeError(f"@tilec.{what} goes over a @tilec.jit kernel (put @tilec.jit beneath it)")


def cdiv(x: int, y: int) -> int:
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()

"""The drop-in's path through Triton's own autotuner once it has chosen: `triton.autotune` objects made after
`tilec.install()` answer a call whose tuning key is cached without rebuilding the argument dictionaries that
Triton's `Autotuner.run` builds on every call. Its key, its choice and its call to the kernel's `run` are
Triton's; any call it does not take as it is (a first call, a config with a pre_hook, a parameter given twice,
an unhashable key) goes to Triton's own `run`.
"""

from __future__ import annotations

import functools
from typing import Any

_PLAIN = frozenset({int, float, bool, str, type(None)})  # classes without a dtype (Triton's key skips them)
_MISSING = object()
_DTYPE_TEXT: dict = {}  # (class, dtype) -> str(dtype): the key's text of a tensor's dtype
_CLASSES: dict = {}


def wrap_autotune(original: Any) -> Any:
    """`triton.autotune`, whose decorator's Autotuner takes the cached path below."""

    @functools.wraps(original)
    def autotune(*args: Any, **kwargs: Any) -> Any:
        decorator = original(*args, **kwargs)
        return lambda fn: fast_tuner(decorator(fn))

    return autotune


def fast_tuner(obj: Any) -> Any:
    """`obj` (a Triton Autotuner) with its class made a subclass whose `run` takes the cached path; the object
    unchanged where its class cannot change. (One base only: a mixin beside Triton's class changes the object's
    layout.)"""
    cls = type(obj)
    fast = _CLASSES.get(cls)
    if fast is None and not _triton_run(cls):
        return obj  # a library's own autotuner class with a run of its own: its run stands
    if fast is None:
        fast = _CLASSES[cls] = type(f"Tilec{cls.__name__}", (cls,), {"__module__": __name__, "__slots__": (),
                                                                        "run": _cached_run(cls.run)})  # fmt: skip
    try:
        obj.__class__ = fast
    except TypeError:
        pass
    return obj


def _triton_run(cls: type) -> bool:
    """Whether `cls.run` is Triton's Autotuner.run (the one whose cached path this module repeats)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    return getattr(cls, "run", None) is Autotuner.run


def _plan(tuner: Any) -> Any:
    """What the cached path needs of an autotuner, worked out once: ((key name, its parameter's position),
    ...), the parameter positions by name; False where this Triton's Autotuner lacks what the path reads."""
    try:
        names = list(tuner.arg_names)
        keys = list(tuner.keys)
        tuner.cache.get  # noqa: B018 - read for its presence
        len(tuner.configs)
    except (AttributeError, TypeError):
        plan: Any = False
    else:
        position = {n: i for i, n in enumerate(names)}
        plan = (tuple((k, position[k]) for k in keys if k in position), position)
    tuner.__dict__["_tilec_plan"] = plan
    return plan


def _dtype_text(dtype: Any) -> str:
    try:
        return _DTYPE_TEXT[(type(dtype), dtype)]
    except KeyError:
        text = str(dtype)
        if len(_DTYPE_TEXT) < 256:
            _DTYPE_TEXT[(type(dtype), dtype)] = text
        return text
    except TypeError:  # an unhashable dtype
        return str(dtype)


def tuning_key(plan: tuple, args: tuple, kwargs: dict) -> tuple | None:
    """Triton's tuning key of a call: the key parameters' values, then str(dtype) of every argument that has
    a dtype (positional ones first, then keyword ones naming parameters, in the call's order); None for a
    call that names a positional parameter again or passes more arguments than there are parameters (Triton's
    own path says what is wrong)."""
    keyed, position = plan
    n = len(args)
    if n > len(position):
        return None  # more arguments than parameters: Triton's key leaves the rest out, and its run says so
    key = []
    for name, i in keyed:
        if i < n:
            key.append(args[i])
        elif name in kwargs:
            key.append(kwargs[name])
    for a in args:
        if type(a) not in _PLAIN:
            d = getattr(a, "dtype", _MISSING)
            if d is not _MISSING:
                key.append(_dtype_text(d))
    for name, v in kwargs.items():
        i = position.get(name)
        if i is None:
            continue  # grid, warmup, launch options: not parameters
        if i < n:
            return None
        if type(v) not in _PLAIN:
            d = getattr(v, "dtype", _MISSING)
            if d is not _MISSING:
                key.append(_dtype_text(d))
    return tuple(key)


def _cached_run(triton_run: Any) -> Any:
    """The subclass's `run` over Triton's `triton_run`."""

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        plan = self.__dict__.get("_tilec_plan")
        if plan is None:
            plan = _plan(self)
        config = None
        if plan:
            if len(self.configs) <= 1:  # Triton's run takes the one config without a key (read each call: a
                config = self.configs[0]  # library may replace the list)
            else:
                key = tuning_key(plan, args, kwargs)
                if key is not None:
                    try:
                        config = self.cache.get(key)
                    except TypeError:  # an unhashable key value: Triton's path raises it
                        config = None
        if config is None or getattr(config, "pre_hook", None) is not None:
            return triton_run(self, *args, **kwargs)
        self.best_config = config
        return self.fn.run(*args, **kwargs, **config.all_kwargs())

    run.__doc__ = triton_run.__doc__
    return run

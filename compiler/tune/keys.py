"""The strings a tuning key is made of, written one way for every writer: the worker that tunes from a
launch description, the client that tunes on its own arguments, and the client that looks a result up.

`key` holds the autotune key's values (a tensor stands for its shape and dtype), `dtypes` the runtime
signature in parameter order; the service hashes them with the kernel key and the target.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TuningKey:
    """A tuning key's parts; `digest` is the key the service stores results under."""

    kernel_key: str
    key: str  # the autotune key's values (key_string)
    dtypes: str  # the runtime signature (dtypes_string)
    target: str

    @property
    def digest(self) -> str:
        body = {"kernel": self.kernel_key, "key": self.key, "dtypes": self.dtypes, "target": self.target}
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def tuning_key(
    *,
    kernel_key: str,
    key_names: Sequence[str] | None,
    value: Callable[[str], Any],
    runtime: Sequence[str],
    signature: Mapping[str, str],
    target: str,
    launch_key: Callable[[], str] | None = None,
) -> TuningKey:
    """The tuning key of one launch, made one way for every writer and reader (the service's submit, a tune,
    `tilec.jit`'s shared results, a pulled index, `tilec pull`): of the autotune key's names, those that are
    runtime arguments of this launch, in the decorator's order, with `value(name)` (a scalar, or a tensor as
    `{"shape": [...], "dtype": ...}`); a name that is a constexpr or not a parameter is left out. `runtime`:
    the runtime parameters in kernel order; `signature`: their types. `key_names` None (a kernel without an
    autotune decorator) with `launch_key` given: the key is `launch_key()`, what was timed (a launch
    description's arguments and grid), so that one launch's trials never answer another's."""
    dtypes = dtypes_string(signature, runtime)
    if key_names is None and launch_key is not None:
        return TuningKey(kernel_key, launch_key(), dtypes, target)
    names = [n for n in key_names or [] if n in runtime]
    return TuningKey(kernel_key, key_string(names, {n: value(n) for n in names}), dtypes, target)


def key_string(names: Sequence[str], values: Mapping[str, Any]) -> str:
    """The autotune key's values as compact JSON, in the decorator's order: `{"M":4096,"N":4096}`.
    A value may be a scalar or, for a tensor, `{"shape": [...], "dtype": "fp16"}`."""
    if not names:
        return ""
    return json.dumps({n: _plain(values[n]) for n in names}, separators=(",", ":"))


def launch_string(launch: Mapping[str, Any], max_chars: int) -> str:
    """The key string of a launch-keyed tuning key, `{"launch":{...}}`, or `{"launch_sha256":...}` when it
    would be longer than `max_chars`."""
    text = key_string(["launch"], {"launch": launch})
    if len(text) <= max_chars:
        return text
    return key_string(["launch_sha256"], {"launch_sha256": hashlib.sha256(text.encode()).hexdigest()})


def dtypes_string(signature: Mapping[str, str], params: Sequence[str]) -> str:
    """The runtime parameters' types in kernel order: `a_ptr:*fp16,M:i32`."""
    return ",".join(f"{p}:{signature[p]}" for p in params if p in signature)


def _plain(value: Any) -> Any:
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):  # a NumPy scalar
        return _plain(value.item())
    raise TypeError(f"a tuning key value must be a number, bool, string or tensor description, not {type(value).__name__}")


def scalar_hints(value: int | float | bool) -> dict[str, Any]:
    """Triton's specialisation of an integer argument: == 1, or divisible by 16 (as the client does)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return {}
    if value == 1:
        return {"equal_to_1": True}
    if value % 16 == 0:
        return {"divisibility": 16}
    return {}

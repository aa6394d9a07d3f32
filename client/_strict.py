"""Zero compiles in production: TILEC_STRICT, the count of what this process compiled and tuned, and the
misses reported to the server. A miss is a launch that finds its build (or its tuned config) nowhere
(memory, a pulled index, the disk cache, the server) and would compile or tune here.

TILEC_STRICT=1 (or true): a miss raises StrictError, and (the drop-in's older meaning, kept) a kernel
tilec cannot compile is an error instead of a Triton fallback; under the drop-in a miss is never handed to
Triton either (that would be a compile too). TILEC_STRICT=fallback: the drop-in's older meaning alone
(development: compiles are fine, fallbacks are not). TILEC_STRICT=warn: a miss is warned about once per
specialisation and compiled (or tuned) here all the same. Unset, 0 or false: misses only count.
Every miss, in any mode, is reported once per process to the server when one is configured (TILEC_URL,
or the kernel's `server=`): POST /v1/misses, never a reason for the launch to fail.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any

from ._exceptions import StrictError

_LOCK = threading.Lock()
_COUNTS = {"compiles": 0, "tunes": 0, "misses": 0}
_SEEN: set[str] = set()  # misses warned about or reported in this process (their canonical JSON)


def _setting() -> str:
    value = os.environ.get("TILEC_STRICT", "").strip().lower()
    if value in ("1", "true", "yes", "on", "raise"):
        return "raise"
    return value if value in ("warn", "fallback") else "off"


def strict_mode() -> str:
    """What a miss does, from TILEC_STRICT: "raise", "warn" or "off" ("fallback" leaves misses alone)."""
    mode = _setting()
    return "off" if mode == "fallback" else mode


def fallback_is_error() -> bool:
    """TILEC_STRICT=1 or fallback: under the drop-in, a kernel tilec cannot compile is an error, not Triton's."""
    return _setting() in ("raise", "fallback")


def compile_stats() -> dict[str, int]:
    """What this process built itself since it started: `compiles` (kernels compiled here, tune trials
    included), `tunes` (tuning keys tuned here) and `misses` (distinct specialisations that were neither
    pulled, cached nor served)."""
    with _LOCK:
        return dict(_COUNTS)


def count(what: str) -> None:
    with _LOCK:
        _COUNTS[what] += 1


def miss(kernel: Any, what: str, target: str, spec: dict[str, Any], *, launch: dict | None = None) -> None:
    """A launch of `kernel` would `what` ("compile" or "tune") here: report it (once per process), then
    raise StrictError under TILEC_STRICT=1, or warn once under TILEC_STRICT=warn."""
    from tilec.wire import canonical_json

    seen_key = canonical_json({"k": kernel.ks.key, "what": what, "target": target, "spec": spec}).decode()
    with _LOCK:
        first = seen_key not in _SEEN
        _SEEN.add(seen_key)
        if first:
            _COUNTS["misses"] += 1
    if first:
        _report(kernel, what, target, spec, launch)
    mode = strict_mode()
    if mode == "raise":
        raise StrictError(kernel.name, what, target, spec)
    if mode == "warn" and first:
        error = StrictError(kernel.name, what, target, spec)
        warnings.warn(f"{error}; going on (TILEC_STRICT=warn)", RuntimeWarning, stacklevel=5)


def _report(kernel: Any, what: str, target: str, spec: dict[str, Any], launch: dict | None) -> None:
    """POST /v1/misses to the kernel's server, else TILEC_URL's; a failure is one warning, never an error."""
    client, owned = _client_for(kernel)
    if client is None:
        return
    from ._client import ServiceError
    from ._fetch import kernel_input
    from ._models import MissCreate

    try:
        body = MissCreate(**kernel_input(kernel.source, kernel.kind), name=kernel.name, kernel_key=kernel.ks.key,
                          what=what, target=target, specialisation=spec, launch=launch)  # fmt: skip
        client.report_miss(body)
    except (ServiceError, ValueError) as exc:
        warnings.warn(f"tilec: could not report a miss of {kernel.name} to the server ({exc})", RuntimeWarning,
                      stacklevel=6)  # fmt: skip
    finally:
        if owned:
            client.close()


def _client_for(kernel: Any) -> tuple[Any, bool]:
    shared = getattr(kernel, "shared", None)
    if shared is not None and shared.reachable:
        return shared.client(), False
    url = os.environ.get("TILEC_URL")
    if not url:
        return None, False
    from ._client import Client

    return Client(url, os.environ.get("TILEC_TOKEN"), timeout=10.0), True

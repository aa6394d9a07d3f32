"""tilec: a tile compiler for Triton-language kernels, offered as a service with a shared autotune cache.

`import tilec` is the public surface: `tilec.jit` (and Triton's decorator API: `@tilec.jit`, `tilec.autotune`,
`tilec.heuristics`, `tilec.Config`, `tilec.cdiv`, `tilec.next_power_of_2`), `tilec.install()` (route
`@triton.jit` kernels through tilec; `tilec.stats()` counts them), `tilec.Client` / `tilec.AsyncClient`, `tilec.load_index`
(a pulled directory's kernels), and the exceptions. The parts live beneath it: `tilec.compiler`,
`tilec.server`, `tilec.client`, `tilec.migrations`. Names are resolved on first use, so `import tilec.compiler` stays light.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import os as _os
from typing import Any as _Any

# An installed wheel holds the parts inside this folder. In a source checkout they are the repository's
# top-level folders beside this one, so the checkout works from PYTHONPATH alone (the GPU machine's case).
_checkout = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "compiler")) and _os.path.isfile(
    _os.path.join(_checkout, "compiler", "__init__.py")
):
    __path__.append(_checkout)  # type: ignore[name-defined]

__version__ = "0.1.0"

_PUBLIC = {
    "ArchMismatchError": "tilec.client",
    "ArgumentError": "tilec.client",
    "AsyncClient": "tilec.client",
    "AuthError": "tilec.client",
    "BadSignatureError": "tilec.client",
    "BinaryMismatchError": "tilec.client",
    "Client": "tilec.client",
    "CompileError": "tilec.compiler.errors",
    "Config": "tilec.client",
    "GridError": "tilec.client",
    "JITKernel": "tilec.client",
    "KernelAssertionError": "tilec.client",
    "LaunchError": "tilec.client",
    "NotFoundError": "tilec.client",
    "ServiceError": "tilec.client",
    "ServiceUnavailable": "tilec.client",
    "StrictError": "tilec.client",
    "TargetError": "tilec.client",
    "TargetMismatchError": "tilec.client",
    "TensorDescriptor": "tilec.client",
    "TilecError": "tilec.client",
    "ToolError": "tilec.compiler.errors",
    "UnsignedManifestError": "tilec.client",
    "UntrustedKeyError": "tilec.client",
    "VerificationError": "tilec.client",
    "autotune": "tilec.client",
    "cdiv": "tilec.client",
    "compile_stats": "tilec.client",
    "heuristics": "tilec.client",
    "install": "tilec.client",
    "jit": "tilec.client",
    "load_index": "tilec.client",
    "next_power_of_2": "tilec.client",
    "record": "tilec.client",
    "stats": "tilec.client",
    "uninstall": "tilec.client",
}
__all__ = sorted(_PUBLIC)


if _os.environ.get("TILEC_TRITON") == "1":  # route @triton.jit kernels from here on (client/_dropin.py)
    if _importlib_util.find_spec("triton") is None:
        import warnings as _warnings

        _warnings.warn("TILEC_TRITON=1 but triton is not installed: nothing to route", RuntimeWarning, stacklevel=2)
    else:
        _importlib.import_module("tilec.client").install()


def __getattr__(name: str) -> _Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'tilec' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, the parts imported so far and the module's dunders; not the helpers above."""
    parts = {n for n, v in globals().items() if getattr(v, "__name__", None) == f"{__name__}.{n}"}
    return sorted({n for n in globals() if n.startswith("__")} | parts | set(__all__))

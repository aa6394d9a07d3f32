"""The tilec client: `tilec.jit` for launching Triton-language kernels (NumPy arrays run on the cpu
target; with a server, builds come from it and a verified local cache), `load_index` for the kernels
`tilec pull` wrote, and the errors they raise. Everything public is re-exported here from private modules.
"""

from tilec.runtime.launch import BF16Array, as_bf16
from tilec.runtime.tensordesc import TensorDescriptor

from ._decorators import Config, autotune, cdiv, heuristics, jit, next_power_of_2
from ._dropin import install, stats, uninstall
from ._exceptions import (
    ArchMismatchError,
    ArgumentError,
    BadSignatureError,
    BinaryMismatchError,
    GridError,
    KernelAssertionError,
    LaunchError,
    StrictError,
    TargetError,
    TargetMismatchError,
    TilecError,
    UnsignedManifestError,
    UntrustedKeyError,
    VerificationError,
)
from ._index import IndexedKernel, KernelIndex, load_index
from ._jit import JITKernel
from ._record import record
from ._strict import compile_stats

# The HTTP client (httpx, pydantic) loads on first use: a launch from the local cache does not need it.
_HTTP = ("AsyncClient", "AuthError", "Client", "NotFoundError", "ServiceError", "ServiceUnavailable")


def __getattr__(name: str):  # noqa: ANN202 - module attribute hook
    if name in _HTTP:
        from . import _client

        return getattr(_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ArchMismatchError",
    "ArgumentError",
    "AsyncClient",
    "AuthError",
    "BF16Array",
    "BadSignatureError",
    "BinaryMismatchError",
    "Client",
    "Config",
    "GridError",
    "IndexedKernel",
    "JITKernel",
    "KernelAssertionError",
    "KernelIndex",
    "LaunchError",
    "NotFoundError",
    "ServiceError",
    "ServiceUnavailable",
    "StrictError",
    "TargetError",
    "TargetMismatchError",
    "TensorDescriptor",
    "TilecError",
    "UnsignedManifestError",
    "UntrustedKeyError",
    "VerificationError",
    "as_bf16",
    "autotune",
    "cdiv",
    "compile_stats",
    "heuristics",
    "install",
    "jit",
    "load_index",
    "next_power_of_2",
    "record",
    "stats",
    "uninstall",
]

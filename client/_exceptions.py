"""The exceptions the client raises: one tree under TilecError (tilec.TilecError). Compile errors from the
compiler pass through unchanged; the launch errors are the runtime's (runtime/errors.py), re-exported here.

TilecError                           (compiler/errors.py: the root, at the bottom of the layers)
├── CompileError                     bad source or IR (file:line:col); the interpreter's InterpError too
├── ToolError                        LLVM / ptxas / nvJitLink failed
├── LaunchDescriptionError           a tune's launch description that cannot be used (names the field)
├── LaunchError                      a launch that cannot run (runtime/errors.py)
│   ├── ArgumentError                wrong count, dtype, layout of an argument (names it)
│   ├── GridError                    a grid of zero or negative size, or of the wrong rank
│   └── TargetError                  arrays of no supported target, or of mixed targets
│       └── ArchMismatchError        a binary this GPU or its driver cannot load (device, target, driver)
├── KernelAssertionError             a tl.device_assert failed while the kernel ran
├── ServiceError                     the service refused or failed (client/_client.py; NotFoundError, ...)
├── StrictError                      TILEC_STRICT=1: a launch would compile or tune (names the specialisation)
└── VerificationError                an artifact refused before it reached the loader (which check)
    ├── UnsignedManifestError        keys are pinned, the manifest carries no signature
    ├── UntrustedKeyError            signed by a key that is not pinned (TILEC_TRUSTED_KEYS)
    ├── BadSignatureError            the signature does not match the manifest (changed after signing)
    ├── TargetMismatchError          the artifact is for another target/arch than this device
    └── BinaryMismatchError          the binary's sha256 or size is not the signed one
"""

from __future__ import annotations

from tilec.runtime.errors import (  # the launch errors live with the runtime that raises them
    ArchMismatchError,
    ArgumentError,
    GridError,
    KernelAssertionError,
    LaunchError,
    TargetError,
    TilecError,
)

__all__ = [
    "ArchMismatchError",
    "ArgumentError",
    "BadSignatureError",
    "BinaryMismatchError",
    "GridError",
    "KernelAssertionError",
    "LaunchError",
    "StrictError",
    "TargetError",
    "TargetMismatchError",
    "TilecError",
    "UnsignedManifestError",
    "UntrustedKeyError",
    "VerificationError",
]


class VerificationError(TilecError):
    """An artifact refused before it reached the loader; the message says which check failed."""


class UnsignedManifestError(VerificationError):
    """Keys are pinned, and the manifest carries no signature."""


class UntrustedKeyError(VerificationError):
    """The manifest is signed by a key that is not among the pinned ones."""


class BadSignatureError(VerificationError):
    """The signature does not verify over the manifest: it was changed after signing, or forged."""


class TargetMismatchError(VerificationError):
    """The artifact was built for another target (or arch) than the device it is to run on."""


class BinaryMismatchError(VerificationError):
    """The binary is not the one the manifest vouches for (sha256 or size differs)."""


class StrictError(TilecError):
    """TILEC_STRICT=1: a launch would compile or tune in this process. `kernel`, `what` ("compile" or
    "tune"), `target` and `specialisation` (signature, constexprs, hints, config; a tune's tuning key) name it."""

    def __init__(self, kernel: str, what: str, target: str, specialisation: dict) -> None:
        self.kernel = kernel
        self.what = what
        self.target = target
        self.specialisation = specialisation
        super().__init__(f"TILEC_STRICT: {kernel} would {what} on {target} for {describe(specialisation)}; "
                         "pull it first (TILEC_RECORD, tilec pull --manifest, TILEC_INDEX)")  # fmt: skip


def describe(spec: dict) -> str:
    """A specialisation in one line: `x_ptr=*fp32 (divisibility=16), n=i32; BLOCK=256; num_warps=4`."""
    hints = spec.get("hints") or {}
    params = []
    for name, ty in (spec.get("signature") or {}).items():
        h = ", ".join(f"{k}={v}" for k, v in (hints.get(name) or {}).items())
        params.append(f"{name}={ty}" + (f" ({h})" if h else ""))
    consts = ", ".join(f"{k}={v!r}" for k, v in (spec.get("constexprs") or {}).items())
    parts = [", ".join(params) or "no runtime arguments", consts or "no constexprs"]
    config = spec.get("config")
    if config:
        parts.append(", ".join(f"{k}={v}" for k, v in {**(config.get("kwargs") or {}),
                                                        "num_warps": config.get("num_warps")}.items()))
    tuning = spec.get("tuning")
    if tuning:
        parts.append(f"tuning key {tuning.get('key') or '(launch)'} / {tuning.get('dtypes')}")
    return "; ".join(parts)

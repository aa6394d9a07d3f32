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

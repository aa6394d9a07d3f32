"""A build asked of the service, and its artifact fetched from it: the signed manifest, the binary (reused
from a local store when one holds it), both verified (client/_verify.py) and checked to be the very build
asked for, before anything can reach a loader. Shared by `jit` with a server, `tilec pull` and load_index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tilec.compiler.artifact import Artifact

from ._exceptions import VerificationError

BINARY_FORM = {"cpu": "object", "cuda": "cubin"}


def binary_form(target: str) -> str:
    return BINARY_FORM[target.split(":", 1)[0]]


def normal_config(kwargs: dict[str, Any], num_warps: int | None, num_stages: int | None) -> dict[str, Any]:
    """A config as the service stores it: kwargs sorted, the launch options defaulted (4 warps, 3 stages)."""
    return {
        "kwargs": dict(sorted(kwargs.items())),
        "num_warps": num_warps or 4,
        "num_stages": num_stages or 3,
    }


def _json(value: Any) -> bytes:
    from tilec.wire import canonical_json

    return canonical_json(value)


@dataclass(frozen=True)
class Build:
    """One compile of one kernel: what the service's artifact key covers, less the compiler version."""

    kernel_key: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    hints: dict[str, dict[str, Any]]
    config: dict[str, Any]  # normal_config(...)
    target: str

    @property
    def spec(self) -> dict[str, Any]:
        emit = binary_form(self.target)
        return {"signature": self.signature, "constexprs": self.constexprs, "hints": self.hints, "emit": emit}

    def index_key(self) -> str:
        """The local cache's lookup key of this build (LocalCache hashes it)."""
        body = {"build": self.kernel_key, "spec": self.spec, "config": self.config, "target": self.target}
        return _json(body).decode()

    def artifact_key(self, compiler_version: str) -> str:
        """The service's key of this build by a compiler of that version (as its compile route makes it)."""
        from tilec.compiler.artifact import artifact_key

        return artifact_key(self.kernel_key, self.spec, self.config, self.target, compiler_version)

    def compile_body(self, source: str, name: str, kind: str = "source") -> Any:
        """The POST /v1/compile body for this build of `source` (a bundle's JSON text when `kind` is bundle)."""
        from tilec.wire import CompileCreate, ConfigSpec

        config = ConfigSpec(kwargs=self.config["kwargs"], num_warps=self.config["num_warps"],
                            num_stages=self.config["num_stages"])  # fmt: skip
        return CompileCreate(**kernel_input(source, kind), name=name, signature=self.signature, constexprs=self.constexprs,
                             hints=self.hints, config=config, target=self.target)  # fmt: skip


def mismatch(body: Any, build: Build) -> str | None:
    """How a (verified) manifest body differs from the build asked for, or None when it is that build."""
    if body.kernel_key != build.kernel_key:
        return f"it is a build of kernel {body.kernel_key[:16]}, not {build.kernel_key[:16]}"
    if body.target != build.target:
        return f"it is for {body.target}, not {build.target}"
    if _json(body.spec) != _json(build.spec):
        return f"its specialisation {_json(body.spec).decode()} is not {_json(build.spec).decode()}"
    if _json(body.config) != _json(build.config):
        return f"its config {_json(body.config).decode()} is not {_json(build.config).decode()}"
    return None


def check_build(body: Any, build: Build) -> None:
    """Raise VerificationError when a signed manifest vouches for another build than the one asked for."""
    differs = mismatch(body, build)
    if differs is not None:
        raise VerificationError(f"artifact {body.artifact_id} is not the build asked for: {differs}")


def to_artifact(body: Any, binary: bytes) -> Artifact:
    """The Artifact a runtime loads, from a verified manifest body and its binary."""
    return Artifact(target=body.target, kernel_name=body.kernel_name, binary=binary,
                    metadata=dict(body.metadata), compiler_version=body.compiler_version)  # fmt: skip


@dataclass
class Fetched:
    manifest: Any  # ManifestPublic, verified
    binary: bytes
    downloaded: bool  # False when the binary was already held locally


def fetch(
    client: Any,
    manifest: Any,
    *,
    target: str,
    trusted: Any,
    held: Callable[[str], bytes | None] = lambda sha: None,
) -> Fetched:
    """The binary of a manifest the server gave (`client.manifest(...)`), taken from `held(sha256)` or
    downloaded, and the two verified (raising the VerificationError subclass of the failed check)."""
    from ._cache import _is_sha
    from ._verify import verify

    body = manifest.manifest
    if not _is_sha(body.sha256):  # it names files: checked before a path is made of it
        raise VerificationError(f"artifact {body.artifact_id}: {body.sha256[:80]!r} is not a sha256")
    binary = held(body.sha256)
    downloaded = binary is None
    if binary is None:
        binary = client.download(body.artifact_id, binary_form(target))
    verify(manifest, binary, target=target, trusted=trusted)
    return Fetched(manifest, binary, downloaded)


def kernel_input(source: str, kind: str) -> dict[str, Any]:
    """The wire field that carries a kernel: its source text, or a bundle (its JSON text, as an object)."""
    if kind == "bundle":
        import json

        return {"bundle": json.loads(source)}
    return {"source": source}

"""What a kernel shares with a tilec server: its tuning results (`SharedResults`: lookup first, publish
after a local tune) and its builds (`ServerBuilds`: the local disk cache, then the server, every binary
verified against its signed manifest before the runtime sees it). Used by client/_jit.py.
"""

from __future__ import annotations

import os
import warnings
import weakref
from typing import Any

from tilec.compiler.artifact import Artifact
from tilec.compiler.frontend import ConfigSpec

LAUNCH_OPTIONS = ("num_warps", "num_stages")
_SERVER_TIMEOUT_S = 30.0  # a lookup sits on the launch path: a server that hangs must not hold it long


class SharedResults:
    """One kernel's view of the service's tuning results. Every failure to reach or use the server is
    warned about once and the kernel goes on with its local result: sharing is never a reason not to run."""

    def __init__(self, server: Any) -> None:
        self._client = None if isinstance(server, str) else server
        self._url = server if isinstance(server, str) else None
        self._token = os.environ.get("TILEC_TOKEN") if isinstance(server, str) else None
        self.reachable = True  # False after the server could not be reached or refused the token
        self.publishing = True  # False after a refused publish (a token without the submit scope)
        self.warned = False

    def close(self) -> None:
        """Close the HTTP client this made from a URL (a Client given to jit() stays its owner's)."""
        if self._client is not None and self._url is not None:
            self._client.close()
            self._client = None

    def client(self) -> Any:
        if self._client is None:
            from ._client import Client

            self._client = Client(self._url, self._token, timeout=_SERVER_TIMEOUT_S)
            # closed with the kernel, or at exit: a kernel lives as long as its module, usually
            weakref.finalize(self, self._client.close)
        return self._client

    def lookup(self, where: dict[str, str]) -> ConfigSpec | None:
        """The shared best config for this tuning key, or None (a miss, or no usable server)."""
        return self.lookup_result(where)[0]

    def lookup_result(self, where: dict[str, str]) -> tuple[ConfigSpec | None, Any]:
        """The shared best config for this tuning key and the server's answer (LookupPublic), or Nones."""
        from ._client import ServiceError

        if not self.reachable:
            return None, None
        try:
            found = self.client().lookup(
                where["kernel_key"], where["target"], key=where["key"], dtypes=where["dtypes"]
            )
        except ServiceError as exc:
            self._failed(exc, "could not read the shared tuning result; tuning locally")
            return None, None
        if found is None:
            return None, None
        config = _config(found.config)
        if config is None:
            self._warn(
                f"the server's tuning result holds no usable config ({found.config!r}); tuning locally"
            )
            return None, None
        return config, found

    def publish(self, source: str, name: str, where: dict[str, str], timings: list,
                kind: str = "source") -> ConfigSpec | None:  # fmt: skip
        """Record every timed config; the service's best config for the key afterwards, or None when the
        result could not be published (the local result stands)."""
        from ._client import ServiceError
        from ._models import ConfigSpec as WireConfig
        from ._models import KernelCreate, TrialCreate, TuningResultCreate

        if not (self.reachable and self.publishing):
            return None
        trials = [
            TrialCreate(config=WireConfig(kwargs=c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages),
                        time_ms=max(seconds * 1e3, 1e-6))
            for c, seconds in timings
        ]  # fmt: skip
        try:
            from ._fetch import kernel_input

            self.client().submit_kernel(KernelCreate(**kernel_input(source, kind), name=name))
            result = self.client().record_tuning(TuningResultCreate(**where, trials=trials))
        except ServiceError as exc:
            self.publishing = False
            self._failed(exc, "could not publish the tuning result (publishing needs a submit-scoped token); "
                              "keeping the local result")  # fmt: skip
            return None
        return _config(result.config)

    def _failed(self, exc: Exception, what: str) -> None:
        from ._client import AuthError, ServiceUnavailable

        if isinstance(exc, AuthError) and exc.status == 401 or isinstance(exc, ServiceUnavailable):
            self.reachable = False  # no point in asking again in this process
        self._warn(f"tilec server {self._where()}: {what} ({exc})")

    def _where(self) -> str:
        return self._url or getattr(self._client, "url", "?")

    def _warn(self, message: str) -> None:
        if self.warned:
            return
        self.warned = True
        warnings.warn(message, stacklevel=8)  # the frame that launched the kernel (k[grid](...))


class ServerBuilds:
    """A kernel's builds from the local disk cache or the server. Every binary is verified against its
    signed manifest (pinned keys: `trusted_keys`, else TILEC_TRUSTED_KEYS) and the manifest checked to be
    the build asked for, before the runtime sees it; a failed check raises. A server that cannot be
    reached, or refuses to compile (a read-only token), leaves the build to this process (None)."""

    def __init__(self, shared: SharedResults, trusted_keys: Any = None, cache: Any = None) -> None:
        self.shared = shared
        self._trusted_given = trusted_keys
        self._trusted: Any = None
        self._trusted_ready = False
        self._cache_given = cache
        self._cache: Any = None
        self.compiling = True  # False once the server refused a compile (a token without the submit scope)
        self.version: str | None = None  # the server's compiler version (GET /healthz, once)

    def trusted(self) -> Any:
        """The pinned keys (TrustedKeys), or None when none are: then verify() warns once and checks the rest."""
        if not self._trusted_ready:
            from ._verify import TrustedKeys

            given = self._trusted_given
            self._trusted = TrustedKeys.parse(given, "trusted_keys") if isinstance(given, str) else given
            if self._trusted is None:
                self._trusted = TrustedKeys.from_env()
            self._trusted_ready = True
        return self._trusted

    @property
    def local(self) -> Any:
        if self._cache is None:
            from ._cache import LocalCache

            given = self._cache_given
            self._cache = given if isinstance(given, LocalCache) else LocalCache(given)
        return self._cache

    # an autotuned kernel's config per tuning key

    @staticmethod
    def _tuning_index(where: dict[str, str]) -> str:
        from tilec.wire import canonical_json

        return canonical_json({"tuning": where}).decode()

    def tuned_config(self, where: dict[str, str]) -> ConfigSpec | None:
        """The config this cache holds for a tuning key (written when its build was kept), or None."""
        entry = self.local.get_index(self._tuning_index(where))
        return _config(entry.get("config")) if entry is not None else None

    # builds

    def get(
        self, build: Any, source: str, name: str, tuned: tuple[dict, Any] | None = None, kind: str = "source"
    ) -> tuple[Artifact | None, str]:
        """(the verified artifact, "disk" or "server"), or (None, "here") when this process is to build it.
        `tuned`: the tuning key's parts and the server's answer for it, when the build is that key's config."""
        art, entry = self._from_disk(build)  # no network and no HTTP client: a cached launch imports neither
        where = "disk"
        if art is None and self.shared.reachable:
            from ._client import AuthError, ServiceError

            where = "server"
            try:
                art = self._from_server(build, source, name, entry, tuned[1] if tuned else None, kind)
            except AuthError as exc:
                if exc.status == 403:  # a read-only token: the server serves what exists and builds nothing
                    self.compiling = False
                else:
                    self.shared._failed(exc, "could not fetch the build; compiling locally")
            except ServiceError as exc:
                self.shared._failed(exc, "could not fetch the build; compiling locally")
        if art is None:
            return None, "here"
        if tuned is not None and (where == "server" or tuned[1] is not None):  # the config is new here
            self.local.put_index(self._tuning_index(tuned[0]), {"config": build.config})
        return art, where

    def _from_disk(self, build: Any) -> tuple[Artifact | None, dict | None]:
        """The build from the local cache, verified; (None, the index entry) when a file of it is gone or
        was corrupt (deleted by the cache): the entry still names the artifact to fetch again."""
        from ._fetch import check_build, to_artifact
        from ._verify import verify

        entry = self.local.get_index(build.index_key())
        if entry is None:
            return None, None
        try:
            sha = str(entry.get("sha256"))
            manifest, binary = self.local.get_manifest(sha), self.local.get_blob(sha)
        except ValueError:  # not a sha256: an entry not written by this cache
            self.local.drop_index(build.index_key())
            return None, None
        if manifest is None or binary is None:
            return None, entry
        body = verify(manifest, binary, target=build.target, trusted=self.trusted())
        check_build(body, build)
        return to_artifact(body, binary), entry

    def _from_server(
        self, build: Any, source: str, name: str, entry: dict | None, result: Any, kind: str = "source"
    ) -> Artifact | None:
        """The artifact the cache entry names, else the tuning result's build when it is this build, else
        the build the server already holds (its artifact key computed here, with the server's compiler
        version), else the server's compile of it (None when this token may not compile)."""
        from ._client import NotFoundError
        from ._fetch import check_build, mismatch

        client = self.shared.client()
        known = []
        if entry is not None and isinstance(entry.get("artifact_id"), str):
            known.append((entry["artifact_id"], None, True))
        if result is not None and result.artifact is not None:
            known.append((result.artifact.id, result.tuning_key, False))
        if self.version is None:  # a build the server holds needs no compile (nor a submit scope)
            self.version = client.health().compiler_version
        known.append((build.artifact_key(self.version), None, True))
        for artifact_id, tuning_key, ours in known:
            try:
                manifest = client.manifest(artifact_id, tuning_key=tuning_key)
            except NotFoundError:
                continue
            if not ours and mismatch(manifest.manifest, build) is not None:
                continue  # the result was built for another specialisation (alignment, constexprs)
            check_build(manifest.manifest, build)
            return self._keep(manifest, build)
        if not self.compiling:
            return None
        public = client.compile(build.compile_body(source, name, kind))
        manifest = client.manifest(public.id)
        check_build(manifest.manifest, build)
        return self._keep(manifest, build)

    def _keep(self, manifest: Any, build: Any) -> Artifact:
        """Verify the manifest's binary (held already, or downloaded) and keep both and the index entry."""
        from ._fetch import fetch, to_artifact

        local = self.local
        got = fetch(
            self.shared.client(), manifest, target=build.target, trusted=self.trusted(), held=local.get_blob
        )
        body = got.manifest.manifest
        if got.downloaded:
            local.put_blob(got.binary)
        local.put_manifest(got.manifest)
        local.put_index(
            build.index_key(), {"sha256": body.sha256, "artifact_id": body.artifact_id, "target": body.target}
        )
        return to_artifact(body, got.binary)


def _config(value: Any) -> ConfigSpec | None:
    """A shared config {"kwargs", "num_warps", "num_stages"} as the decorator's configs are, or None
    when it is not one (the server's answer is data from other clients: checked, not trusted)."""
    if not isinstance(value, dict) or not isinstance(value.get("kwargs"), dict):
        return None
    if not all(isinstance(k, str) for k in value["kwargs"]):
        return None
    options = [value.get(k) for k in LAUNCH_OPTIONS]
    if any(v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1) for v in options):
        return None
    return ConfigSpec(dict(value["kwargs"]), *options)


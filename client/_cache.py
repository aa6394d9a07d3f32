"""The client's local, content-addressed cache: binaries stored by their sha256 and verified on every read
(a corrupt or truncated file is deleted, never returned), signed manifests beside them, and an index from
a lookup key (a tuning key, or a plain compile's specialisation) to the entry that answers it.

Every write is a temporary file in the same directory and an atomic rename, so any number of processes
share one cache directory (TILEC_CACHE_DIR, else the user cache dir) without locks.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tilec.wire import ManifestPublic


def default_root() -> Path:
    env = os.environ.get("TILEC_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("tilec"))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_sha(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` at `path` so a reader sees the old file or the new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cache_root(given: Any) -> Path:
    """The directory a cache argument names: a LocalCache's, a path, or (None) TILEC_CACHE_DIR or the user cache
    dir, read each time (the variable may change)."""
    if isinstance(given, LocalCache):
        return given.root
    return Path(given) if given is not None else default_root()


class LocalCache:
    """blobs/ab/<sha256>, manifests/<sha256>.json, index/ab/<sha256 of the lookup key>.json under `root`."""

    def __init__(self, root: str | os.PathLike | None = None) -> None:
        self.root = cache_root(root)
        self.corrupt = 0  # files found not to match their name (deleted)

    # binaries

    def blob_path(self, digest: str) -> Path:
        if not _is_sha(digest):
            raise ValueError(f"not a sha256: {digest!r}")
        return self.root / "blobs" / digest[:2] / digest

    def put_blob(self, data: bytes) -> str:
        digest = sha256(data)
        path = self.blob_path(digest)
        if not (path.is_file() and self.get_blob(digest) is not None):
            write_atomic(path, data)
        return digest

    def get_blob(self, digest: str) -> bytes | None:
        """The binary whose sha256 is `digest`, read and verified; None when absent or corrupt (deleted)."""
        path = self.blob_path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        if sha256(data) != digest:
            self.corrupt += 1
            path.unlink(missing_ok=True)
            return None
        return data

    # signed manifests

    def manifest_path(self, digest: str) -> Path:
        if not _is_sha(digest):
            raise ValueError(f"not a sha256: {digest!r}")
        return self.root / "manifests" / f"{digest}.json"

    def put_manifest(self, manifest: ManifestPublic) -> None:
        write_atomic(self.manifest_path(manifest.manifest.sha256), manifest.model_dump_json().encode())

    def get_manifest(self, digest: str) -> ManifestPublic | None:
        path = self.manifest_path(digest)
        try:
            found = ManifestPublic.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:  # not JSON, or not a manifest: gone, fetched again
            self.corrupt += 1
            path.unlink(missing_ok=True)
            return None
        if found.manifest.sha256 != digest:
            self.corrupt += 1
            path.unlink(missing_ok=True)
            return None
        return found

    # the index

    def index_path(self, key: str) -> Path:
        h = sha256(key.encode())
        return self.root / "index" / h[:2] / f"{h}.json"

    def put_index(self, key: str, entry: dict[str, Any]) -> None:
        write_atomic(self.index_path(key), json.dumps({"key": key, **entry}, sort_keys=True).encode())

    def get_index(self, key: str) -> dict[str, Any] | None:
        path = self.index_path(key)
        try:
            entry = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:
            self.corrupt += 1
            path.unlink(missing_ok=True)
            return None
        if not isinstance(entry, dict) or entry.get("key") != key:
            self.corrupt += 1
            path.unlink(missing_ok=True)
            return None
        return entry

    def drop_index(self, key: str) -> None:
        self.index_path(key).unlink(missing_ok=True)


class LocalBuilds:
    """Builds made in this process without a server, kept in the local cache for the next process (as
    Triton keeps ~/.triton/cache): the artifact's JSON stored by its sha256 (the binary inside checked
    against its own sha256 on every read), under a key of the build, the compile options and the compiler
    version, so a compiler change or another option never reads an old build. They are this user's own
    builds, unsigned; TILEC_ALWAYS_COMPILE=1 compiles every time (nothing read, nothing written)."""

    def __init__(self, cache: LocalCache | str | os.PathLike | None = None) -> None:
        self.cache = cache if isinstance(cache, LocalCache) else LocalCache(cache)

    @staticmethod
    def enabled() -> bool:
        return os.environ.get("TILEC_ALWAYS_COMPILE", "").strip().lower() not in ("1", "true", "yes", "on")

    @staticmethod
    def key(build: Any, options: Any) -> str:
        from tilec.compiler.artifact import compiler_version

        body = {"local": build.index_key(), "options": options.stable_hash(), "compiler": compiler_version()}
        return json.dumps(body, sort_keys=True)

    def get(self, build: Any, options: Any) -> Any:
        """The artifact this cache holds for the build, or None (absent, corrupt: dropped, or not the build)."""
        from tilec.compiler.artifact import Artifact

        key = self.key(build, options)
        try:
            entry = self.cache.get_index(key)
            sha = entry.get("sha256") if entry is not None else None
            data = self.cache.get_blob(sha) if isinstance(sha, str) and _is_sha(sha) else None
        except OSError:  # an unreadable cache directory: compiled here, as with no cache
            return None
        if entry is None:
            return None
        try:
            art = Artifact.from_json(data.decode()) if data is not None else None
        except (ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError):
            art = None
        if art is None or art.target.split(":")[0] != build.target.split(":")[0]:
            self.cache.corrupt += data is not None
            try:
                self.cache.drop_index(key)
            except OSError:
                pass
            return None
        return art

    def put(self, build: Any, options: Any, art: Any) -> None:
        try:
            sha = self.cache.put_blob(art.to_json().encode())
            self.cache.put_index(self.key(build, options), {"sha256": sha})
        except OSError:  # a read-only or full cache directory: the build is still this process's
            pass

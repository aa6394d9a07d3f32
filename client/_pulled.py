"""TILEC_INDEX=DIR[:DIR...]: directories `tilec pull` wrote, consulted by every `tilec.jit` kernel (and so
by the drop-in and the Inductor backend) before its disk cache, its server or a compile. A plain build is
found by its build (kernel key, specialisation, config, target); an autotuned launch by its tuning key,
whose pulled config is then launched. A call whose hints (alignment, divisibility, == 1) no pulled build has
exactly runs the most specialised pulled build of its specialisation whose hints it has. Each
binary is verified as load_index verifies it.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from tilec.compiler.artifact import Artifact

_STATE: dict[str, Any] = {"builds": None, "env": None}
_LOCK = threading.Lock()


def _key(value: Any) -> str:
    """A map key for a build or a tuning key: sorted JSON (here, not tilec.wire's: a launch that finds its
    build needs pydantic only to read the build's manifest, once)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _where_key(where: dict[str, str]) -> str:
    return _key({k: where[k] for k in ("kernel_key", "key", "dtypes", "target")})


def _build_key(build: Any) -> str:
    return _key([build.kernel_key, build.spec, build.config, build.target])


def _family(build: Any) -> str:
    from dataclasses import replace

    return _build_key(replace(build, hints={}))


class PulledBuilds:
    """The entries of one or more pulled directories, by build and by tuning key."""

    def __init__(self, directories: list[Path], trusted: Any = None) -> None:
        from ._fetch import Build
        from ._index import _Entry, read_index

        self.by_build: dict[str, Any] = {}
        self.by_tuning: dict[str, dict[str, Any]] = {}
        self.by_family: dict[str, list[tuple[dict, Any]]] = {}  # the builds of one specialisation but its hints
        self._trusted = trusted
        self._trusted_ready = trusted is not None
        for directory in directories:
            for data in read_index(directory)["entries"]:
                entry = _Entry(data, directory)
                spec = data["spec"]
                build = Build(data["kernel_key"], dict(spec.get("signature") or {}), dict(spec.get("constexprs") or {}),
                              dict(spec.get("hints") or {}), data["config"], data["target"])  # fmt: skip
                self.by_build.setdefault(_build_key(build), entry)
                self.by_family.setdefault(_family(build), []).append((build.hints, entry))
                tuning = data.get("tuning")
                if isinstance(tuning, dict) and all(isinstance(tuning.get(k), str) for k in ("kernel_key", "key", "dtypes", "target")):
                    self.by_tuning.setdefault(_where_key(tuning), data["config"])

    def trusted(self) -> Any:
        if not self._trusted_ready:
            from ._verify import TrustedKeys

            self._trusted = TrustedKeys.from_env()
            self._trusted_ready = True
        return self._trusted

    def artifact(self, build: Any) -> Artifact | None:
        """The pulled, verified build, or None when no directory holds it."""
        entry = self.by_build.get(_build_key(build)) or self._weaker(build)
        return None if entry is None else entry.load(build.target, self.trusted())

    def _weaker(self, build: Any) -> Any:
        """The build of the same specialisation whose hints the call has, the most of them: hints are promises
        about the arguments (aligned, divisible by 16, equal to 1), so a build that assumes fewer runs the call."""
        fits = [(sum(len(h) for h in hints.values()), entry) for hints, entry in self.by_family.get(_family(build), [])
                if all(build.hints.get(n, {}).get(k) == v for n, h in hints.items() for k, v in h.items())]
        return max(fits, key=lambda f: f[0])[1] if fits else None

    def tuned_config(self, where: dict[str, str]) -> dict[str, Any] | None:
        """The config pulled for a tuning key ({"kwargs", "num_warps", "num_stages"}), or None."""
        return self.by_tuning.get(_where_key(where))


def pulled() -> PulledBuilds | None:
    """The builds of TILEC_INDEX's directories (read again when the variable changes), or None when unset."""
    value = os.environ.get("TILEC_INDEX") or ""
    if _STATE["env"] == value:
        return _STATE["builds"]
    with _LOCK:
        dirs = [Path(p) for p in value.split(os.pathsep) if p]
        _STATE["builds"] = PulledBuilds(dirs) if dirs else None
        _STATE["env"] = value
        return _STATE["builds"]

"""`load_index(DIR)`: the kernels `tilec pull` wrote to a directory, launchable with no server and no network.
`idx["add_kernel"][grid](x, y, out, n)` picks the build whose specialisation fits the call (dtypes, hints,
constexprs, the autotune key's values); before its first load, its binary and signed manifest are verified
(client/_verify.py) and the manifest checked to be the build the index names. The loader sees nothing else.

DIR/index.json: {"format": "tilec-index/1", "target", "entries": [{name, file, kind ("tuned" | "plain"),
tuning_key?, key, dtypes, config, sha256, artifact_id, target, kernel_key, spec, params, key_names}]};
DIR/blobs/<sha256> the binaries, DIR/manifests/<sha256>.json their signed manifests (a record's pull also writes
DIR/manifests/<artifact_id>[.<tuning_key>].json, read first: two specialisations' builds may share a binary).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tilec.compiler.artifact import Artifact
from tilec.compiler.tune.keys import tuning_key
from tilec.runtime.grid import check_grid
from tilec.runtime.launch import BF16Array, launch, select_target, specialise

from ._exceptions import ArgumentError, TilecError, VerificationError

INDEX_FORMAT = "tilec-index/1"
INDEX_FILE = "index.json"
_LAUNCH_OPTIONS = ("num_warps", "num_stages")
_ENTRY_FIELDS = {"name": str, "kind": str, "key": str, "dtypes": str, "config": dict, "sha256": str,
                 "artifact_id": str, "target": str, "kernel_key": str, "spec": dict, "params": list}  # fmt: skip


class IndexFileError(TilecError):
    """index.json is missing or not one `tilec pull` writes."""


def read_index(directory: str | os.PathLike) -> dict[str, Any]:
    """DIR/index.json, checked to be an index of this format (IndexFileError otherwise)."""
    path = Path(directory) / INDEX_FILE
    try:
        data = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise IndexFileError(f"{path} does not exist: `tilec pull -o {directory}` writes it") from None
    except (OSError, ValueError) as exc:
        raise IndexFileError(f"{path} cannot be read as JSON ({exc})") from None
    if (
        not isinstance(data, dict)
        or data.get("format") != INDEX_FORMAT
        or not isinstance(data.get("entries"), list)
    ):
        raise IndexFileError(f"{path} is not a {INDEX_FORMAT} index")
    for number, entry in enumerate(data["entries"]):
        bad = [
            k
            for k, t in _ENTRY_FIELDS.items()
            if not isinstance(entry, dict) or not isinstance(entry.get(k), t)
        ]
        if bad:
            raise IndexFileError(f"{path}: entry {number} lacks or mistypes {', '.join(bad)}")
    return data


def _json(value: Any) -> str:
    from tilec.wire import canonical_json

    return canonical_json(value).decode()


class _Entry:
    """One build of a kernel in the index; loaded (verified) on first use."""

    def __init__(self, data: dict[str, Any], directory: Path) -> None:
        self.data = data
        self.directory = directory
        self.spec = data["spec"]
        self.signature: dict[str, str] = dict(self.spec.get("signature") or {})
        self.hints: dict[str, dict] = dict(self.spec.get("hints") or {})
        self.constexprs = {**(self.spec.get("constexprs") or {}), **(data["config"].get("kwargs") or {})}
        self.params = [
            p["name"] for p in data["params"] if isinstance(p, dict) and isinstance(p.get("name"), str)
        ]
        self.artifact: Artifact | None = None

    def describe(self) -> str:
        sig = ",".join(f"{n}={t}" for n, t in self.signature.items())
        consts = ",".join(f"{k}={v!r}" for k, v in self.constexprs.items())
        key = f" key {self.data['key']}" if self.data["kind"] == "tuned" and self.data["key"] else ""
        return f"{sig}; {consts or 'no constexprs'}{key}"

    def why_not(self, bound: dict[str, Any], target: str) -> str | None:
        """Why this build cannot run the call, or None when it can."""
        if self.data["target"] != target:
            return f"built for {self.data['target']}, the arguments run on {target}"
        for name, given in bound.items():
            if name in self.constexprs:
                if _json(given) != _json(self.constexprs[name]):
                    return f"{name}={given!r}, the build has {self.constexprs[name]!r}"
            elif name in _LAUNCH_OPTIONS:
                if given != self.data["config"].get(name):
                    return f"{name}={given!r}, the build has {self.data['config'].get(name)!r}"
            elif name not in self.signature:
                return f"'{name}' is not a parameter of this build"
        types: dict[str, str] = {}
        for name, want in self.signature.items():
            if name not in bound:
                return f"argument '{name}' is missing"
            arg = specialise(name, bound[name])
            types[name] = arg.type
            if arg.type != want:
                return f"{name} is {arg.type}, the build takes {want}"
            missing = {k: v for k, v in self.hints.get(name, {}).items() if dict(arg.hints).get(k) != v}
            if missing:
                shown = f"{name}={bound[name]!r}" if not arg.type.startswith("*") else f"{name} (an array)"
                return f"{shown} does not have the build's hints {_json(missing)}"
        if self.data["kind"] == "tuned":
            names = [n for n in self.data.get("key_names") or [] if n in self.signature]
            # no autotune key: the build fits any call (a kernel without a decorator is keyed by its launch)
            key = names and tuning_key(kernel_key=self.data.get("kernel_key", ""), key_names=names,
                                       value=lambda n: key_value(bound[n], types[n]), runtime=list(self.signature),
                                       signature=types, target=self.data["target"]).key  # fmt: skip
            if names and key != self.data["key"]:
                return f"its tuning key is {self.data['key']}, the call's {key}"
        return None

    def load(self, target: str, trusted: Any) -> Artifact:
        """The verified artifact: the manifest is for `target`, signed by a pinned key, its binary the one
        it vouches for, and it is the build the index entry names. Any failed check raises."""
        if self.artifact is not None:
            return self.artifact
        from tilec.wire import ManifestPublic

        from ._fetch import Build, check_build, to_artifact
        from ._verify import verify

        sha = self.data["sha256"]
        if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
            raise VerificationError(
                f"{self.directory}: entry {self.data['name']} names no sha256 ({sha[:80]!r})"
            )
        # a record's pull names each manifest by its artifact id too: builds of different specialisations can
        # share a binary (so a sha256), never a manifest
        # (and the tuning key it is the best build of: two keys' best may be one build)
        aid, tk = self.data["artifact_id"], self.data.get("tuning_key")
        name = f"{aid}.{tk}" if isinstance(tk, str) else aid
        by_id = self.directory / "manifests" / f"{name}.json"
        hexes = all(len(p) == 64 and all(c in "0123456789abcdef" for c in p) for p in name.split("."))
        named = by_id if hexes and by_id.exists() else None
        try:
            manifest = ManifestPublic.model_validate_json(
                (named or self.directory / "manifests" / f"{sha}.json").read_bytes()
            )
            binary = (self.directory / "blobs" / sha).read_bytes()
        except (OSError, ValueError) as exc:
            raise VerificationError(
                f"{self.directory}: build {sha[:16]} of {self.data['name']} cannot be read ({exc})"
            ) from None
        body = verify(manifest, binary, target=target, trusted=trusted)
        build = Build(kernel_key=self.data["kernel_key"], signature=self.signature,
                      constexprs=self.spec.get("constexprs") or {}, hints=self.hints, config=self.data["config"],
                      target=self.data["target"])  # fmt: skip
        check_build(body, build)
        if body.kernel_name != self.data["name"]:
            raise VerificationError(
                f"artifact {body.artifact_id} is not the build the index names ({self.data['name']})"
            )
        tuning_key = self.data.get("tuning_key")
        if body.tuning_key is not None and body.tuning_key != tuning_key:
            raise VerificationError(f"artifact {body.artifact_id} is the best build of tuning key {body.tuning_key}, "
                                    f"the index says {tuning_key}")  # fmt: skip
        self.artifact = to_artifact(body, binary)
        return self.artifact


class IndexedKernel:
    """The builds of one kernel in an index; `kernel[grid](*args, **constexprs)` launches the one that fits."""

    def __init__(self, name: str, entries: list[_Entry], trusted: Any) -> None:
        self.name = name
        self.entries = entries
        self._trusted = trusted

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: self.run(grid, args, kwargs)

    def __repr__(self) -> str:
        return f"<IndexedKernel {self.name}: {len(self.entries)} build(s)>"

    def run(self, grid: Any, args: tuple, kwargs: dict) -> None:
        entry, bound, target = self.select(args, kwargs)
        art = entry.load(target, self._trusted)
        meta = {**entry.constexprs, **bound}
        runtime = [bound[n] for n in entry.params if n in entry.signature]
        launch(target, art, runtime, check_grid(grid, meta))

    def select(self, args: tuple, kwargs: dict) -> tuple[_Entry, dict[str, Any], str]:
        """The build that fits the call (the most specialised one when several do), the call's arguments
        by name, and its target. ArgumentError naming every build and why it does not fit otherwise."""
        target = select_target([*args, *kwargs.values()])
        reasons = []
        best: tuple[int, _Entry, dict] | None = None
        for entry in self.entries:
            bound = self._bind(entry, args, kwargs)
            why = bound if isinstance(bound, str) else entry.why_not(bound, target)
            if why is not None:
                reasons.append(f"  {entry.describe()}: {why}")
                continue
            rank = sum(len(h) for h in entry.hints.values())
            if best is None or rank > best[0]:
                best = (rank, entry, bound)
        if best is None:
            raise ArgumentError(
                f"no build of {self.name} in the index fits this call:\n" + "\n".join(reasons)
            )
        return best[1], best[2], target

    @staticmethod
    def _bind(entry: _Entry, args: tuple, kwargs: dict) -> dict[str, Any] | str:
        if len(args) > len(entry.params):
            return f"{len(args)} positional arguments, the kernel has {len(entry.params)} parameters"
        bound = dict(zip(entry.params, args, strict=False))
        for name, value in kwargs.items():
            if name in bound:
                return f"argument '{name}' given twice"
            bound[name] = value
        return bound


class KernelIndex(Mapping[str, IndexedKernel]):
    """The kernels of a pulled directory by name: `idx["add_kernel"]` or `idx.add_kernel`."""

    def __init__(self, directory: Path, kernels: dict[str, IndexedKernel], target: str) -> None:
        self.directory = directory
        self.target = target
        self._kernels = kernels

    def __getitem__(self, name: str) -> IndexedKernel:
        found = self._kernels.get(name)
        if found is None:
            held = ", ".join(sorted(self._kernels)) or "none"
            raise KeyError(f"{self.directory} holds no kernel {name!r} (it holds: {held})")
        return found

    def __getattr__(self, name: str) -> IndexedKernel:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(str(exc)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)


def load_index(directory: str | os.PathLike, *, trusted_keys: Any = None) -> KernelIndex:
    """The kernels `tilec pull` wrote to `directory`. `trusted_keys`: TrustedKeys, or keys as text (a list
    or the lines of `tilec key show`); None: TILEC_TRUSTED_KEYS (unset: the manifests' signatures are not
    checked, with a warning, and the binaries still are against them)."""
    from ._verify import TrustedKeys

    root = Path(directory)
    data = read_index(root)
    trusted = (
        TrustedKeys.parse(trusted_keys, "trusted_keys") if isinstance(trusted_keys, str) else trusted_keys
    )
    if trusted is None:
        trusted = TrustedKeys.from_env()
    by_name: dict[str, list[_Entry]] = {}
    for entry in data["entries"]:
        by_name.setdefault(entry["name"], []).append(_Entry(entry, root))
    kernels = {name: IndexedKernel(name, entries, trusted) for name, entries in by_name.items()}
    return KernelIndex(root, kernels, str(data.get("target", "")))


def key_value(value: Any, triton_type: str) -> Any:
    """An autotune key argument's value in a tuning key: a tensor (or a descriptor) is its shape and dtype."""
    if triton_type.startswith("tensordesc"):
        return {"shape": [int(d) for d in value.shape], "dtype": triton_type}
    if not triton_type.startswith("*"):
        return value
    shape = value.bits.shape if isinstance(value, BF16Array) else value.shape
    return {"shape": [int(d) for d in shape], "dtype": triton_type[1:]}

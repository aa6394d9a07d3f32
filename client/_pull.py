"""`tilec pull`'s work, without the command line: read a kernel manifest (tilec.toml), find every kernel's
build on the service, verify each signed manifest and binary, and write them with an index that
load_index launches from (no server, no network). What the service does not have is listed with why;
`compile_missing` has it build plain compiles and tune the rest.

A plain entry's build is found by its artifact key, computed here as the service does (kernel key,
specialisation, config, target, the server's compiler version from /healthz): a GET, never a compile.
A tuned entry's tuning key comes from the launch description (runtime.tune.prepare) and is looked up.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._cache import sha256, write_atomic
from ._exceptions import VerificationError
from ._fetch import Build, check_build, fetch, normal_config
from ._index import INDEX_FILE, INDEX_FORMAT

_KEYS = {"file", "name", "signature", "launch", "constexpr", "hints", "num_warps", "num_stages"}
FINAL_STATES = ("done", "failed", "cancelled")
POLL_S = 0.3


class PullInputError(Exception):
    """The manifest, or a kernel file or launch description it names, cannot be used (exit 2)."""


@dataclass
class KernelEntry:
    """One [[kernel]] table of the manifest."""

    number: int
    name: str
    file: str
    signature: dict[str, str]
    launch: str | None = None
    constexprs: dict[str, Any] = field(default_factory=dict)
    hints: dict[str, dict[str, Any]] = field(default_factory=dict)
    num_warps: int | None = None
    num_stages: int | None = None

    @property
    def where(self) -> str:
        return f"kernel[{self.number}] ({self.name})"


def read_manifest(path: Path) -> list[KernelEntry]:
    """The [[kernel]] tables of a TOML manifest, each checked (PullInputError naming the table and field)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise PullInputError(f"{path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise PullInputError(f"{path}: not TOML ({exc})") from None
    tables = data.get("kernel")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise PullInputError(f"{path}: expected one or more [[kernel]] tables")
    unknown = sorted(set(data) - {"kernel"})
    if unknown:
        raise PullInputError(f"{path}: unknown top-level key(s) {', '.join(unknown)}")
    return [_entry(path, number, table) for number, table in enumerate(tables)]


def _entry(path: Path, number: int, table: dict) -> KernelEntry:
    from tilec.compiler.errors import CompileError

    from ._cli_compile import parse_pairs

    where = f"{path}: kernel[{number}]"
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise PullInputError(
            f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
        )
    for key in ("file", "name", "signature"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise PullInputError(f"{where}: '{key}' must be a non-empty string")
    for key, kind in (
        ("launch", str),
        ("constexpr", dict),
        ("hints", dict),
        ("num_warps", int),
        ("num_stages", int),
    ):
        if key in table and (not isinstance(table[key], kind) or isinstance(table[key], bool)):
            raise PullInputError(f"{where}: '{key}' must be a {'table' if kind is dict else kind.__name__}")
    for key in ("num_warps", "num_stages"):
        if key in table and table[key] < 1:
            raise PullInputError(f"{where}: '{key}' must be at least 1")
    bad = [k for k, v in table.get("constexpr", {}).items() if not isinstance(v, bool | int | float | str)]
    if bad:
        raise PullInputError(f"{where}: constexpr {', '.join(bad)}: a value is an int, float, bool or string")
    try:
        signature = parse_pairs(table["signature"], "signature")
    except CompileError as exc:
        raise PullInputError(f"{where}: {exc}") from None
    return KernelEntry(number, table["name"], table["file"], signature, table.get("launch"),
                       dict(table.get("constexpr", {})), dict(table.get("hints", {})),
                       table.get("num_warps"), table.get("num_stages"))  # fmt: skip


@dataclass
class Planned:
    """An entry read and resolved here: its kernel's source and key; a plain entry's build, or a tuned
    entry's prepared tune (runtime.tune.Prepared: the tuning key's parts, the base spec)."""

    entry: KernelEntry
    source: str
    kernel_key: str
    params: list[dict[str, Any]]
    key_names: list[str]
    build: Build | None = None
    prepared: Any = None

    @property
    def kind(self) -> str:
        return "plain" if self.prepared is None else "tuned"


def plan(entry: KernelEntry, base: Path, target: str) -> Planned:
    """Read the entry's kernel (ast only) and, for a tuned entry, its launch description; raises
    CompileError (located) or PullInputError."""
    from tilec.compiler.frontend import read_kernel

    source = _read(base / entry.file, entry, "file")
    ks = read_kernel(source, entry.name, filename=entry.file)
    params = [{"name": p.name, "constexpr": bool(p.constexpr)} for p in ks.params]
    key_names = list(ks.autotune.key) if ks.autotune is not None else []
    planned = Planned(entry, source, ks.key, params, key_names)
    if entry.launch is None:
        config = normal_config({}, entry.num_warps, entry.num_stages)
        planned.build = Build(ks.key, entry.signature, entry.constexprs, entry.hints, config, target)
        return planned
    from tilec.compiler.tune.launch import LaunchDescription, LaunchDescriptionError
    from tilec.runtime.tune import TuneSpec, prepare

    text = _read(base / entry.launch, entry, "launch")
    try:
        spec = TuneSpec(source=source, name=ks.name, signature=entry.signature,
                        launch=LaunchDescription.from_toml(text), target=target, constexprs=entry.constexprs)  # fmt: skip
        planned.prepared = prepare(spec)
    except LaunchDescriptionError as exc:
        raise PullInputError(f"{entry.where}: {entry.launch}: {exc}") from None
    return planned


def _read(path: Path, entry: KernelEntry, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PullInputError(
            f"{entry.where}: {what} {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None


@dataclass
class Missing:
    name: str
    file: str
    why: str


@dataclass
class PullReport:
    entries: list[dict[str, Any]] = field(default_factory=list)
    missing: list[Missing] = field(default_factory=list)
    downloaded: int = 0
    up_to_date: int = 0


class Puller:
    """Pulls planned entries from one server into `out`; `on_step(description)` is told of each step and
    `on_job(job)` of each poll of a tune job (for a progress display)."""

    def __init__(self, client: Any, out: Path, target: str, trusted: Any, *, compile_missing: bool = False,
                 on_step: Callable[[str], None] = lambda d: None, on_job: Callable[[Any], None] = lambda j: None) -> None:  # fmt: skip
        self.client = client
        self.out = out
        self.target = target
        self.trusted = trusted
        self.compile_missing = compile_missing
        self.on_step = on_step
        self.on_job = on_job
        self.report = PullReport()
        self._version: str | None = None

    def pull(self, planned: list[Planned]) -> PullReport:
        """Find, verify and write every entry; tune jobs (with compile_missing) are queued for all tuned
        entries the server lacks first, then followed together."""
        jobs: list[tuple[Planned, Any]] = []
        for p in planned:
            self.on_step(f"{p.entry.name}: looking up")
            found = self._find(p)
            if isinstance(found, str):
                if p.kind == "tuned" and self.compile_missing and found.startswith("no tuning result"):
                    jobs.append((p, self._submit(p)))
                else:
                    self.report.missing.append(Missing(p.entry.name, p.entry.file, found))
                continue
            self._keep(p, *found)
        for p, job in self._follow(jobs):
            if job.state != "done":
                why = f"tune job {job.id} {job.state}" + (f": {job.error}" if job.error else "")
                self.report.missing.append(Missing(p.entry.name, p.entry.file, why))
                continue
            found = self._find(p)
            if isinstance(found, str):
                self.report.missing.append(
                    Missing(p.entry.name, p.entry.file, f"after tune job {job.id}: {found}")
                )
            else:
                self._keep(p, *found)
        return self.report

    # ---- finding an entry's build on the server -------------------------------------------------------

    def _find(self, p: Planned) -> tuple[Any, str | None] | str:
        """(the server's manifest of the entry's build, the tuning key it is the best build of), or why
        the server does not have it."""
        return self._find_plain(p) if p.build is not None else self._find_tuned(p)

    def server_version(self) -> str:
        if self._version is None:
            self._version = self.client.health().compiler_version
        return self._version

    def _find_plain(self, p: Planned) -> tuple[Any, None] | str:
        from ._client import NotFoundError

        build = p.build
        key = build.artifact_key(self.server_version())
        try:
            manifest = self.client.manifest(key)
        except NotFoundError:
            if not self.compile_missing:
                return f"not built for {self.target} by the server's compiler ({self.server_version()[:12]})"
            self.on_step(f"{p.entry.name}: compiling on the server")
            public = self.client.compile(build.compile_body(p.source, p.entry.name))
            manifest = self.client.manifest(public.id)
        check_build(manifest.manifest, build)
        return manifest, None

    def _find_tuned(self, p: Planned) -> tuple[Any, str | None] | str:
        prep = p.prepared
        found = self.client.lookup(prep.kernel_key, self.target, key=prep.key, dtypes=prep.dtypes)
        if found is None:
            return f"no tuning result for key {prep.key or '(none)'}, dtypes {prep.dtypes} on {self.target}"
        if found.artifact is None:
            if not self.compile_missing:
                return f"the tuning result's best config {_config_text(found.config)} has no build"
            return self._compile_best(p, found), None
        manifest = self.client.manifest(found.artifact.id, tuning_key=found.tuning_key)
        body = manifest.manifest
        if (
            body.kernel_key != prep.kernel_key
            or body.target != self.target
            or body.tuning_key != found.tuning_key
        ):
            raise VerificationError(f"artifact {body.artifact_id} is not the best build of {p.entry.name}'s tuning key "
                                    f"{found.tuning_key} for {self.target}")  # fmt: skip
        if body.spec.get("signature") != prep.spec.signature:
            raise VerificationError(f"artifact {body.artifact_id} takes {body.spec.get('signature')}, "
                                    f"{p.entry.where} says {prep.spec.signature}")  # fmt: skip
        return manifest, found.tuning_key

    def _compile_best(self, p: Planned, found: Any) -> Any:
        """A build of a tuning result's best config (one recorded without a build), compiled by the server
        for the launch description's specialisation."""
        base = p.prepared.base
        cfg = found.config
        build = Build(p.kernel_key, dict(base.signature), dict(base.constexprs), dict(base.hints),
                      normal_config(cfg.get("kwargs") or {}, cfg.get("num_warps"), cfg.get("num_stages")),
                      self.target)  # fmt: skip
        self.on_step(f"{p.entry.name}: compiling the tuned config on the server")
        public = self.client.compile(build.compile_body(p.source, p.entry.name))
        manifest = self.client.manifest(public.id)
        check_build(manifest.manifest, build)
        return manifest

    # ---- tune jobs ----------------------------------------------------------------------------------

    def _submit(self, p: Planned) -> Any:
        from tilec.wire import TuneJobCreate

        spec = p.prepared.spec
        body = TuneJobCreate(source=p.source, name=p.entry.name, signature=spec.signature, constexprs=spec.constexprs,
                             launch=spec.launch.model_dump(mode="json"), target=self.target)  # fmt: skip
        self.on_step(f"{p.entry.name}: queueing a tune job")
        job = self.client.submit_tune(body)
        self.on_job(job)
        return job

    def _follow(self, jobs: list[tuple[Planned, Any]]) -> list[tuple[Planned, Any]]:
        """Poll every job until it ends."""
        pending = list(jobs)
        done: list[tuple[Planned, Any]] = []
        while pending:
            still = []
            for p, job in pending:
                job = self.client.tune_job(job.id) if job.state not in FINAL_STATES else job
                self.on_job(job)
                (done if job.state in FINAL_STATES else still).append((p, job))
            pending = still
            if pending:
                time.sleep(POLL_S)
        return done

    # ---- writing -------------------------------------------------------------------------------------

    def held(self, digest: str) -> bytes | None:
        """The binary already in out/blobs, when it is intact (a corrupt one is deleted)."""
        path = self.out / "blobs" / digest
        try:
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None
        if sha256(data) != digest:
            path.unlink(missing_ok=True)
            return None
        return data

    def _fetched(self, p: Any, manifest: Any) -> Any:
        """Verify the build (its binary held already or downloaded) and write its binary; the fetch result."""
        self.on_step(f"{p.entry.name}: fetching")
        got = fetch(self.client, manifest, target=self.target, trusted=self.trusted, held=self.held)
        if got.downloaded:
            write_atomic(self.out / "blobs" / got.manifest.manifest.sha256, got.binary)
            self.report.downloaded += 1
        else:
            self.report.up_to_date += 1
        return got

    def _keep(self, p: Planned, manifest: Any, tuning_key: str | None) -> None:
        """Verify and write the build, and add its index entry."""
        got = self._fetched(p, manifest)
        body = got.manifest.manifest
        _write_if_changed(
            self.out / "manifests" / f"{body.sha256}.json", got.manifest.model_dump_json().encode()
        )
        self.report.entries.append(_index_entry(p, body, tuning_key))


def _index_entry(p: Planned, body: Any, tuning_key: str | None) -> dict[str, Any]:
    entry = {
        "name": p.entry.name, "file": p.entry.file, "kind": p.kind, "kernel_key": body.kernel_key,
        "key": p.prepared.key if p.prepared is not None else "",
        "dtypes": p.prepared.dtypes if p.prepared is not None else _dtypes(p),
        "config": body.config, "spec": body.spec, "sha256": body.sha256, "artifact_id": body.artifact_id,
        "target": body.target, "params": p.params, "key_names": p.key_names,
    }  # fmt: skip
    if tuning_key is not None:
        entry["tuning_key"] = tuning_key
    return entry


def _dtypes(p: Planned) -> str:
    from tilec.compiler.tune.keys import dtypes_string

    return dtypes_string(p.entry.signature, [q["name"] for q in p.params])


def _config_text(config: dict) -> str:
    kwargs = ",".join(f"{k}={v}" for k, v in (config.get("kwargs") or {}).items())
    return "{" + ", ".join(p for p in (kwargs, f"num_warps={config.get('num_warps')}") if p) + "}"


def _write_if_changed(path: Path, data: bytes) -> None:
    try:
        if path.read_bytes() == data:
            return
    except OSError:
        pass
    write_atomic(path, data)


def write_index(out: Path, target: str, entries: list[dict[str, Any]]) -> None:
    """out/index.json, rewritten only when its content changes (a CI cache keyed on it stays warm)."""
    data = {"format": INDEX_FORMAT, "target": target, "entries": entries}
    _write_if_changed(out / INDEX_FILE, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


def trusted_keys(value: str | None) -> Any:
    """Pinned keys from --trusted-keys (a file, or keys as text), else TILEC_TRUSTED_KEYS, else None."""
    from ._verify import TrustedKeys

    if not value:
        return TrustedKeys.from_env()
    path = Path(value).expanduser()
    if path.is_file():
        return TrustedKeys.parse(path.read_text(encoding="utf-8"), f"--trusted-keys file {path}")
    return TrustedKeys.parse(value, "--trusted-keys")


# a recorded manifest (TILEC_RECORD, client/_record.py): builds named by keys, kernels carried inline


@dataclass
class RecordedEntry:
    number: int
    name: str
    file: str = "<record>"

    @property
    def where(self) -> str:
        return f"entry[{self.number}] ({self.name})"


@dataclass
class Recorded:
    """One entry of a record, its kernel read here (ast only): a plain build, or a tuned one whose config
    the server's tuning result chooses (`tuning`: the key's parts; `launch`: a tune job's description)."""

    entry: RecordedEntry
    source: str
    source_kind: str
    kernel_key: str
    params: list[dict[str, Any]]
    key_names: list[str]
    build: Build
    tuning: dict[str, str] | None
    launch: dict[str, Any] | None
    variant: bool
    prepared: Any = None
    pinned: bool = False  # the server's tuning result is a pinned config

    @property
    def kind(self) -> str:
        return "plain" if self.tuning is None else "tuned"


def plan_record(path: Path, target: str) -> list[Recorded]:
    """The entries of a record for `target` (others are left out), each kernel read to check its key."""
    from tilec.compiler.frontend import read_kernel
    from tilec.compiler.frontend.bundle import bundle_from_json, read_bundle

    from ._record import RecordFileError, read_record

    try:
        data = read_record(path)
    except RecordFileError as exc:
        raise PullInputError(str(exc)) from None
    read: dict[str, Any] = {}
    planned = []
    for number, e in enumerate(data["entries"]):
        if e["target"] != target:
            continue
        src = data["sources"][e["source"]]
        if e["source"] not in read:
            text = src["text"]
            ks = read_bundle(bundle_from_json(text)) if src["kind"] == "bundle" else read_kernel(text, e["name"])
            read[e["source"]] = ks
        ks = read[e["source"]]
        if ks.key != e["kernel_key"]:
            raise PullInputError(f"{path}: entry {number} ({e['name']}) says kernel {e['kernel_key'][:16]}, its source "
                                 f"reads as {ks.key[:16]} (recorded by another tilec version?)")  # fmt: skip
        config = e["config"]
        build = Build(e["kernel_key"], e["signature"], e["constexprs"], e["hints"],
                      normal_config(config.get("kwargs") or {}, config.get("num_warps"), config.get("num_stages")), target)  # fmt: skip
        params = [{"name": p.name, "constexpr": bool(p.constexpr)} for p in ks.params]
        key_names = list(ks.autotune.key) if ks.autotune is not None else []
        label = "launched" if not e["variant"] else "variant " + _hints_text(e["hints"])
        planned.append(Recorded(RecordedEntry(number, e["name"], label), src["text"], src["kind"], e["kernel_key"], params,
                                key_names, build, e.get("tuning"), e.get("launch"), e["variant"]))  # fmt: skip
    return planned


class RecordPuller(Puller):
    """Puller for a record's entries: a plain build by its artifact key; a tuned one by its tuning key,
    whose config (pinned or measured) is then built for the recorded specialisation."""

    def _find(self, p: Any) -> tuple[Any, str | None] | str:
        if p.tuning is None:
            return self._find_build(p, p.build)
        found = self.client.lookup(p.tuning["kernel_key"], self.target, key=p.tuning["key"], dtypes=p.tuning["dtypes"])
        if found is None:
            return f"no tuning result for key {p.tuning['key'] or '(none)'}, dtypes {p.tuning['dtypes']} on {self.target}"
        cfg = found.config
        p.pinned = found.source == "pinned"
        b = p.build
        build = Build(b.kernel_key, b.signature, _untuned(b.constexprs, cfg), b.hints,
                      normal_config(cfg.get("kwargs") or {}, cfg.get("num_warps"), cfg.get("num_stages")), self.target)  # fmt: skip
        if found.artifact is not None:
            from ._fetch import mismatch

            manifest = self.client.manifest(found.artifact.id, tuning_key=found.tuning_key)
            if mismatch(manifest.manifest, build) is None:
                return manifest, found.tuning_key
        got = self._find_build(p, build)
        return got if isinstance(got, str) else (got[0], None)

    def _find_build(self, p: Any, build: Build) -> tuple[Any, None] | str:
        from ._client import NotFoundError

        try:
            manifest = self.client.manifest(build.artifact_key(self.server_version()))
        except NotFoundError:
            if not self.compile_missing:
                return f"not built for {self.target} by the server's compiler ({self.server_version()[:12]})"
            self.on_step(f"{p.entry.name}: compiling on the server")
            public = self.client.compile(build.compile_body(p.source, p.entry.name, p.source_kind))
            manifest = self.client.manifest(public.id)
        check_build(manifest.manifest, build)
        return manifest, None

    def pull(self, planned: list[Any]) -> PullReport:
        jobs: list[tuple[Any, Any]] = []
        queued: dict[str, Any] = {}  # one job per tuning key
        launches: dict[str, dict] = {}  # a tuning key's launch description, from any entry that has one
        for p in planned:
            if p.tuning is not None and p.launch is not None:
                launches.setdefault(json.dumps(p.tuning, sort_keys=True), p.launch)
        for p in planned:
            self.on_step(f"{p.entry.name}: looking up")
            found = self._find(p)
            if not isinstance(found, str):
                self._keep(p, *found)
                continue
            if p.tuning is not None and self.compile_missing and found.startswith("no tuning result"):
                tk = json.dumps(p.tuning, sort_keys=True)
                if tk not in launches:
                    found += " (the record has no launch description to tune it from)"
                else:
                    if tk not in queued:
                        queued[tk] = self._submit(p, launches[tk])
                    jobs.append((p, queued[tk]))
                    continue
            self.report.missing.append(Missing(p.entry.name, p.entry.file, found))
        for p, job in self._follow(jobs):
            if job.state != "done":
                why = f"tune job {job.id} {job.state}" + (f": {job.error}" if job.error else "")
                self.report.missing.append(Missing(p.entry.name, p.entry.file, why))
                continue
            found = self._find(p)
            if isinstance(found, str):
                self.report.missing.append(Missing(p.entry.name, p.entry.file, f"after tune job {job.id}: {found}"))
            else:
                self._keep(p, *found)
        return self.report

    def _submit(self, p: Any, launch: dict | None = None) -> Any:
        from tilec.wire import TuneJobCreate

        from ._fetch import kernel_input

        tuned = set(p.build.config.get("kwargs") or {})
        body = TuneJobCreate(**kernel_input(p.source, p.source_kind), name=p.entry.name, signature=p.build.signature,
                             constexprs={k: v for k, v in p.build.constexprs.items() if k not in tuned},
                             launch=launch or p.launch, target=self.target)  # fmt: skip
        self.on_step(f"{p.entry.name}: queueing a tune job")
        job = self.client.submit_tune(body)
        self.on_job(job)
        return job

    def _keep(self, p: Any, manifest: Any, tuning_key: str | None) -> None:
        got = self._fetched(p, manifest)
        body = got.manifest.manifest
        from ._cache import _is_sha

        named = [body.artifact_id] + ([tuning_key] if tuning_key is not None else [])
        if not all(_is_sha(n) for n in named):  # they name a file: checked before a path is made of them
            raise VerificationError(f"artifact id {body.artifact_id[:80]!r} or tuning key is not a key")
        text = got.manifest.model_dump_json().encode()
        _write_if_changed(self.out / "manifests" / f"{body.sha256}.json", text)
        _write_if_changed(self.out / "manifests" / f"{'.'.join(named)}.json", text)
        entry = {"name": p.entry.name, "file": p.entry.file, "kind": p.kind, "kernel_key": body.kernel_key,
                 "key": (p.tuning or {}).get("key", ""), "config": body.config, "spec": body.spec,
                 "dtypes": (p.tuning or {}).get("dtypes") or _dtypes_of(p), "sha256": body.sha256,
                 "artifact_id": body.artifact_id, "target": body.target, "params": p.params,
                 "key_names": p.key_names, "variant": p.variant}  # fmt: skip
        if p.tuning is not None:
            entry["tuning"] = p.tuning
            entry["pinned"] = p.pinned
        if tuning_key is not None:
            entry["tuning_key"] = tuning_key
        self.report.entries.append(entry)


def _hints_text(hints: dict[str, dict]) -> str:
    return "{" + ", ".join(f"{n}: " + ",".join(f"{k}={v}" for k, v in h.items()) for n, h in sorted(hints.items())) + "}"


def _untuned(constexprs: dict[str, Any], config: dict) -> dict[str, Any]:
    """The recorded constexprs less those the config sets (the launch's config may differ from the server's)."""
    return {k: v for k, v in constexprs.items() if k not in (config.get("kwargs") or {})}


def _dtypes_of(p: Any) -> str:
    from tilec.compiler.tune.keys import dtypes_string

    return dtypes_string(p.build.signature, [q["name"] for q in p.params])

"""The work behind the routes: registering kernels and compiling them through the pool, with the
database as the cache. Routes stay thin; this module turns pool failures into ApiErrors.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy.orm import Session

from tilec.compiler.artifact import CompileOptions, artifact_key, compiler_version, parse_target
from tilec.compiler.frontend import FRONTEND_VERSION, Budgets
from tilec.compiler.frontend.reader import byte_location
from tilec.compiler.request import CompileRequest
from tilec.compiler.tune import space
from tilec.wire import ArtifactPublic, CompileCreate, ConfigSpec, ConstValue, Emit, KernelCreate, KernelPublic

from . import errors as E
from .db import crud
from .db.artifacts import TEXT_FORMS, artifact_values, sha256, store_build
from .db.models import Artifact, Kernel
from .metrics import Metrics
from .pool import TaskFailed
from .state import AppState

log = logging.getLogger("tilec.artifacts")

KERNEL_NAME_MAX = 200  # the String(200) of kernels.name and artifacts.kernel_name
BINARY_FORM = {"cuda": "cubin", "cpu": "object"}
FORMS = ("cubin", "object", "ptx", "llir", "tir")
FORM_COLUMN = {"cubin": "binary", "object": "binary", "ptx": "ptx", "llir": "llir", "tir": "tir"}

# What reading back a stored row raises when the row is not what the service wrote: JSON that does not
# parse, text that is not UTF-8 (SQLite; see db.engine) and a value that does not validate are
# ValueErrors; a JSON value of the wrong shape fails with the others where code indexes into it. Caught
# only around the reads and decodes of stored rows, which then count as misses (tilec_corrupt_rows).
UNREADABLE = (ValueError, TypeError, LookupError, AttributeError)
UNSET = "unset"


def forms_intact(row: Artifact) -> bool:
    """Whether the binary and every text form still match their own stored sha256."""
    if sha256(row.binary) != row.sha256:
        return False
    return all(sha256(getattr(row, form).encode()) == getattr(row, f"{form}_sha256") for form in TEXT_FORMS)


def unreadable(metrics: Metrics, table: str) -> None:
    metrics.corrupt_rows.labels(table).inc()


# stored builds: what a rebuild and the trial-artifact check read back from a row


class _StoredSpec(BaseModel):
    """The spec column as _build reads it (extra keys are kept for later versions, never needed)."""

    signature: dict[str, str]
    constexprs: dict[str, ConstValue]
    hints: dict[str, dict[str, int | bool]]
    emit: Emit
    model_config = ConfigDict(extra="allow", strict=True)


def stored_spec(value: Any) -> dict[str, Any]:
    """A stored spec, checked to hold what a rebuild reads; ValueError otherwise."""
    _StoredSpec.model_validate(value)
    return value


def stored_config(value: Any) -> dict[str, Any]:
    """A stored config in its normalised form (as normalize_config wrote it); ValueError otherwise."""
    config = normalize_config(ConfigSpec.model_validate(value, strict=True))
    if config != value:
        raise ValueError(f"a stored config is not in its normalised form: {value!r}")
    return config


def _param(value: Any) -> str:
    return json.dumps(value)  # 64, 64.0 and true are three different builds


def config_mismatch(
    config: dict[str, Any], built: dict[str, Any], constexprs: dict[str, Any]
) -> tuple[str, str, str] | None:
    """The first parameter in which a trial's normalised config and an artifact's build differ, as
    (name, built, wanted), else None. A constexpr bound at compile time counts as the config's
    parameter; a parameter the artifact was tuned with must be in the trial's config."""
    bound = {**constexprs, **built["kwargs"]}
    for name in sorted({*config["kwargs"], *built["kwargs"]}):
        have = _param(bound[name]) if name in bound else UNSET
        want = _param(config["kwargs"][name]) if name in config["kwargs"] else UNSET
        if have != want:
            return name, have, want
    for name in ("num_warps", "num_stages"):
        if built[name] != config[name]:
            return name, str(built[name]), str(config[name])
    return None


def link_mismatch(*, kernel_key: str, target: str, config: dict[str, Any], build: Any) -> tuple[str, dict] | None:
    """Why an artifact (its kernel_key, target, spec, config) is not a build of a tuning result's kernel,
    target and config: ("kernel" | "target" | "config", message arguments), or None when it is one.
    Raises an UNREADABLE error when the artifact's stored build cannot be read."""
    if build.kernel_key != kernel_key:
        return "kernel", {"other": build.kernel_key, "kernel": kernel_key}
    if build.target != target:
        return "target", {"other": build.target, "target": target}
    differs = config_mismatch(config, stored_config(build.config), stored_spec(build.spec)["constexprs"])
    if differs is not None:
        param, built, wanted = differs
        return "config", {"param": param, "built": built, "wanted": wanted}
    return None


def normalize_config(config: ConfigSpec) -> dict[str, Any]:
    return space.normalise(config.kwargs, config.num_warps, config.num_stages)  # the tuner's form, exactly


def check_target(target: str) -> str:
    try:
        return parse_target(target)[0]
    except ValueError as exc:
        raise E.ApiError(422, E.BAD_TARGET, str(exc)) from exc


def task_error(exc: TaskFailed, state: AppState) -> E.ApiError:
    s = state.settings
    if exc.kind == "compile":
        info = dict(exc.info)
        return E.ApiError(422, E.COMPILE_ERROR, info.pop("message", "compile error"), **info)
    if exc.kind == "timeout":
        return E.ApiError(422, E.COMPILE_TIMEOUT, E.MSG_COMPILE_TIMEOUT.format(limit=s.compile_timeout_s))
    if exc.kind == "memory":
        return E.ApiError(422, E.COMPILE_MEMORY, E.MSG_COMPILE_MEMORY.format(limit=s.compile_memory_mb))
    if exc.kind == "tool":
        return E.ApiError(422, E.COMPILE_FAILED, f"{exc.info['tool']} failed", **exc.info)
    if exc.kind == "crash":
        return E.ApiError(422, E.COMPILE_FAILED, E.MSG_COMPILE_CRASHED.format(reason=exc.info))
    return E.ApiError(422, E.COMPILE_FAILED, f"internal compiler error: {exc.info}")


async def run_task(state: AppState, task: str, kwargs: dict) -> Any:
    start = time.perf_counter()
    outcome = "ok"
    try:
        return await state.pool.run(task, kwargs)
    except TaskFailed as exc:
        outcome = exc.kind
        raise task_error(exc, state) from exc
    finally:
        state.metrics.compiles.labels(task, outcome).inc()
        state.metrics.compile_seconds.labels(task).observe(time.perf_counter() - start)


# kernels


def check_input(body: KernelCreate | CompileCreate, state: AppState) -> tuple[str, str]:
    given = [k for k in ("source", "ir", "bundle") if getattr(body, k) is not None]
    if isinstance(body, CompileCreate) and body.kernel_key is not None:
        given.append("kernel_key")
    if len(given) != 1:
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_ONE_INPUT)
    kind = given[0]
    if kind == "kernel_key":
        return kind, body.kernel_key or ""
    text = getattr(body, kind)
    limit = state.settings.max_source_bytes
    if kind == "bundle":  # JSON text, read (as data, like source) in a compile child only
        text = json.dumps(text, sort_keys=True, separators=(",", ":"))
        limit *= 4  # several modules: the compiler holds each to the limit, and all four times it
        if len(text.encode()) > limit:
            raise E.ApiError(413, E.SOURCE_TOO_LARGE, E.MSG_SOURCE_TOO_LARGE.format(limit=limit))
    else:
        check_source_size(text, limit)
    return kind, text


def check_source_size(text: str, limit: int) -> None:
    """A 413 for source over the limit, with the line and column where the limit ends (counted, not parsed)."""
    if len(text.encode()) > limit:
        line, col = byte_location(text, limit)
        raise E.ApiError(413, E.SOURCE_TOO_LARGE, E.MSG_SOURCE_TOO_LARGE.format(limit=limit), line=line, col=col)


def read_kernel(session: Session, metrics: Metrics, *, key: str) -> Kernel | None:
    """A kernel row that reads back as a KernelPublic, else None (an unreadable one is counted)."""
    try:
        row = crud.get_kernel(session, key=key)
        if row is not None:
            kernel_public(row)
        return row
    except UNREADABLE:
        unreadable(metrics, "kernels")
        return None


def kernel_public(row: Kernel, *, created: bool = False) -> KernelPublic:
    info = row.info or {}
    return KernelPublic(
        key=row.key,
        name=row.name,
        kind=row.kind,  # type: ignore[arg-type]
        params=info.get("params", []),
        autotune=info.get("autotune"),
        heuristics=info.get("heuristics", {}),
        ir=row.ir,
        created=created,
    )


def input_sha256(kind: str, text: str, name: str | None) -> str:
    """What finds the kernel row already read from this input. A source's key depends on the frontend
    version, so the version is part of it: a row keyed by an older frontend is never found for new input."""
    if kind == "source":
        return crud.stable_hash({"kind": kind, "name": name, "text": text, "frontend": FRONTEND_VERSION})
    return crud.stable_hash({"kind": kind, "name": name, "text": text})


async def find_kernel(state: AppState, input_sha: str) -> Kernel | None:
    """The kernel row already read from exactly this input, if any."""

    def find(session: Session) -> Kernel | None:
        try:
            row = crud.find_kernel_by_input(session, input_sha256=input_sha)
            if row is not None:
                kernel_public(row)
            return row
        except UNREADABLE:  # a miss: the input is read again and the row overwritten in store()
            unreadable(state.metrics, "kernels")
            return None

    return await state.read(find)


async def register_kernel(
    state: AppState, *, kind: str, text: str, name: str | None, signature: dict | None, token_id: int | None
) -> tuple[Kernel, bool]:
    """The kernel row for this input: found by the hash of what was sent, or read in a child."""
    input_sha = input_sha256(kind, text, name)
    found = await find_kernel(state, input_sha)
    if found is not None and (signature is None or found.ir is not None):
        state.metrics.cache_hits.labels("kernel").inc()
        return found, False
    state.metrics.cache_misses.labels("kernel").inc()
    kwargs = {"kind": kind, "text": text, "name": name, "budgets": state.budgets(), "signature": signature}
    flight = crud.stable_hash({"input": input_sha, "signature": signature})
    async with state.compiles.hold(token_id):
        info, _ = await state.pool.shared("analyze:" + flight, lambda: run_task(state, "analyze", kwargs))
    return await save_kernel(state, kind=kind, text=text, input_sha=input_sha, info=info, token_id=token_id)


async def save_kernel(
    state: AppState, *, kind: str, text: str, input_sha: str, info: dict, token_id: int | None
) -> tuple[Kernel, bool]:
    """Store a kernel as a compile child described it (refused when it declares too many configs, or
    its name is longer than the column holds: the name comes from the source's `def` line)."""
    if len(info["name"]) > KERNEL_NAME_MAX:
        raise E.ApiError(422, E.INVALID_REQUEST, E.MSG_KERNEL_NAME_TOO_LONG.format(limit=KERNEL_NAME_MAX))
    configs = len((info.get("autotune") or {}).get("configs") or [])
    if configs > state.settings.max_configs:
        limit = state.settings.max_configs
        raise E.ApiError(422, E.TOO_MANY_CONFIGS, E.MSG_TOO_MANY_CONFIGS.format(n=configs, limit=limit))
    values = {
        "key": info["key"],
        "name": info["name"],
        "kind": kind,
        "source": text if kind in ("source", "bundle") else None,
        "ir": info.get("ir"),
        "input_sha256": input_sha,
        "info": {k: info.get(k) for k in ("params", "autotune", "heuristics", "inductor") if info.get(k) is not None},
        "submitted_by": token_id,
    }

    def store(session: Session) -> tuple[Kernel, bool]:
        created = crud.add_kernel(session, values=values)
        row = read_kernel(session, state.metrics, key=values["key"])
        if row is None:
            row = crud.replace_kernel(session, values=values)
        if row.ir is None and values["ir"] is not None:
            row.ir = values["ir"]
        return row, created

    return await state.write(store)


# artifacts


def artifact_public(row: Artifact, *, cached: bool) -> ArtifactPublic:
    base = f"/v1/artifacts/{row.key}"
    kind = parse_target(row.target)[0]
    links = {"self": base}
    if row.size:
        links[BINARY_FORM[kind]] = f"{base}/{BINARY_FORM[kind]}"
    return ArtifactPublic(
        id=row.key,
        kernel_key=row.kernel_key,
        kernel_name=row.kernel_name,
        target=row.target,
        emit=row.emit,
        compiler_version=row.compiler_version,
        sha256=row.sha256,
        size=row.size,
        metadata=row.meta or {},
        config=row.config or {},
        links=links,
        cached=cached,
    )


def _text_links(public: ArtifactPublic, forms: dict[str, str]) -> ArtifactPublic:
    for form, text in forms.items():
        if text:
            public.links[form] = f"{public.links['self']}/{form}"
    return public


async def compile_request(state: AppState, body: CompileCreate, token_id: int | None) -> ArtifactPublic:
    target_kind = check_target(body.target)
    emit = body.emit or BINARY_FORM[target_kind]
    if emit in ("cubin", "ptx") and target_kind != "cuda" or emit == "object" and target_kind != "cpu":
        raise E.ApiError(422, E.BAD_TARGET, f"target {body.target} cannot emit {emit}")
    kind, text = check_input(body, state)
    if kind == "kernel_key":
        kernel = await state.read(lambda s: read_kernel(s, state.metrics, key=text))
        if kernel is None:
            raise E.ApiError(404, E.NOT_FOUND, E.MSG_KERNEL_NOT_FOUND.format(key=text), missing="kernel")
    config = normalize_config(body.config)
    spec = {"signature": body.signature, "constexprs": body.constexprs, "hints": body.hints, "emit": emit}
    if kind != "kernel_key":
        input_sha = input_sha256(kind, text, body.name)
        kernel = await find_kernel(state, input_sha)
        if kernel is None:  # a new input: one child reads it once, describes the kernel and compiles it
            state.metrics.cache_misses.labels("kernel").inc()
            request = build_request(state, kind=kind, text=text, name=body.name, spec=spec, config=config, target=body.target)
            flight = crud.stable_hash({"input": input_sha, "spec": spec, "config": config, "target": body.target})
            async with state.compiles.hold(token_id):
                public, joined = await state.pool.shared(
                    "compile-input:" + flight,
                    lambda: _build_new(state, request=request, input_sha=input_sha, spec=spec, config=config,
                                       token_id=token_id),
                )  # fmt: skip
            if joined:
                state.metrics.compiles_shared.inc()
            return public.model_copy(deep=True)
        state.metrics.cache_hits.labels("kernel").inc()
    key = artifact_key(kernel.key, spec, config, body.target, compiler_version())
    return await compile_artifact(
        state, kernel=kernel, key=key, spec=spec, config=config, target=body.target, token_id=token_id
    )


async def compile_artifact(
    state: AppState, *, kernel: Kernel, key: str, spec: dict, config: dict, target: str, token_id: int | None = None
) -> ArtifactPublic:
    """The artifact for this key: from the database if every stored form still matches its sha256 and
    the row reads back as this build, else built (and the row overwritten)."""

    def cached(session: Session, *, count: bool = True) -> tuple[ArtifactPublic, dict[str, str]] | None:
        try:
            row = crud.get_artifact(session, key=key)
            if row is None:
                return None
            if not forms_intact(row):
                if count:  # once per request, not again by its flight
                    state.metrics.sha_mismatches.inc()
                return None
            stored = (row.kernel_key, row.target, stored_spec(row.spec), stored_config(row.config))
            if stored != (kernel.key, target, spec, config):
                raise ValueError(f"artifact {key} is stored as another build")
            return artifact_public(row, cached=True), {"ptx": row.ptx, "llir": row.llir, "tir": row.tir}
        except UNREADABLE:
            unreadable(state.metrics, "artifacts")
            return None

    hit = await state.read(cached)
    if hit is not None:
        state.metrics.cache_hits.labels("artifact").inc()
        return _text_links(*hit)
    state.metrics.cache_misses.labels("artifact").inc()

    async def once() -> ArtifactPublic:
        # the flight reads again first: a flight of this key that ended between the read above and here has
        # stored the artifact (single flight only joins compiles still running)
        again = await state.read(lambda s: cached(s, count=False))
        if again is not None:
            return _text_links(*again)
        return await _build(state, kernel=kernel, key=key, spec=spec, config=config, target=target)

    async with state.compiles.hold(token_id):
        public, joined = await state.pool.shared("compile:" + key, once)
    if joined:
        state.metrics.compiles_shared.inc()
    return public.model_copy(deep=True)


def build_request(
    state: AppState, *, kind: str, text: str, name: str | None, spec: dict, config: dict, target: str
) -> CompileRequest:
    return CompileRequest(
        text=text,
        kind=kind,  # type: ignore[arg-type]
        name=name,
        signature=spec["signature"],
        constexprs={**spec["constexprs"], **config["kwargs"]},
        hints=spec["hints"],
        options=CompileOptions(target=target, num_warps=config["num_warps"], num_stages=config["num_stages"]),
        emit=spec["emit"],
        budgets=Budgets(**state.budgets()),
        pass_dumps=True,  # kept with the build: the web page shows the IR after each pass
    )


async def _build(state: AppState, *, kernel: Kernel, key: str, spec: dict, config: dict, target: str) -> ArtifactPublic:
    text = kernel.source if kernel.kind in ("source", "bundle") else kernel.ir
    request = build_request(state, kind=kernel.kind, text=text or "", name=kernel.name, spec=spec, config=config, target=target)
    art = await run_task(state, "compile", {"request": request})
    return await _store_artifact(state, kernel_key=kernel.key, key=key, spec=spec, config=config, target=target, art=art)


async def _build_new(
    state: AppState, *, request: CompileRequest, input_sha: str, spec: dict, config: dict, token_id: int | None
) -> ArtifactPublic:
    target = request.options.target
    known = await find_kernel(state, input_sha)  # stored by a flight of this input that ended since the miss
    if known is not None:
        key = artifact_key(known.key, spec, config, target, compiler_version())
        return await compile_artifact(state, kernel=known, key=key, spec=spec, config=config, target=target)
    art = await run_task(state, "compile", {"request": request, "describe": True})
    kernel, _ = await save_kernel(
        state, kind=request.kind, text=request.text, input_sha=input_sha, info=art["kernel"], token_id=token_id
    )
    key = artifact_key(kernel.key, spec, config, target, compiler_version())
    return await _store_artifact(state, kernel_key=kernel.key, key=key, spec=spec, config=config, target=target, art=art)


async def _store_artifact(
    state: AppState, *, kernel_key: str, key: str, spec: dict, config: dict, target: str, art: dict
) -> ArtifactPublic:
    signer = state.signing_key()
    values = artifact_values(kernel_key=kernel_key, key=key, spec=spec, config=config, target=target, art=art,
                             signer=signer)  # fmt: skip
    outcome = await state.write(lambda s: store_build(s, values=values, signer=signer))
    for form in FORMS:
        state.blobs.drop((key, form))
    if outcome == "conflict":  # the stored build stands: answer with it
        state.metrics.artifact_conflicts.inc()
        row = await state.read(lambda s: crud.get_artifact(s, key=key))
        if row is not None:
            return _text_links(artifact_public(row, cached=True), {"ptx": row.ptx, "llir": row.llir, "tir": row.tir})
    if outcome == "replaced":
        state.metrics.signature_mismatches.inc()
    row = Artifact(**values)
    return _text_links(artifact_public(row, cached=False), {f: values[f] for f in ("ptx", "llir", "tir")})


async def rebuild(state: AppState, key: str, token: Any) -> bool:
    """Rebuild an artifact whose stored form no longer matches its sha256, or whose row cannot be read
    back; False if it is gone or cannot be rebuilt (its kernel, target, spec or config unreadable). A
    rebuild is a compile: the token (deps.TokenInfo) needs the submit scope, else a 403."""
    if "submit" not in token.scopes:
        what = E.MSG_MUST_REBUILD.format(id=key)
        raise E.ApiError(403, E.FORBIDDEN, E.MSG_COMPILE_NEEDS_SUBMIT.format(what=what))

    def load(session: Session) -> tuple[Kernel, dict, dict, str] | None:
        try:
            row = crud.get_artifact_build(session, key=key)
            if row is None:
                return None
            parse_target(row.target)
            build = (stored_spec(row.spec), stored_config(row.config), row.target)
        except UNREADABLE:
            unreadable(state.metrics, "artifacts")
            return None
        kernel = read_kernel(session, state.metrics, key=row.kernel_key)
        return None if kernel is None else (kernel, *build)

    found = await state.read(load)
    if found is None:
        return False
    kernel, spec, config, target = found
    async with state.compiles.hold(token.id):
        await state.pool.shared(
            "compile:" + key, lambda: _build(state, kernel=kernel, key=key, spec=spec, config=config, target=target)
        )
    return True

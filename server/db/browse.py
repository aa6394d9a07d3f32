"""The reads behind the /ui pages: pages of kernels, tuning results and tune jobs with search and filters,
and the detail of one kernel, artifact or tuning result.

Each page is one indexed query over Core columns (no ORM objects), `limit + 1` rows so the caller knows
whether there is a next page without a COUNT(*). JSON columns are read as their stored text and parsed
by the caller, so one value that does not parse costs its own row, not the page. The indexes these
queries walk are in migration 0005 (and declared on the models).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, Select, Text, and_, cast, func, select

from .models import Artifact, Kernel, Token, Trial, TuneJob, TuningResult

kernels, artifacts, tokens = Kernel.__table__, Artifact.__table__, Token.__table__
results, trials, jobs = TuningResult.__table__, Trial.__table__, TuneJob.__table__
DETAIL_ROWS = 500  # artifacts and tuning results listed on one kernel's page


# what reading a stored row back raises when it is not what the service wrote (service.UNREADABLE)
UNREADABLE = (ValueError, TypeError, LookupError, AttributeError)


def raw(column: Any) -> ColumnElement:
    """A JSON column as its stored text (parsed by the caller, row by row; a cast, because psycopg
    would hand a json column back parsed)."""
    return cast(column, Text).label(column.name)


def _page(stmt: Select, *, limit: int, offset: int) -> Select:
    return stmt.limit(limit + 1).offset(offset)


def fetch(conn: Connection, stmt: Select, key: Any) -> tuple[list[Row], int]:
    """The rows of `stmt`, and how many were left out: when one row cannot be read back (a text that is
    not UTF-8 breaks the whole fetch on SQLite), the keys are read first and then the rows one by one."""
    try:
        return list(conn.execute(stmt).all()), 0
    except UNREADABLE:
        keys = conn.execute(stmt.with_only_columns(key, maintain_column_froms=True)).scalars().all()
    rows, dropped = [], 0
    for k in keys:
        try:
            row = conn.execute(stmt.where(key == k).limit(None).offset(None)).first()
        except UNREADABLE:
            dropped += 1
            continue
        if row is not None:
            rows.append(row)
    return rows, dropped


def _name_like(column: Any, name: str) -> ColumnElement:
    return column.icontains(name, autoescape=True)


# kernels


def _submitter() -> list[ColumnElement]:
    return [kernels.c.submitted_by, tokens.c.description.label("submitter")]


def kernels_page(
    conn: Connection, *, name: str | None, target: str | None, limit: int, offset: int
) -> tuple[list[Row], int]:
    """(key, name, kind, created_at, submitted_by, submitter) of a page of kernels, newest first: the
    page's keys from the (created_at, key, name) index alone, then those rows."""
    where = []
    if name:
        where.append(_name_like(kernels.c.name, name))
    if target:
        built = select(artifacts.c.kernel_key).where(
            artifacts.c.target == target, artifacts.c.kernel_key == kernels.c.key
        )
        where.append(built.exists())  # the index's own column: SQLite reads no artifact row
    order = (kernels.c.created_at.desc(), kernels.c.key.desc())
    page = _page(select(kernels.c.key).where(*where).order_by(*order), limit=limit, offset=offset)
    stmt = select(kernels.c.key, kernels.c.name, kernels.c.kind, kernels.c.created_at, *_submitter())
    stmt = stmt.select_from(kernels.outerjoin(tokens, tokens.c.id == kernels.c.submitted_by))
    return fetch(conn, stmt.where(kernels.c.key.in_(page)).order_by(*order), kernels.c.key)


def artifact_counts(conn: Connection, *, kernel_keys: Iterable[str]) -> dict[str, dict[str, int]]:
    """kernel key -> target -> number of artifacts, for the kernels of a page (the (kernel_key, target) index)."""
    keys = list(kernel_keys)
    if not keys:
        return {}
    stmt = (
        select(artifacts.c.kernel_key, artifacts.c.target, func.count())
        .where(artifacts.c.kernel_key.in_(keys))
        .group_by(artifacts.c.kernel_key, artifacts.c.target)
    )
    out: dict[str, dict[str, int]] = {}
    for key, target, n in conn.execute(stmt).all():
        out.setdefault(key, {})[target] = n
    return out


def kernel_detail(conn: Connection, *, key: str) -> Row | None:
    stmt = select(
        kernels.c.key, kernels.c.name, kernels.c.kind, kernels.c.created_at, kernels.c.source, kernels.c.ir,
        raw(kernels.c.info), *_submitter(),
    ).select_from(kernels.outerjoin(tokens, tokens.c.id == kernels.c.submitted_by))  # fmt: skip
    return conn.execute(stmt.where(kernels.c.key == key)).first()


ARTIFACT_ROW = (
    "key",
    "kernel_key",
    "kernel_name",
    "target",
    "emit",
    "compiler_version",
    "size",
    "sha256",
    "created_at",
)


def kernel_artifacts(conn: Connection, *, key: str, limit: int = DETAIL_ROWS) -> tuple[list[Row], int]:
    """A kernel's artifacts (metadata only), by target, newest first."""
    columns = [artifacts.c[c] for c in ARTIFACT_ROW]
    stmt = select(*columns, raw(artifacts.c.config), raw(artifacts.c.meta)).where(
        artifacts.c.kernel_key == key
    )
    stmt = stmt.order_by(artifacts.c.target, artifacts.c.created_at.desc(), artifacts.c.key)
    return fetch(conn, stmt.limit(limit + 1), artifacts.c.key)


def ir_build(conn: Connection, *, key: str) -> Row | None:
    """The build of a kernel whose specialisation its page shows the tile IR of: the newest one whose compile
    kept its per-pass dumps (the first is the frontend's tile IR), else the newest one. (key, target, spec and
    config as text, pass_dumps)."""
    stmt = select(artifacts.c.key, artifacts.c.target, raw(artifacts.c.spec), raw(artifacts.c.config),
                  artifacts.c.pass_dumps)  # fmt: skip
    stmt = stmt.where(artifacts.c.kernel_key == key)
    order = (artifacts.c.pass_dumps.is_(None), artifacts.c.created_at.desc(), artifacts.c.key)
    return conn.execute(stmt.order_by(*order).limit(1)).first()


def artifact_detail(conn: Connection, *, key: str) -> Row | None:
    """An artifact's metadata and spec, and which text forms it holds (without reading them out)."""
    columns = [artifacts.c[c] for c in ARTIFACT_ROW]
    has = [(func.length(artifacts.c[f]) > 0).label("has_" + f) for f in ("ptx", "llir", "tir")]
    stmt = select(*columns, raw(artifacts.c.config), raw(artifacts.c.meta), raw(artifacts.c.spec), *has)
    return conn.execute(stmt.where(artifacts.c.key == key)).first()


# tuning results

RESULT_ROW = (
    "tuning_key",
    "kernel_key",
    "key_values",
    "dtypes",
    "target",
    "best_time_ms",
    "artifact_key",
    "updated_at",
)


def _results_select() -> Select:
    count = select(func.count()).where(trials.c.tuning_key == results.c.tuning_key).scalar_subquery()
    columns = [results.c[c] for c in RESULT_ROW]
    return select(
        *columns, raw(results.c.best_config), raw(results.c.decision), kernels.c.name.label("kernel_name"), count.label("trials")
    ).select_from(results.join(kernels, kernels.c.key == results.c.kernel_key))


def _named(column: Any, name: str) -> ColumnElement:
    """A kernel key column whose kernel's name holds `name` (the names are read once, from their index)."""
    return column.in_(select(kernels.c.key).where(_name_like(kernels.c.name, name)))


def results_page(
    conn: Connection, *, name: str | None, target: str | None, gpu: str | None, limit: int, offset: int
) -> tuple[list[Row], int]:
    """A page of tuning results (with their kernel's name and trial count), most recently improved first:
    the page's keys from the (updated_at, tuning_key, kernel_key) index alone, then those rows."""
    where = []
    if name:
        where.append(_named(results.c.kernel_key, name))
    if target:
        where.append(results.c.target == target)
    if gpu:
        ran = select(trials.c.tuning_key).where(
            trials.c.gpu_model == gpu, trials.c.tuning_key == results.c.tuning_key
        )
        where.append(ran.exists())
    order = (results.c.updated_at.desc(), results.c.tuning_key.desc())
    page = _page(select(results.c.tuning_key).where(*where).order_by(*order), limit=limit, offset=offset)
    stmt = _results_select().where(results.c.tuning_key.in_(page)).order_by(*order)
    return fetch(conn, stmt, results.c.tuning_key)


def kernel_results(conn: Connection, *, key: str, limit: int = DETAIL_ROWS) -> tuple[list[Row], int]:
    stmt = _results_select().where(results.c.kernel_key == key)
    stmt = stmt.order_by(results.c.updated_at.desc(), results.c.tuning_key.desc()).limit(limit + 1)
    return fetch(conn, stmt, results.c.tuning_key)


def gpu_models(conn: Connection, *, tuning_keys: Iterable[str]) -> dict[str, list[str]]:
    """tuning key -> the GPU models its trials ran on (None: a cpu trial, left out)."""
    keys = list(tuning_keys)
    if not keys:
        return {}
    out: dict[str, set[str]] = {}
    for tkey, model in _models(conn, keys):
        out.setdefault(tkey, set()).add(model)
    return {k: sorted(v) for k, v in out.items()}


def _models(conn: Connection, keys: list[str]) -> list[Row]:
    """(tuning key, GPU model) of these keys' trials; a key whose models cannot be read back has none."""
    stmt = select(trials.c.tuning_key, trials.c.gpu_model).where(trials.c.gpu_model.is_not(None)).distinct()
    try:
        return list(conn.execute(stmt.where(trials.c.tuning_key.in_(keys))).all())
    except UNREADABLE:
        pass
    rows = []
    for key in keys:
        try:
            rows.extend(conn.execute(stmt.where(trials.c.tuning_key == key)).all())
        except UNREADABLE:
            continue
    return rows


def result_detail(conn: Connection, *, tkey: str) -> Row | None:
    return conn.execute(_results_select().where(results.c.tuning_key == tkey)).first()


TRIAL_ROW = ("id", "status", "time_ms", "lo_ms", "hi_ms", "reps", "artifact_key", "gpu_model", "driver_version",
             "sm_clock_mhz", "mem_clock_mhz", "created_at")  # fmt: skip


def result_trials(conn: Connection, *, tkey: str) -> tuple[list[Row], int]:
    """Every trial of a tuning key, fastest first (a key holds at most max_trials of them)."""
    stmt = select(*(trials.c[c] for c in TRIAL_ROW), raw(trials.c.config)).where(trials.c.tuning_key == tkey)
    return fetch(conn, stmt.order_by(trials.c.time_ms, trials.c.id), trials.c.id)


def last_job_trials(conn: Connection, *, tkey: str) -> Row | None:
    """(id, trials as text) of the newest tune job of a tuning key: the outcome of every config it
    tried, failed and pruned ones included (the trials table keeps only the timed ones)."""
    stmt = select(jobs.c.id, raw(jobs.c.trials)).where(jobs.c.tuning_key == tkey).order_by(jobs.c.id.desc())
    return conn.execute(stmt.limit(1)).first()


# tune jobs

JOB_ROW = ("id", "state", "kernel_key", "tuning_key", "key_values", "dtypes", "target", "strategy", "trials_done", "trials_planned",
           "worker", "deliveries", "error", "best_time_ms", "submitted_by", "created_at", "started_at", "finished_at")  # fmt: skip


def jobs_page(
    conn: Connection, *, state: str | None, name: str | None, target: str | None, limit: int, offset: int
) -> tuple[list[Row], int]:
    """A page of tune jobs (without their request and trials), newest first."""
    stmt = select(*(jobs.c[c] for c in JOB_ROW), raw(jobs.c.best_config), kernels.c.name.label("kernel_name"))
    stmt = stmt.select_from(jobs.join(kernels, kernels.c.key == jobs.c.kernel_key))
    where = []
    if state:
        where.append(jobs.c.state == state)
    if target:
        where.append(jobs.c.target == target)
    if name:
        where.append(_named(jobs.c.kernel_key, name))
    if where:
        stmt = stmt.where(and_(*where))
    return fetch(conn, _page(stmt.order_by(jobs.c.id.desc()), limit=limit, offset=offset), jobs.c.id)


# the choices the filters offer


def distinct(conn: Connection, column: Any) -> list[Any]:
    """The distinct non-NULL values of an indexed column, one index seek each (a loose index scan as a
    recursive query): a handful of seeks where DISTINCT would read the whole index."""
    first = select(func.min(column).label("v")).cte("seen", recursive=True)
    after = select(func.min(column)).where(column > first.c.v).scalar_subquery()
    seen = first.union_all(select(after).where(first.c.v.is_not(None)))
    return list(conn.execute(select(seen.c.v).where(seen.c.v.is_not(None))).scalars().all())


def targets(conn: Connection) -> list[str]:
    """The targets of the artifacts and tuning results."""
    return sorted({*distinct(conn, artifacts.c.target), *distinct(conn, results.c.target)})


def all_gpu_models(conn: Connection) -> list[str]:
    return distinct(conn, trials.c.gpu_model)


def job_detail(conn: Connection, *, job_id: int) -> Row | None:
    """One tune job, as a row of jobs_page, with its trials so far (as text)."""
    stmt = select(*(jobs.c[c] for c in JOB_ROW), raw(jobs.c.best_config), raw(jobs.c.trials),
                  kernels.c.name.label("kernel_name"))  # fmt: skip
    stmt = stmt.select_from(jobs.join(kernels, kernels.c.key == jobs.c.kernel_key))
    return conn.execute(stmt.where(jobs.c.id == job_id)).first()


def last_heartbeats(conn: Connection, *, targets: Iterable[str]) -> dict[str, Any]:
    """target -> the newest heartbeat a worker wrote on any job of that target (the lease a worker renews
    while it runs one, kept on the row after): when a worker of the target was last seen at work."""
    wanted = sorted(set(targets))
    if not wanted:
        return {}
    stmt = select(jobs.c.target, func.max(jobs.c.heartbeat_at)).where(jobs.c.target.in_(wanted))
    return {t: beat for t, beat in conn.execute(stmt.group_by(jobs.c.target)).all() if beat is not None}

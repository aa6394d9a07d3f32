"""Cache reads shared by the routes and the fast path (server/fastpath.py): the serialised lookup answer
for a tuning key, and one verified read of an artifact form. Both keep what they read in the app's
in-process caches; neither validates its parameters (the routes own validation, auth and errors).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row

from tilec.wire import LookupPublic

from .db import crud
from .metrics import Metrics
from .service import (
    BINARY_FORM,
    FORM_COLUMN,
    UNREADABLE,
    artifact_public,
    link_mismatch,
    sha256,
    stored_config,
    unreadable,
)
from .state import AppState

MISSED = "tilec.lookup_missed"  # scope key: the tuning key the fast path found no result for
FORM_READ = "tilec.form_read"  # scope key: ((artifact id, form), what the fast path's read_form found)


def lookup_public(metrics: Metrics, result: Row, artifact: Any) -> LookupPublic:
    """From crud.lookup's answer: the result row and its artifact's metadata (or None). Raises an
    UNREADABLE error when the result row cannot be read back; an artifact that cannot be, or that is not
    a build of the result's kernel, target and config, is left out (counted), the config still served."""
    config = stored_config(result.best_config)
    identity = crud.tuning_key(kernel_key=result.kernel_key, key=result.key_values, dtypes=result.dtypes,
                               target=result.target)
    if identity != result.tuning_key:
        raise ValueError(f"tuning result {result.tuning_key} is stored under another key")
    public = LookupPublic(
        tuning_key=result.tuning_key,
        kernel_key=result.kernel_key,
        key=result.key_values,
        dtypes=result.dtypes,
        target=result.target,
        config=config,
        time_ms=result.best_time_ms,
        trials=result.trials,
        decision=result.decision if isinstance(result.decision, dict) else None,
    )
    rule = public.decision.get("rule") if public.decision else None
    public.source = rule if rule in ("tie", "pinned") else "measured"
    if artifact is None:
        return public
    try:
        served = artifact_public(artifact, cached=True)
        mismatch = link_mismatch(kernel_key=result.kernel_key, target=result.target, config=config, build=artifact)
    except UNREADABLE:
        unreadable(metrics, "artifacts")
        return public
    if mismatch is not None:  # written before the tuning-results route checked links, or by another writer
        unreadable(metrics, "tuning_results")
        return public
    public.artifact = served
    return public


def _find(conn: Connection, tkey: str, metrics: Metrics) -> bytes | None:
    try:
        found = crud.lookup(conn, tkey=tkey)
        return None if found is None else lookup_public(metrics, *found).model_dump_json().encode()
    except UNREADABLE:  # a miss: a new tuning result for this key replaces the row
        unreadable(metrics, "tuning_results")
        return None


async def answer(state: AppState, tkey: str) -> bytes | None:
    """The serialised answer for a tuning key, from the cache or else one query (then cached); None when
    there is no such result, or its row cannot be read back. Shared by the route and the fast path;
    neither validates the parameters here: a row can only exist for those the tuning-results route accepted."""
    body = state.lookups.get(tkey)
    if body is not None:
        state.metrics.cache_hits.labels("lookup").inc()
        return body
    # a miss queries and caches under the key's lock, which a writer of the key holds until it has dropped the
    # cached answer: an answer read before a commit is never cached after it (the best would go back in time)
    async with state.lookup_lock(tkey):
        body = state.lookups.get(tkey)  # cached by the miss this one waited for
        if body is not None:
            state.metrics.cache_hits.labels("lookup").inc()
            return body
        body = await state.query(lambda c: _find(c, tkey, state.metrics))
        state.metrics.cache_misses.labels("lookup").inc()
        if body is not None:
            state.lookups.put(tkey, body)
    return body


async def read_form(state: AppState, artifact_id: str, form: str) -> tuple[str, bytes, str]:
    """One read of a form, shared with the fast path: ("ok", body, sha256) from the byte cache or one
    query (only when the form matches its own stored sha256; then cached), else ("missing" | "no_form" |
    "mismatch" | "unreadable", b"", "") for the route to act on."""
    cached = state.blobs.get((artifact_id, form))
    if cached is not None:
        state.metrics.cache_hits.labels("download").inc()
        return "ok", *cached
    state.metrics.cache_misses.labels("download").inc()
    status, body, digest = await state.query(lambda c: _read_and_hash(c, artifact_id, form))
    if status == "ok":
        state.blobs.put((artifact_id, form), body, digest)
    return status, body, digest


def _read_and_hash(conn: Connection, artifact_id: str, form: str) -> tuple[str, bytes, str]:
    """In the worker thread: the query and the sha256 of a body that may be megabytes. An empty form is
    "no_form" only once it matches its stored sha256: a text that was emptied is a mismatch."""
    column = FORM_COLUMN[form]
    try:
        found = crud.get_artifact_form(conn, key=artifact_id, column=column)
        if found is None:
            return "missing", b"", ""
        value, stored_sha, target = found
        if column == "binary" and BINARY_FORM[target.split(":")[0]] != form:
            return "no_form", b"", ""
    except UNREADABLE:  # text that is not UTF-8 (SQLite), or a target that is no target
        return "unreadable", b"", ""
    body = value if isinstance(value, bytes) else value.encode()
    digest = sha256(body)
    if digest != stored_sha:
        return "mismatch", b"", ""
    if not body:
        return "no_form", b"", ""
    return "ok", body, digest

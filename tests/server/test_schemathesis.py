"""Property tests against the OpenAPI spec (schemathesis, a bounded number of cases per operation), run
against a real uvicorn on SQLite and on PostgreSQL over one keep-alive connection: no 5xx, no response
that breaks the schema, and no reset connection, whatever the input.

Cases are schemathesis's own (positive and negative), then some of their values are swapped for known
keys (so a request gets past the 404s and reaches the database) and for the inputs that broke the
service before: NUL and lone surrogates in any string or dict key, integers at and past 32 and 64 bits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from schemathesis import checks
from schemathesis.generation import GenerationMode
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from urllib3 import HTTPConnectionPool
from urllib3.connection import HTTPConnection

from tilec.server.db import crud

from .conftest import ADD_IR, Uvicorn

# SQLite here; PostgreSQL in test_schemathesis_pg.py, a file of its own so that the two runs (about 100 s
# each) go to the two test processes of `make test` (pytest-xdist hands out whole files)
pytestmark = pytest.mark.parametrize("migrated_database", ["sqlite"], indirect=True)
EXAMPLES = 10  # per operation and generation mode; three times that for a POST (it writes); 10 since the
# zero-JIT routes (misses, pins, retune, history) and the job page made the API larger: the suite stays under 15 min
EDGE_INTS = [
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    2**64 - 1,
    2**64,
    2**100,
    -(2**100),
]
# a URL cannot carry a lone surrogate (it has no UTF-8 form), so path and query get NUL and controls only
URL_CHARS = st.one_of(st.just("\x00"), st.characters(categories=["Cc"]))
ONE_INPUT = {"/v1/kernels": ["source", "ir"], "/v1/compile": ["kernel_key", "source", "ir"]}
SOFTMAX = (Path(__file__).parent / "data" / "softmax.py").read_text()
FREE_DICTS = {"signature", "constexprs", "hints", "kwargs"}  # dicts whose keys the client picks
BODY_CHARS = st.one_of(
    st.just("\x00"),
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff"]),
    st.characters(categories=["Cs"]),
    st.characters(categories=["Cc"]),
)


def _known(draw: st.DrawFn, value: Any, known: dict[str, list], name: str = "") -> Any:
    """The value with known keys put in for known names, 3 times in 4, at any depth."""
    if name in known and draw(_coin(3)):
        return draw(st.sampled_from(known[name]))
    if isinstance(value, dict):
        return {k: _known(draw, v, known, k if isinstance(k, str) else "") for k, v in value.items()}
    if isinstance(value, list):
        return [_known(draw, v, known) for v in value]
    return value


def _leaves(value: Any, path: tuple = (), name: str = "", free: bool = False) -> list[tuple[tuple, str]]:
    """(path, kind) of what can be made bad: strings, ints, and the keys of dicts whose keys the client picks."""
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            if free and isinstance(key, str):
                found.append(((*path, key), "key"))
            inner_free = key in FREE_DICTS or (free and name == "hints")
            found += _leaves(item, (*path, key), key if isinstance(key, str) else "", inner_free)
        return found
    if isinstance(value, list):
        return [leaf for i, item in enumerate(value) for leaf in _leaves(item, (*path, i))]
    if isinstance(value, str):
        return [(path, "str")]
    if isinstance(value, int) and not isinstance(value, bool):
        return [(path, "int")]
    return []


def _bad_text(draw: st.DrawFn, value: str, chars: st.SearchStrategy[str]) -> str:
    """One character swapped for a bad one (lengths stay valid), or the bad character alone."""
    bad = draw(chars)
    if not value:
        return bad
    i = draw(st.integers(0, len(value) - 1))
    return value[:i] + bad + value[i + 1 :]


def _spoil(draw: st.DrawFn, value: Any, chars: st.SearchStrategy[str]) -> Any:
    """Zero, one or two leaves made bad: one at a time, so that the rest of the request stays good and
    the bad value gets as far as it can (into the database)."""
    leaves = _leaves(value)
    if not leaves:
        return value
    for index in draw(st.lists(st.integers(0, len(leaves) - 1), max_size=2, unique=True)):
        path, kind = leaves[index]
        parent = value
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        if kind == "key":
            parent[_bad_text(draw, last, chars)] = parent.pop(last)
        elif kind == "str":
            parent[last] = _bad_text(draw, parent[last], chars)
        else:
            parent[last] = draw(st.sampled_from(EDGE_INTS)) if draw(_coin(3)) else draw(st.integers())
        leaves = _leaves(value)  # a renamed key moves the paths below it
        if not leaves:
            break
    return value


def _coin(quarters: int) -> st.SearchStrategy[bool]:
    return st.integers(0, 3).map(lambda n: n < quarters)


@st.composite
def _cases(draw: st.DrawFn, operation: schemathesis.APIOperation, known: dict[str, dict[str, Any]]) -> tuple:
    """(case, None) for a negative case, sent as generated; (case, mutated containers) for a positive one.
    Only positive cases are mutated: a known key could make a negative case valid, and schemathesis
    cannot re-label a case holding a lone surrogate, so the mutation travels beside the case."""
    mode = draw(st.sampled_from(list(GenerationMode)))
    case = draw(operation.as_strategy(generation_mode=mode))
    if mode == GenerationMode.NEGATIVE:
        return case, None
    body = json.loads(json.dumps(case.body)) if isinstance(case.body, dict | list) else None
    inputs = ONE_INPUT.get(operation.path, [])
    if (
        isinstance(body, dict) and inputs and draw(_coin(3))
    ):  # get past "give exactly one of kernel_key, source or ir"
        keep = draw(st.sampled_from(inputs))
        body = {k: v for k, v in body.items() if k not in inputs or k == keep}
        if not isinstance(body.get(keep), str):
            body[keep] = draw(st.sampled_from(known["body"][keep]))
    # one container's leaves spoiled at a time; parameter names stay (a renamed one is only absent)
    path = _known(draw, dict(case.path_parameters or {}), known["path"])
    query = _known(draw, dict(case.query or {}), known["query"])
    body = _known(draw, body, known["body"])
    present = [name for name, container in (("path", path), ("query", query), ("body", body)) if container]
    spoil = draw(st.sampled_from(present)) if present else None
    return case, {
        "path": _spoil(draw, path, URL_CHARS) if spoil == "path" else path,
        "query": _spoil(draw, query, URL_CHARS) if spoil == "query" else query,
        "body": _spoil(draw, body, BODY_CHARS) if spoil == "body" and body is not None else body,
    }


def _send(
    case: schemathesis.Case, mutated: dict, base_url: str, headers: dict, session: requests.Session
) -> Any:
    kwargs = case.as_transport_kwargs(base_url=base_url, headers=headers)
    path = case.operation.path.format(**{k: quote(str(v), safe="") for k, v in mutated["path"].items()})
    kwargs["url"] = base_url + path
    kwargs["params"] = mutated["query"]
    if mutated["body"] is not None and "json" in kwargs:
        kwargs["json"] = mutated["body"]  # requests' json.dumps escapes a lone surrogate as \ud800
    return session.request(**kwargs, timeout=60)


def _seed(url: str, database_url: str) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """An admin token (written straight to the database) and a kernel, an artifact and a tuning result."""
    engine = create_engine(database_url)
    with Session(engine) as session, session.begin():
        token = crud.create_token(session, scopes=["admin"])[0]
    engine.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    r = requests.post(f"{url}/v1/compile", json={"ir": ADD_IR}, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    art = r.json()
    trials = [{"config": {}, "time_ms": 1.0, "artifact_id": art["id"]}]  # the config art was built with
    body = {"kernel_key": art["kernel_key"], "target": "cpu", "trials": trials}
    r = requests.post(f"{url}/v1/tuning-results", json=body, headers=headers, timeout=60)
    assert r.status_code == 200, r.text
    tkey = r.json()["tuning_key"]
    kernel = art["kernel_key"]
    known = {
        "path": {
            "key": [kernel],
            "artifact_id": [art["id"]],
            "tuning_key": [tkey],
            "form": ["tir", "object"],
        },
        "query": {"kernel": [kernel], "target": ["cpu"]},
        "body": {
            "kernel_key": [kernel],
            "artifact_id": [art["id"], None],
            "target": ["cpu"],
            "ir": [ADD_IR],
            "source": [SOFTMAX],
        },
    }
    return headers, known


def test_api_keeps_its_contract(database_url: str, uvicorn_server: Callable[..., Uvicorn]) -> None:
    server = uvicorn_server(TILEC_AUTH="true")
    headers, known = _seed(server.url, database_url)
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    session = requests.Session()  # one keep-alive connection for every case
    _CountingConnection.connects = 0
    manager = session.get_adapter(
        server.url
    ).poolmanager  # its dict is urllib3's own, shared: replace, not edit
    manager.pool_classes_by_scheme = {**manager.pool_classes_by_scheme, "http": _CountingPool}
    counts = {"cases": 0, "closed": 0}
    failures: dict[str, str] = {}  # one example per operation and kind of failure
    start = time.monotonic()
    with session:
        # revoking tokens last: a case may well revoke the fuzzer's own
        for operation in sorted(operations, key=lambda op: op.method.upper() == "DELETE"):
            _fuzz(operation, known, server.url, headers, session, counts, failures)
        print(
            f"\nfuzz[{database_url.split(':')[0]}]: {counts['cases']} cases over {len(operations)} operations "
            f"in {time.monotonic() - start:.1f} s, {_CountingConnection.connects} connection(s) opened, {len(failures)} failures"
        )
        print("\n".join(f"  {k}: {v}" for k, v in sorted(counts.items()) if " /" in k), end="")
        print("".join(f"\n  FAILED {key}" for key in failures))
    assert not failures, "\n\n".join([*failures.values(), "server log (tail):\n" + server.log()[-3000:]])


class _CountingConnection(HTTPConnection):
    """Counts TCP connects: urllib3 quietly reconnects a connection the server closed, so a dropped
    keep-alive connection shows only here."""

    connects = 0

    def connect(self) -> None:
        _CountingConnection.connects += 1
        super().connect()


class _CountingPool(HTTPConnectionPool):
    ConnectionCls = _CountingConnection


def _kind(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return ", ".join(sorted({getattr(e, "title", type(e).__name__) for e in exc.exceptions}))
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _fuzz(
    operation: schemathesis.APIOperation,
    known: dict,
    base_url: str,
    headers: dict[str, str],
    session: requests.Session,
    counts: dict[str, int],
    failures: dict[str, str],
) -> None:
    """Every case of the budget is sent (no stop at the first failure, no shrinking against a live
    server); failures are collected, one example of each kind."""
    name = f"{operation.method.upper()} {operation.path}"

    @given(drawn=_cases(operation, known))
    @settings(
        max_examples=2 * EXAMPLES * (3 if operation.method.upper() == "POST" else 1),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
        phases=[Phase.generate],
    )
    def run(drawn: tuple) -> None:
        case, mutated = drawn
        # a negative case whose query holds a None or a list is not what goes out: requests leaves a None out
        # and sends a list's items one by one, so the request sent may be valid (GET /v1/ui/tune-jobs?name=None
        # was sent without it, a 200; GET /v1/tuning-history/slower's target as a one-string list, a 200)
        assume(mutated is not None or not any(v is None or isinstance(v, list | tuple | dict)
                                              for v in (case.query or {}).values()))
        counts["cases"] += 1
        before = _CountingConnection.connects
        sent = "the case as generated (see its curl line)"
        # schema-valid is not always valid (bad IR text, an unknown target, "one of source/ir"): those are
        # 4xx by design, so positive-data acceptance is not asked for; every other check is
        excluded = [checks.positive_data_acceptance]
        try:
            if mutated is None:
                response = case.call_and_validate(
                    session=session, headers=headers, timeout=60, excluded_checks=excluded
                )
            else:
                response = _send(case, mutated, base_url, headers, session)
                sent = f"{response.request.method} {response.request.url} {response.request.body!r}"[:1000]
                case.validate_response(response, headers=headers, excluded_checks=excluded)
            counts[f"{name} {response.status_code}"] = counts.get(f"{name} {response.status_code}", 0) + 1
            reopened = _CountingConnection.connects > before and before > 0
            assert not reopened or counts["closed"], "the server dropped the keep-alive connection"
            counts["closed"] = response.headers.get("connection", "").lower() == "close"
            assert not counts["closed"] or response.status_code == 413, (
                f"connection closed after {response.status_code}"
            )
        except (Exception, BaseExceptionGroup) as exc:
            key = f"{name}: {_kind(exc)}"
            failures.setdefault(key, f"{key}\n  sent: {sent}\n  {str(exc)[:1500]}")

    run()

"""Constants are bounded by what they hold through their nesting, not only by each sequence's length:
`(X,) * 100` four levels deep is a few bytes of source, one small object in memory (sharing), and 10^8 elements
once copied. Describing such a kernel (its parameter defaults as JSON) once cost 59 s and a 200 MB answer that the
API process unpickled; now the constant is refused when it is folded."""

from __future__ import annotations

import pickle
import time

import pytest

from tilec.compiler.frontend.literal import BINOPS, MAX_ELEMENTS, FoldError, _check
from tilec.server.worker import analyze

from ..tune.test_limited_compile import HOSTILE


def test_shared_nesting_is_counted_as_copied() -> None:
    import ast

    a = (1,) * 100
    b = _check(BINOPS[ast.Mult]((a,), 100))  # 10^4 elements: allowed
    with pytest.raises(FoldError, match=f"more than {MAX_ELEMENTS} elements"):
        _check(BINOPS[ast.Mult]((b,), 100))
    with pytest.raises(FoldError):
        _check({"k": ("x" * 10_000,) * 11})


def test_a_hostile_source_is_described_quickly_and_small() -> None:
    start = time.monotonic()
    try:
        answer = analyze(kind="source", text=HOSTILE, name="k", budgets={}, signature=None)
    except Exception as exc:  # noqa: BLE001 - refused with a location, or read: either is fine, quickly and small
        answer = exc
    assert time.monotonic() - start < 5
    assert len(pickle.dumps(answer)) < 1 << 20

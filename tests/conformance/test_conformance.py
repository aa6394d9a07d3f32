"""The conformance suite: every case on the reference interpreter and on the cpu target, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from .cases import CASES
from .runners import compare, copy_args, run_cpu, run_interp


def test_suite_is_large_enough() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("target", ["interp", "cpu"])
def test_case(case, target: str) -> None:
    rng = np.random.default_rng(abs(hash(case.name)) % 2**32)
    args = case.inputs(rng)
    expected = case.reference(copy_args(args))
    run = run_cpu if target == "cpu" else run_interp
    run(case, args)
    compare(case, args, expected, target)

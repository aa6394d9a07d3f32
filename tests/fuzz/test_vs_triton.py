"""Differential fuzzing against Triton itself (issue 21): random Triton-language kernels run on Triton's
interpreter (TRITON_INTERPRET=1, torch CPU tensors) and on tilec's reference interpreter and cpu target,
on the same inputs, must write the same results (kernelgen and differential say how floats compare).

The suite runs a fixed seed for at most 45 s (TILEC_FUZZ_SECONDS, default 45; its 200 examples take about 35 s on 2 cores); `bench/fuzz_vs_triton.py
--seconds N` runs it longer. The early-return conformance kernels are checked against the interpreter too,
so their NumPy references are Triton's answers.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

pytest.importorskip("triton")
pytest.importorskip("torch")

from tests.conformance.case import Case  # noqa: E402
from tests.conformance.cases_dtypes import CASES as DTYPE_CASES  # noqa: E402
from tests.conformance.cases_fuzz_found import CASES as FUZZ_FOUND_CASES  # noqa: E402
from tests.conformance.cases_returns import CASES as RETURN_CASES  # noqa: E402

from .differential import check, run_triton_interpreter  # noqa: E402
from .kernelgen import Program, programs  # noqa: E402

BUDGET_S = float(os.environ.get("TILEC_FUZZ_SECONDS", "45"))
_START: list[float] = []
_RUN: list[int] = []  # kernels checked in this process


@pytest.fixture(scope="module", autouse=True)
def _report_count(request: pytest.FixtureRequest):
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and _RUN:
        seconds = time.monotonic() - _START[0]
        reporter.write_line(
            f"tests/fuzz: {len(_RUN)} random kernels agreed with Triton's interpreter ({seconds:.0f} s)"
        )


@seed(20261125)
@settings(
    max_examples=200,  # at most; the time budget ends it first on a slow machine
    deadline=None,
    database=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
@given(prog=programs())
def test_random_kernels_agree_with_triton_interpreter(prog: Program) -> None:
    if _START and time.monotonic() - _START[0] > BUDGET_S:
        return  # past the budget the remaining examples are only drawn (an assume() here would be flaky)
    _RUN.append(1)
    got = check(prog, seed=len(prog.source))
    if not _START:  # the budget starts after the first kernel, which starts the oracle's process
        _START.append(time.monotonic())
    assert "oracle" not in got, (
        f"Triton's interpreter rejected a generated kernel: {got['oracle']}\n{prog.source}"
    )
    bad = {t: why for t, why in got.items() if why is not None}
    assert not bad, f"tilec disagrees with Triton's interpreter: {bad}\n{prog.constexprs}\n{prog.source}"


@pytest.mark.parametrize("case", RETURN_CASES + FUZZ_FOUND_CASES + DTYPE_CASES, ids=lambda c: c.name)
def test_conformance_references_match_triton_interpreter(case: Case) -> None:
    """The references of the early-return cases, of the fuzzer's findings and of the reduction types are what
    Triton's interpreter computes."""
    rng = np.random.default_rng(7)
    args = case.inputs(rng)
    expected = case.reference([a.copy() if isinstance(a, np.ndarray) else a for a in args])
    prog = Program(case.source.replace(f"def {case.kernel}(", "def kernel("), dict(case.constexprs), {})
    out = run_triton_interpreter(prog, args, grid=case.grid, outputs=tuple(expected))
    assert out.outputs is not None, out.error
    for i, want in expected.items():
        np.testing.assert_allclose(
            out.outputs[i], want, rtol=case.rtol, atol=case.atol, err_msg=f"{case.name}: {i}"
        )

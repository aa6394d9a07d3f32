"""Property tests over random well-typed modules: the textual IR round-trips, and random kernels run on
the reference interpreter, with the same results before and after a print/parse round trip."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module, print_module, verify_module

from .random_modules import GRID, kernel_args, modules

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@SETTINGS
@given(modules())
def test_print_parse_print_is_identical(m):
    text = print_module(m)
    again = parse_module(text)
    verify_module(again)
    assert print_module(again) == text


@SETTINGS
@given(modules(), st.integers(0, 2**32 - 1))
def test_random_kernels_run_and_mean_the_same_after_the_round_trip(m, seed):
    args = kernel_args(m, np.random.default_rng(seed))
    copy = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_kernel(m, "k", args, GRID)
    run_kernel(parse_module(print_module(m)), "k", copy, GRID)
    for a, b in zip(args, copy, strict=True):
        if isinstance(a, np.ndarray):
            assert a.tobytes() == b.tobytes()


def test_the_generator_reaches_every_kind_of_statement():
    """Sampled modules use control flow, calls, memory ops and atomics (the strategy is not degenerate)."""
    seen: set[str] = set()

    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(modules())
    def collect(m):
        seen.update(op.name for op in m.walk())

    collect()
    for name in (
        "for",
        "if",
        "while",
        "call",
        "load",
        "store",
        "atomic_rmw",
        "atomic_cas",
        "dot",
        "reduce",
        "scan",
        "cast",
    ):
        assert name in seen, name

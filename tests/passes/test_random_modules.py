"""Every pass (and the default pipeline) on random well-typed kernels (tests/ir/random_modules.py):
the module still verifies and the interpreter gives the same buffers before and after."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from tilec.compiler.errors import CompileError
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module, print_module, verify_module
from tilec.compiler.passes import PASSES, PassManager

from ..ir.random_modules import GRID, kernel_args, modules

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PASS_LISTS = [[p] for p in sorted(PASSES) if p != "axis-info"] + [["default"]]


def _run(text: str, args: list, *, original: bool = False) -> tuple[list, type | None]:
    copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in args]
    try:
        run_kernel(parse_module(text), "k", copies, GRID)
    except CompileError as e:  # a kernel assert or fault must stay one, of the same kind
        return copies, type(e)
    except Exception:
        if original:  # the interpreter cannot run the input itself: its own tests' business, not ours
            reject()
        raise
    return copies, None


def _same(x, y) -> bool:
    if not isinstance(x, np.ndarray):
        return True
    if x.tobytes() == y.tobytes():
        return True
    # NaN payloads and signs are not part of the semantics: a folded NaN is the canonical one
    return x.dtype.kind == "f" and bool(np.array_equal(x, y, equal_nan=True))


@pytest.mark.parametrize("passes", PASS_LISTS, ids=lambda p: "+".join(p))
@SETTINGS
@given(m=modules(), seed=st.integers(0, 2**32 - 1))
def test_pass_on_random_kernel(passes: list[str], m, seed: int) -> None:
    text = print_module(m)
    after = parse_module(text)
    PassManager.from_names(passes).run(after)
    verify_module(after)
    args = kernel_args(m, np.random.default_rng(seed))
    out1, err1 = _run(text, args, original=True)
    out2, err2 = _run(print_module(after), args)
    assert err1 == err2, (text, print_module(after))
    if err1 is None:
        for i, (x, y) in enumerate(zip(out1, out2, strict=True)):
            assert _same(x, y), f"buffer {i} differs after {passes}:\n{text}\n{print_module(after)}\n{x}\n{y}"


@SETTINGS
@given(m=modules())
def test_axis_analysis_covers_every_tracked_value(m) -> None:
    from tilec.compiler.passes.axis_analysis import axis_analysis, tracked

    for f in m.functions:
        info = axis_analysis(f)
        for op in f.walk():
            for r in op.results:
                if tracked(r):
                    x = info[r]
                    n = len(x.contiguity)
                    assert len(x.divisibility) == len(x.constancy) == n
                    assert all(c >= 1 for c in (*x.contiguity, *x.divisibility, *x.constancy))

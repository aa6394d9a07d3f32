"""Every conformance case compiles for cuda:sm_90 down to a cubin (no GPU needed): the cases' own
argument types and hints, as client.jit would specialise them for arrays on a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.frontend import read_kernel
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.launch import specialise


def _cases():
    try:
        from tests.conformance.cases import CASES
    except ImportError:
        return []
    return list(CASES)


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c.name)
def test_case_compiles_to_cubin(case) -> None:
    args = case.inputs(np.random.default_rng(0))
    ks = read_kernel(case.source, case.kernel)
    runtime = [p for p in ks.params if not p.constexpr]
    specs = {p.name: specialise(p.name, a) for p, a in zip(runtime, args, strict=False)}
    art = compile_kernel(case.source, case.kernel, signature={k: s.type for k, s in specs.items()},
                         constexprs=case.constexprs, hints={k: dict(s.hints) for k, s in specs.items() if s.hints},
                         options=CompileOptions(target="cuda:sm_90"), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF"
    assert art.metadata["registers"] > 0

"""Regression tests for the launch-API edges the e2e kernels found: None for an unused pointer (Triton's
constexpr None), prune_configs_by (perf_model/top_k ignored, early_config_prune refused), pre_hook refused."""

from __future__ import annotations

import numpy as np
import pytest

from tilec import client
from tilec.compiler.errors import CompileError, UnsupportedSyntaxError
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel

OPTIONAL = '''
import triton
import triton.language as tl

@triton.jit
def add_opt(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if y_ptr is not None:
        x += tl.load(y_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x, mask=offs < n)
'''


def test_build_ir_takes_none_for_a_pointer_parameter() -> None:
    ks = read_kernel(OPTIONAL)
    m = build_ir(ks, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"y_ptr": None, "BLOCK": 8})
    assert [p.name for p in m.functions[0].params] == ["x_ptr", "out_ptr", "n"]
    x, out = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    run_kernel(m, "add_opt", [x, out, 5], (1,))
    np.testing.assert_array_equal(out, x)


def test_build_ir_still_refuses_a_value_for_a_runtime_parameter() -> None:
    ks = read_kernel(OPTIONAL)
    with pytest.raises(CompileError, match="not a tl.constexpr parameter"):
        build_ir(ks, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"y_ptr": 3, "BLOCK": 8})


def test_jit_launch_with_none_and_with_an_array() -> None:
    k = client.jit(OPTIONAL)
    x, y = np.arange(5, dtype=np.float32), np.full(5, 2, np.float32)
    out = np.zeros(5, np.float32)
    k[(1,)](x, None, out, 5, BLOCK=8)
    np.testing.assert_array_equal(out, x)
    k[(1,)](x, y, out, 5, BLOCK=8)
    np.testing.assert_array_equal(out, x + y)
    k[(1,)](x, out_ptr=out, y_ptr=None, n=5, BLOCK=8)
    np.testing.assert_array_equal(out, x)
    assert k.compile_count == 2


def _autotuned(prune: str, hook: str = "") -> str:
    return f'''
import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({{"B": 8}}{hook}), triton.Config({{"B": 16}})], key=["n"],
                 prune_configs_by={prune})
@triton.jit
def k(x_ptr, n, B: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(x_ptr + offs, offs, mask=offs < n)
'''


def test_prune_configs_by_perf_model_and_top_k_are_read_and_ignored() -> None:
    ks = read_kernel(_autotuned('{"perf_model": estimate, "top_k": 1}'))
    assert ks.autotune is not None and [c.kwargs["B"] for c in ks.autotune.configs] == [8, 16]
    x = np.zeros(20, np.int32)
    client.jit(_autotuned('{"top_k": 0.5}'))[lambda meta: (-(-20 // meta["B"]),)](x, 20)
    np.testing.assert_array_equal(x, np.arange(20))


@pytest.mark.parametrize(("prune", "message"), [
    ('{"early_config_prune": drop}', "early_config_prune"),
    ("PRUNE", "dict literal"),
    ('{"perf_model": None, "warmup": 3}', "unknown keys"),
])
def test_prune_configs_by_refusals(prune: str, message: str) -> None:
    with pytest.raises(UnsupportedSyntaxError, match=message) as exc:
        read_kernel(_autotuned(prune))
    assert exc.value.line == 6


@pytest.mark.parametrize("hook", ["zero", "lambda nargs: nargs['x_ptr'].zero_()"])
def test_pre_hook_is_refused_with_a_reason(hook: str) -> None:
    with pytest.raises(UnsupportedSyntaxError, match=r"pre_hook.*host code") as exc:
        read_kernel(_autotuned("None", f", pre_hook={hook}"))
    assert (exc.value.line, exc.value.col) == (5, 60)


def test_is_none_tests_on_tensors_fold() -> None:
    ks = read_kernel(OPTIONAL.replace("if y_ptr is not None:", "if (y_ptr is None) == (n is not None):"))
    m = build_ir(ks, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 8})
    x, y, out = np.ones(3, np.float32), np.full(3, 5, np.float32), np.zeros(3, np.float32)
    run_kernel(m, "add_opt", [x, y, out, 3], (1,))
    np.testing.assert_array_equal(out, x)  # the branch folded away: (False) == (True)

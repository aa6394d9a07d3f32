"""What FlagGems' own test suite found the drop-in refusing (issue 23, on an H100), each written the way that
library writes it: a module of thin wrappers (`tle.program_id(0)`, a helper whose parameter is given a
literal), a `@tl.constexpr` host function that picks an accumulator dtype, a dtype passed as a constexpr
(`INDEX_TY=tl.int32`), Box-Muller on uniform floats, 64-bit words to uniform floats, a dtype's width and
predicates (`dtype.int_bitwidth`, `is_int64()`, `dtype is tl.float32`), `x.logical_and(y)`, host helpers
run at compile time (`tl.core.get_int_dtype`, `unwrap_if_constexpr`), `import triton.language.core as core`
with `triton.language.standard`'s `_log2`, a combine function that asks a dtype through a helper that makes a
tile (`promote_to_tensor(x).dtype`), a block pointer's `.advance`, and a failed `tl.static_assert` in one
config. Launched through the drop-in (strict: no fallback) on the cpu target and
compared with Triton's own interpreter in a fresh process, on the same inputs."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import tilec  # noqa: E402
from tilec.client import _dropin  # noqa: E402

WRAPPERS = """
import triton
import triton.language as tl


@triton.jit
def program_id(axis: int) -> tl.tensor:
    return tl.program_id(axis).to(tl.int64)


@triton.jit
def scaled(x, factor):
    # `factor` is given a literal: a constexpr here, as in Triton
    return x * factor


@tl.constexpr
def accumulator(dtype: tl.dtype) -> tl.dtype:
    if dtype.is_fp16() or dtype.is_bf16():
        return tl.float32
    if dtype.is_int():
        return tl.int64
    return dtype
"""

KERNELS = """
import triton
import triton.language as tl
import triton.language.core as core
from triton.language.standard import _log2, zeros_like

import libwrap as tle


def unwrap_if_constexpr(o):
    return o.value if isinstance(o, tl.constexpr) else o


@tl.constexpr
def int_type(num_bits: tl.constexpr, signed: tl.constexpr) -> tl.dtype:
    num_bits = unwrap_if_constexpr(num_bits)
    return tl.core.get_int_dtype(num_bits, unwrap_if_constexpr(signed))


@tl.constexpr
def top_bit(num_bits: tl.constexpr) -> int:
    return 1 << (unwrap_if_constexpr(num_bits) - 1)


@triton.jit
def flip_sign(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    num_bits: tl.constexpr = x.dtype.primitive_bitwidth
    bits = x.to(int_type(num_bits, False), bitcast=True) ^ top_bit(num_bits)
    tl.store(out_ptr + offs, bits.to(x.dtype, bitcast=True))


@triton.jit
def stages(x, dim: tl.constexpr):
    _dim: core.constexpr = dim
    n_dims: core.constexpr = _log2(x.shape[_dim])
    acc = zeros_like(x)
    for i in core.static_range(n_dims):
        acc += core.arange(0, x.shape[_dim]) * i
    return acc


@triton.jit
def with_stages(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, x + stages(x, 0))


@triton.jit
def promote_to_tensor(x):
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def is_floating(x):
    return promote_to_tensor(x).dtype.is_floating()


@triton.jit
def min_with_index(a_value, a_index, b_value, b_index):
    mask = a_value < b_value
    equal = a_value == b_value
    if is_floating(a_value):
        a_isnan = a_value != a_value
        b_isnan = b_value != b_value
        mask |= a_isnan and not b_isnan
        equal |= a_isnan and b_isnan
    mask |= equal & (a_index > b_index)
    return tl.where(mask, a_value, b_value), tl.where(mask, a_index, b_index)


@triton.jit
def cummin(x_ptr, v_ptr, i_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v, i = tl.associative_scan((tl.load(x_ptr + offs), offs), 0, min_with_index)
    tl.store(v_ptr + offs, v)
    tl.store(i_ptr + offs, i)


@triton.jit
def row_sums(in_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tle.program_id(0)
    acc_dtype: tl.constexpr = tle.accumulator(in_ptr.type.element_ty)
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * N + offs, mask=offs < N, other=0).to(acc_dtype)
    tl.store(out_ptr + row, tle.scaled(tl.sum(x, 0), 2))


@triton.jit
def as_index(in_ptr, out_ptr, n, INDEX_TY: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + offs, (x * 3).to(INDEX_TY), mask=offs < n)


@triton.jit
def normals(out_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.randint4x(seed, offs)
    u0 = tl.uint_to_uniform_float(r0)
    u1 = tl.uint_to_uniform_float(r1)
    n0, n1 = tl.pair_uniform_to_normal(u0, u1)
    wide = r2.to(tl.uint64) << 32 | r3.to(tl.uint64)
    d = tl.uint_to_uniform_float(wide)
    tl.store(out_ptr + offs, n0)
    tl.store(out_ptr + BLOCK + offs, n1)
    tl.store(out_ptr + 2 * BLOCK + offs, d)


@triton.jit
def largest(dtype):
    if dtype is tl.float32:
        return 3.0e38
    elif dtype is tl.float16:
        return 65504.0
    else:
        return 0.0


@triton.jit
def int_facts(in_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + offs)
    dt = in_ptr.dtype.element_ty
    width: tl.constexpr = dt.int_bitwidth
    big: tl.constexpr = 2 ** (width - 2)
    y = tl.where(x > 0, x, big)
    if tl.constexpr(dt.is_int64()):
        y = y + 1
    both = (x > 2).logical_and(x < 7)
    either = (x < -5).logical_or(x > 5)
    tl.store(out_ptr + offs, y + both.to(y.dtype) * 10 + either.to(y.dtype) * 100)


@triton.jit
def fill_largest(in_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    v = tl.load(in_ptr + offs)
    tl.store(out_ptr + offs, tl.where(v > 0, v, largest(in_ptr.dtype.element_ty)))


@triton.jit
def guarded(x_ptr, out_ptr, HEAD: tl.constexpr, BLOCK_N: tl.constexpr):
    tl.static_assert(BLOCK_N <= HEAD)
    offs = tl.arange(0, BLOCK_N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)
"""

CALLS = """
def calls(torch, ns):
    g = torch.Generator().manual_seed(1)
    out = {}
    x = torch.randn(3, 50, generator=g).to(torch.float16)
    o = torch.zeros(3, dtype=torch.float32); ns.row_sums[(3,)](x, o, 50, BLOCK=64); out["sums_f16"] = o
    xi = torch.randint(-9, 9, (3, 50), generator=g, dtype=torch.int32)
    o = torch.zeros(3, dtype=torch.int64); ns.row_sums[(3,)](xi, o, 50, BLOCK=64); out["sums_i32"] = o
    xs = torch.randint(0, 100, (40,), generator=g, dtype=torch.int32)
    o = torch.zeros(40, dtype=torch.int64); ns.as_index[(1,)](xs, o, 40, INDEX_TY=ns.tl.int64, BLOCK=64)
    out["index_i64"] = o
    o = torch.zeros(40, dtype=torch.int32); ns.as_index[(1,)](xs, o, 40, INDEX_TY=ns.tl.uint32, BLOCK=64)
    out["index_u32"] = o
    o = torch.zeros(3 * 32); ns.normals[(1,)](o, 1234, BLOCK=32); out["normals"] = o
    for dt in (torch.int32, torch.int64, torch.int16):
        xi = torch.randint(-9, 9, (32,), generator=g, dtype=dt)
        o = torch.zeros(32, dtype=dt); ns.int_facts[(1,)](xi, o, BLOCK=32); out[f"int_facts_{dt}"] = o
    xs = torch.randn(16, generator=g)
    o = torch.zeros(16); ns.flip_sign[(1,)](xs, o, BLOCK=16); out["flip_sign"] = o
    o = torch.zeros(16); ns.with_stages[(1,)](xs, o, BLOCK=16); out["stages"] = o
    xc = torch.randint(0, 5, (32,), generator=g).float()
    xc[7] = float("nan")
    v = torch.zeros(32); i = torch.zeros(32, dtype=torch.int32); ns.cummin[(1,)](xc, v, i, BLOCK=32)
    out["cummin_values"] = v
    out["cummin_indices"] = i
    for dt in (torch.float32, torch.float16):
        xf = torch.randn(32, generator=g).to(dt)
        o = torch.zeros(32, dtype=dt); ns.fill_largest[(1,)](xf, o, BLOCK=32); out[f"largest_{dt}"] = o
    return {k: v.numpy() for k, v in out.items()}
"""


@pytest.fixture
def gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "libwrap.py").write_text(WRAPPERS)
    (tmp_path / "libkern.py").write_text(KERNELS)
    (tmp_path / "libcalls.py").write_text(CALLS)
    monkeypatch.syspath_prepend(str(tmp_path))
    names = ("libwrap", "libkern", "libcalls")
    for name in names:
        sys.modules.pop(name, None)
    saved = dict(
        _dropin._STATS, reasons=dict(_dropin._STATS["reasons"]), kernels=set(_dropin._STATS["kernels"])
    )
    tilec.install(strict=True)
    try:
        kernels = importlib.import_module("libkern")
        kernels.tl = importlib.import_module("triton.language")
        yield kernels, importlib.import_module("libcalls")
    finally:
        tilec.uninstall()
        _dropin._STATE.pop("strict", None)
        _dropin._STATS.update(saved)
        for name in names:
            sys.modules.pop(name, None)


def test_library_gaps_match_tritons_interpreter(gaps, tmp_path: Path) -> None:
    kernels, calls = gaps
    ours = calls.calls(torch, kernels)  # strict: a kernel tilec refused would raise
    script = textwrap.dedent(f"""
        import numpy as np, torch, triton.language as tl, libkern, libcalls
        libkern.tl = tl
        np.savez({str(tmp_path / "theirs.npz")!r}, **libcalls.calls(torch, libkern))
        """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    env.pop("TILEC_TRITON", None)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    theirs = np.load(tmp_path / "theirs.npz")
    assert sorted(theirs.files) == sorted(ours)
    for name, want in theirs.items():
        assert ours[name].dtype == want.dtype, name
        np.testing.assert_allclose(ours[name], want, rtol=2e-6, atol=2e-6, equal_nan=True, err_msg=name)


def test_a_failed_static_assert_refuses_the_config_not_the_kernel(gaps) -> None:
    """A config whose tl.static_assert fails is Triton's CompileTimeAssertionFailure, which Triton's autotuner
    prunes (as FlagGems' attention relies on: BLOCK_N <= HEAD_DIM); the kernel stays tilec's for the others."""
    from triton.compiler.errors import CompileTimeAssertionFailure

    kernels, _ = gaps
    x = torch.randn(64)
    out = torch.zeros(64)
    with pytest.raises(CompileTimeAssertionFailure, match="static assertion failed"):
        kernels.guarded[(1,)](x, out, HEAD=16, BLOCK_N=32)
    kernels.guarded[(1,)](x, out, HEAD=32, BLOCK_N=32)
    np.testing.assert_array_equal(out[:32].numpy(), x[:32].numpy() + 1)
    assert tilec.stats()["fallbacks"] == 0


POINTER_TABLE = """
import triton
import triton.language as tl


@triton.jit
def scaled_groups(table_ptr, sizes_ptr, out_ptr, BLOCK: tl.constexpr):
    # as Triton's grouped GEMM tutorial: each group's address is kept in memory as a 64-bit integer
    g = tl.program_id(0)
    base = tl.load(table_ptr + g).to(tl.pointer_type(tl.float32))
    n = tl.load(sizes_ptr + g)
    offs = tl.arange(0, BLOCK)
    x = tl.load(base + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + g * BLOCK + offs, x * 2)
"""


def test_an_address_loaded_as_int64_is_a_pointer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ptrtable.py").write_text(POINTER_TABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("ptrtable", None)
    tilec.install(strict=True)
    try:
        kernels = importlib.import_module("ptrtable")
        a, b = torch.randn(5), torch.randn(9)
        table = torch.tensor([a.data_ptr(), b.data_ptr()], dtype=torch.int64)
        out = torch.full((32,), 7.0)
        kernels.scaled_groups[(2,)](table, torch.tensor([5, 9], dtype=torch.int32), out, BLOCK=16)
    finally:
        tilec.uninstall()
        _dropin._STATE.pop("strict", None)
        sys.modules.pop("ptrtable", None)
    np.testing.assert_array_equal(out[:5].numpy(), (a * 2).numpy())
    np.testing.assert_array_equal(out[16:25].numpy(), (b * 2).numpy())
    assert not out[5:16].any() and not out[25:].any()  # the masked lanes stored their `other`, times 2


def test_an_int_to_pointer_cast_lowers_for_cuda_and_narrow_ints_are_refused() -> None:
    from tilec.compiler.artifact import CompileOptions
    from tilec.compiler.errors import CompileError
    from tilec.compiler.pipeline import compile_kernel

    opts = CompileOptions(target="cuda:sm_90", num_warps=4)
    sig = {"table_ptr": "*i64", "sizes_ptr": "*i32", "out_ptr": "*fp32"}
    ptx = compile_kernel(POINTER_TABLE, "scaled_groups", signature=sig, constexprs={"BLOCK": 16}, options=opts,
                         emit="ptx").ptx  # fmt: skip
    assert "ld.global" in ptx
    narrow = POINTER_TABLE.replace("tl.load(table_ptr + g)", "tl.load(table_ptr + g).to(tl.int32)")
    with pytest.raises(CompileError, match="only 64-bit integers hold addresses"):
        compile_kernel(narrow, "scaled_groups", signature=sig, constexprs={"BLOCK": 16}, options=opts, emit="ptx")


def test_a_block_pointers_advance_method(gaps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ptr.advance([dm, dn])`, as FlagGems' flash kernel writes it (Triton 3.9's interpreter has no block
    pointers any more: checked against NumPy)."""
    (tmp_path / "bpadv.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def rows(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):\n"
        "    p = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))\n"
        "    q = tl.make_block_ptr(out_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))\n"
        "    m = tl.program_id(0) * BM\n"
        "    tl.store(q.advance([m, 0]), tl.load(p.advance([m, 0]), boundary_check=(0, 1)) * 3,\n"
        "             boundary_check=(0, 1))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("bpadv", None)
    mod = importlib.import_module("bpadv")
    x = torch.randn(20, 16)
    out = torch.zeros(20, 16)
    mod.rows[(3,)](x, out, 20, 16, BM=8, BN=16)
    sys.modules.pop("bpadv", None)
    np.testing.assert_array_equal(out.numpy(), x.numpy() * 3)

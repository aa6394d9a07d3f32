"""The reader gaps of issue 23, each written the way the libraries write it, launched through the drop-in
(strict: no fallback) on the cpu target and compared with Triton's own interpreter (run in a fresh process,
on the same inputs)."""

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

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def philox_words(out_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    c = offs.to(tl.uint32)
    a, b, c2, d = tl.philox(seed, c, c + 7, c * 3, 5)
    tl.store(out_ptr + offs, a.to(tl.int32, bitcast=True))
    tl.store(out_ptr + BLOCK + offs, d.to(tl.int32, bitcast=True))


@triton.jit
def block_ptr_attrs(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(x_ptr, (N,), (1,), (0,), (BLOCK,), (0,))
    q = tl.make_block_ptr(out_ptr, (N,), (1,), (0,), (BLOCK,), (0,))
    for _ in range(0, N, BLOCK):
        v = tl.load(p, boundary_check=(0,)).to(p.type.element_ty.element_ty)
        tl.store(q, (v * 2).to(q.dtype.element_ty), boundary_check=(0,))
        p = tl.advance(p, (BLOCK,))
        q = tl.advance(q, (BLOCK,))


@triton.jit
def with_continue(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(0, 8):
        v = tl.load(x_ptr + i)
        if v < 0:
            continue
        if i % 3 == 0:
            acc += 100.0
            continue
        acc += v
    tl.store(out_ptr + offs, acc)


@triton.jit
def tensor_indexing(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    outer = x[:, None] * x[None, :]
    tl.store(out_ptr + offs[:, None] * BLOCK + offs[None, :], outer)


@triton.jit
def as_int_bits(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    bits = x_ptr.to(tl.pointer_type(tl.int32))
    tl.store(out_ptr + offs, tl.load(bits + offs) >> 23)


@triton.jit
def optional_weight(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    if w_ptr:
        x = x * tl.load(w_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, x, mask=offs < n)


@triton.jit
def _maybe_make_tensor_desc(desc_or_ptr, shape, strides, block_shape):
    if isinstance(desc_or_ptr, tl.tensor_descriptor):
        return desc_or_ptr
    else:
        return tl.make_tensor_descriptor(desc_or_ptr, shape, strides, block_shape)


@triton.jit
def uses_isinstance(x_ptr, out_ptr, N: tl.constexpr):
    d = _maybe_make_tensor_desc(x_ptr, [N], [1], [N])
    v = d.load([0])
    if isinstance(v, tl.tensor) and not isinstance(d, tl.tensor):  # (the interpreter has no constexpr objects)
        v = v * 2
    tl.store(out_ptr + tl.arange(0, N), v)


@triton.constexpr_function
def padded(n, multiple=16):
    return ((n + multiple - 1) // multiple) * multiple


@triton.jit
def uses_constexpr_function(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, padded(N, 32))
    tl.store(out_ptr + offs, offs.to(tl.float32), mask=offs < padded(N))
"""

CALLS = """
def calls(torch, ns):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(100, generator=g)
    x8 = torch.tensor([1.0, -2.0, 3.0, 4.0, -5.0, 6.0, 7.0, 8.0])
    x16 = torch.randn(16, generator=g)
    out = {}
    o = torch.zeros(32, dtype=torch.int32); ns.philox_words[(1,)](o, 1234, BLOCK=16); out["philox"] = o
    o = torch.zeros(4); ns.with_continue[(1,)](x8, o, BLOCK=4); out["continue"] = o
    o = torch.zeros(256); ns.tensor_indexing[(1,)](x16, o, BLOCK=16); out["indexing"] = o
    o = torch.zeros(16, dtype=torch.int32); ns.as_int_bits[(1,)](x16.abs() + 1, o, BLOCK=16); out["pointer_type"] = o
    o = torch.zeros(16); ns.optional_weight[(1,)](x16, None, o, 10, BLOCK=16); out["no_weight"] = o
    o = torch.zeros(16); ns.optional_weight[(1,)](x16, x16, o, 10, BLOCK=16); out["weight"] = o
    o = torch.zeros(40); ns.uses_constexpr_function[(1,)](o, N=20); out["constexpr_function"] = o
    o = torch.zeros(16); ns.uses_isinstance[(1,)](x16, o, N=16); out["isinstance"] = o
    return {k: v.numpy() for k, v in out.items()}
"""


@pytest.fixture
def gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "gapk.py").write_text(KERNELS)
    (tmp_path / "gapcalls.py").write_text(CALLS)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("gapk", "gapcalls"):
        sys.modules.pop(name, None)
    saved = dict(
        _dropin._STATS, reasons=dict(_dropin._STATS["reasons"]), kernels=set(_dropin._STATS["kernels"])
    )
    tilec.install(strict=True)
    try:
        yield importlib.import_module("gapk"), importlib.import_module("gapcalls")
    finally:
        tilec.uninstall()
        _dropin._STATE.pop("strict", None)
        _dropin._STATS.update(saved)
        for name in ("gapk", "gapcalls"):
            sys.modules.pop(name, None)


def test_reader_gaps_match_tritons_interpreter(gaps, tmp_path: Path) -> None:
    kernels, calls = gaps
    ours = calls.calls(torch, kernels)  # strict: a kernel tilec refused would raise
    script = textwrap.dedent(f"""
        import numpy as np, torch, gapk, gapcalls
        np.savez({str(tmp_path / "theirs.npz")!r}, **gapcalls.calls(torch, gapk))
        """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    env.pop("TILEC_TRITON", None)
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    theirs = np.load(tmp_path / "theirs.npz")
    assert sorted(theirs.files) == sorted(ours)
    for name, want in theirs.items():
        np.testing.assert_allclose(ours[name], want, rtol=1e-6, atol=1e-6, err_msg=name)


def test_block_pointer_attributes_and_advance(gaps) -> None:
    """Triton 3.9's interpreter has no block pointers any more: checked against NumPy."""
    kernels, _ = gaps
    x = torch.randn(100)
    out = torch.zeros(100)
    kernels.block_ptr_attrs[(1,)](x, out, 100, BLOCK=32)
    np.testing.assert_array_equal(out.numpy(), x.numpy() * 2)

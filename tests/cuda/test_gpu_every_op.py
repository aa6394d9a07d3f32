"""Every kernel of the op catalogue (tests/cuda/op_kernels.py: every op of the IR, every dtype of the
elementwise/cast/reduce/scan/atomic ops, reshapes that move no data and reshapes through shared memory)
runs on a real GPU and agrees with the reference interpreter on the same inputs.
Skips with a reason where there is no GPU; the device machine runs it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cuda.gpu import gpu_reason
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module
from tilec.compiler.ir.types import PointerType
from tilec.compiler.pipeline import compile_kernel

from .op_kernels import OpKernel, catalogue

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
CATALOGUE = catalogue()


def _signed_view(a: np.ndarray) -> np.ndarray:
    """Unsigned arrays travel as their signed twins (torch lacks most unsigned dtypes); the bits are kept."""
    if a.dtype.kind == "u" and a.dtype.itemsize > 1:
        return a.view(np.dtype(f"i{a.dtype.itemsize}"))
    return a


def run_on_gpu(k: OpKernel, args: list) -> list:
    import torch

    from tilec.runtime.cuda import cuda_target, launch

    dev = [torch.from_numpy(_signed_view(a).copy()).cuda() if isinstance(a, np.ndarray) else a for a in args]
    fn = parse_module(k.text).kernels[0]
    hints = {
        p.name: {"divisibility": 16} for p in fn.params if isinstance(p.type, PointerType)
    }  # torch aligns to 256
    opts = CompileOptions(target=cuda_target(dev), num_warps=k.num_warps)
    art = compile_kernel(k.text, "k", is_ir=True, hints=hints, options=opts, emit="cubin")
    launch(art, dev, (*k.grid, *(1,) * (3 - len(k.grid))))
    torch.cuda.synchronize()
    return [
        d.cpu().numpy().view(a.dtype) if isinstance(a, np.ndarray) else a
        for d, a in zip(dev, args, strict=True)
    ]


def _values(a: np.ndarray, bf16: bool) -> np.ndarray:
    if bf16:
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_agrees_with_the_interpreter(name: str) -> None:
    k = CATALOGUE[name]
    args = k.make_args()
    want = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_kernel(parse_module(k.text), "k", want, k.grid)
    got = run_on_gpu(k, args)
    fn = parse_module(k.text).kernels[0]
    for i, (p, w, g) in enumerate(zip(fn.params, want, got, strict=True)):
        if not isinstance(w, np.ndarray) or (k.compare is not None and i not in k.compare):
            continue
        bf16 = isinstance(p.type, PointerType) and p.type.pointee.name == "bf16"
        if w.dtype.kind in "iub" and not bf16:
            np.testing.assert_array_equal(g, w, err_msg=f"{name}: argument %{p.name}")
        else:
            np.testing.assert_allclose(_values(g, bf16), _values(w, bf16), rtol=k.rtol, atol=k.atol, equal_nan=True,
                                       err_msg=f"{name}: argument %{p.name}")  # fmt: skip


@pytest.mark.parametrize("stem", ["rope_split_join"])
def test_wild_kernels_built_on_reshape(stem: str) -> None:
    """tl.split/tl.join lower to reshapes too (sort/flip/cat/topk: tests/frontend/test_wild_cuda.py)."""
    from tests.frontend import test_wild_cuda

    test_wild_cuda.test_new_wild_kernels_on_gpu(stem)

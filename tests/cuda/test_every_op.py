"""Every op of the tile IR compiles on the cuda target, without a GPU: the catalogue of tests/cuda/op_kernels.py
(the op-coverage snippets of tests/ir, every dtype of the elementwise/cast/reduce/scan/atomic ops, and
reshapes of every kind) down to cubins for sm_80 and sm_90, with the coverage asserted; every wild kernel
the interpreter runs compiles for sm_90 too (the conformance cases: tests/cuda/test_compile_cases.py).
What the target still refuses is listed in REFUSED and must end in a clear CompileError."""

from __future__ import annotations

import pytest

from tests.frontend.test_wild_kernels import CASES, WILD
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.errors import CompileError
from tilec.compiler.ir import OPS, parse_module
from tilec.compiler.pipeline import compile_kernel

from .op_kernels import catalogue, kernel

CATALOGUE = catalogue()
# the smaller set that also goes to sm_80: the op-coverage snippets and the shape-changing kernels
SM80 = sorted(n for n in CATALOGUE if n.startswith(("snippet-", "reshape-", "atomics-bf16", "atomics-i1")))


def ops_in(text: str) -> set[str]:
    return {op.name for op in parse_module(text).walk()}


def compile_ir(text: str, sm: int, num_warps: int = 4, emit: str = "cubin"):
    opts = CompileOptions(target=f"cuda:sm_{sm}", num_warps=num_warps)
    return compile_kernel(text, "k", is_ir=True, options=opts, emit=emit)


def test_catalogue_covers_every_op() -> None:
    for names in (CATALOGUE, SM80):
        seen = set().union(*(ops_in(CATALOGUE[n].text) for n in names))
        assert seen == set(OPS), f"not covered: {sorted(set(OPS) - seen)}"


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_compiles_for_sm90(name: str) -> None:
    k = CATALOGUE[name]
    art = compile_ir(k.text, 90, k.num_warps)
    assert art.binary[:4] == b"\x7fELF" and art.metadata["registers"] > 0


@pytest.mark.parametrize("name", SM80)
def test_compiles_for_sm80(name: str) -> None:
    k = CATALOGUE[name]
    art = compile_ir(k.text, 80, k.num_warps)
    assert art.binary[:4] == b"\x7fELF" and art.metadata["registers"] > 0


@pytest.mark.parametrize("stem", sorted(CASES))
def test_wild_kernel_compiles_for_sm90(stem: str) -> None:
    c = CASES[stem]
    art = compile_kernel((WILD / f"{stem}.py").read_text(), c.name, signature=c.signature, constexprs=c.constexprs,
                         options=CompileOptions(target="cuda:sm_90"), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF"


def test_reshape_kernels_are_in_the_wild_set() -> None:
    """flip/cat/topk/split/join are built from reshape (sort and gather are ops of their own): the wild set
    keeps exercising it."""
    from tests.frontend.test_wild_kernels import build
    from tilec.compiler.tir import run_passes

    with_reshape = {s for s in ("flip_cat", "topk_gather", "rope_split_join")
                    if "reshape" in {op.name for op in run_passes(build(CASES[s])).walk()}}  # fmt: skip
    assert len(with_reshape) == 3


# ---- what the target refuses, with the words of its error ------------------------------------------

_FLOAT_AND = kernel(
    [("x", "f32")], ["%v = constant {value = 1.0} : f32", '%o = atomic_rmw %x, %v {kind = "and"} : f32']
)
_BF16_OR = kernel(
    [("x", "bf16")], ["%v = constant {value = 1.0} : bf16", '%o = atomic_rmw %x, %v {kind = "or"} : bf16']
)
_NON_POW2 = kernel([("x", "f32")], ["%v = constant {value = 1.0} : tile<3x64xf32>", "%s = reduce %v {axis = 0, "
                   'kind = "sum"} : tile<64xf32>', "%r = make_range {end = 64, start = 0} : tile<64xi32>",
                   "%p = splat %x : tile<64xptr<f32>>", "%a = addptr %p, %r : tile<64xptr<f32>>", "store %a, %s"])  # fmt: skip
REFUSED = {
    "atomic-and-on-f32": (_FLOAT_AND, "atomic and needs an integer type, got f32"),
    "atomic-or-on-bf16": (_BF16_OR, "atomic or needs an integer type, got bf16"),
    "non-power-of-two-tile": (_NON_POW2, "tile<3x64xf32>"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_a_clear_error(name: str) -> None:
    text, words = REFUSED[name]
    with pytest.raises(CompileError) as info:
        compile_ir(text, 90)
    assert words in str(info.value)
    assert "Traceback" not in str(info.value)

"""fp8 on the cuda target without a GPU: the conversion kernels of tests/codegen/test_fp8.py (every float
type to and from f8e4nv/f8e5, loads and stores of fp8 bytes, a bitcast) compiled for cuda:sm_90 and
cuda:sm_80 and assembled by ptxas; small fp8 dots (mma.sync as f16, FMAs before sm_80); an fp8 operand
with a non-fp8 one is refused where it is written (two fp8 formats mix, as in Triton)."""

from __future__ import annotations

import re
import textwrap

import pytest

from tests.codegen.test_fp8 import convert_kernel
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.errors import CompileError
from tilec.compiler.pipeline import compile_kernel

PAIRS = [
    (s, d)
    for f in ("f8e4nv", "f8e5")
    for s, d in ((f, "f32"), ("f32", f), ("f16", f), ("f64", f), (f, "f16"))
]
PAIRS.append(("f8e4nv", "f8e5"))


def _cubin(text: str, sm: int):
    return compile_kernel(
        text, None, is_ir=True, options=CompileOptions(target=f"cuda:sm_{sm}"), emit="cubin"
    )


@pytest.mark.parametrize("sm", [90, 89])
@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_conversion_kernels_assemble(src: str, dst: str, sm: int) -> None:
    """sm_90 converts in hardware (cvt with .e4m3x2/.e5m2x2), which ptxas takes on sm_89 only from PTX ISA 8.1:
    sm_89's build (PTX 8.0 from LLVM) must not have them."""
    art = _cubin(convert_kernel(src, dst, n=128), sm)
    hw = re.search(r"cvt\.\S*(e4m3|e5m2)x2", art.ptx)
    assert (hw is not None) == (sm == 90 and not (src == "f8e5" and not dst.startswith("f8")))
    assert art.binary[:4] == b"\x7fELF" and art.metadata["registers"] > 0
    assert "ld.global" in art.ptx and "st.global" in art.ptx
    if src.startswith("f8"):  # fp8 is bytes in memory
        assert re.search(r"ld\.global(\.v\d)?\.[bu]8", art.ptx)
    if dst.startswith("f8"):
        assert re.search(r"st\.global(\.v\d)?\.[bu]8", art.ptx)


def test_fp8_constant_and_bitcast_assemble_for_sm80() -> None:
    text = textwrap.dedent("""\
    module {
      kernel @k(%o: ptr<i8>, %q: ptr<f8e5>) {
        %0 = constant {value = 1000.0} : f8e4nv
        %1 = bitcast %0 : i8
        store %o, %1
        %2 = constant {value = inf} : f8e5
        store %q, %2
        return
      }
    }
    """)
    assert _cubin(text, 80).binary[:4] == b"\x7fELF"


SMALL_DOT = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.jit
    def k(a_ptr, b_ptr, c_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        b = tl.load(b_ptr + r[:, None] * 16 + r[None, :])
        c = tl.dot(a, b)
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], c)
    """)


@pytest.mark.parametrize(("sm", "inst"), [(90, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
                                          (80, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
                                          (75, None)])  # fmt: skip
@pytest.mark.parametrize(("a_t", "b_t"), [("*fp8e4nv", "*fp8e4nv"), ("*fp8e5", "*fp8e4nv")])
def test_small_fp8_dots_build_where_wgmma_cannot_take_them(sm: int, inst: str | None, a_t: str, b_t: str) -> None:
    """16x16 tiles (under wgmma's m64) run on mma.sync as f16 from sm_80 and on FMAs before; the dots
    with tile sizes wgmma takes are in test_wgmma.py (sm_90a) and test_mma.py (sm_80)."""
    art = compile_kernel(SMALL_DOT, "k", signature={"a_ptr": a_t, "b_ptr": b_t, "c_ptr": "*fp32"},
                         options=CompileOptions(target=f"cuda:sm_{sm}"), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF" and "wgmma" not in art.ptx
    if inst is None:
        assert "mma.sync" not in art.ptx and "fma.rn.f32" in art.ptx
    else:
        assert inst in art.ptx


def test_fp8_mixed_with_another_type_is_refused_where_written() -> None:
    with pytest.raises(CompileError) as info:
        compile_kernel(SMALL_DOT, "k", signature={"a_ptr": "*fp8e4nv", "b_ptr": "*fp16", "c_ptr": "*fp32"},
                       options=CompileOptions(target="cuda:sm_90"), emit="ptx")  # fmt: skip
    e = info.value
    assert "same dtype" in e.message and (e.line, e.col) == (10, 9)  # the tl.dot call

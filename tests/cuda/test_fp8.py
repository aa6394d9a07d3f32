"""fp8 on the cuda target without a GPU: the conversion kernels of tests/codegen/test_fp8.py (every float
type to and from f8e4nv/f8e5, loads and stores of fp8 bytes, a bitcast) compiled for cuda:sm_90 and
cuda:sm_80 and assembled by ptxas; an fp8 dot is refused with a located error (not built yet)."""

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


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_conversion_kernels_assemble_for_sm90(src: str, dst: str) -> None:
    art = _cubin(convert_kernel(src, dst, n=128), 90)
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


def test_fp8_dot_is_refused_on_cuda_with_its_location() -> None:
    src = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.jit
    def k(a_ptr, c_ptr):
        r = tl.arange(0, 16)
        a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
        c = tl.dot(a, a)
        tl.store(c_ptr + r[:, None] * 16 + r[None, :], c)
    """)
    with pytest.raises(CompileError) as info:
        compile_kernel(src, "k", signature={"a_ptr": "*fp8e4nv", "c_ptr": "*fp32"},
                       options=CompileOptions(target="cuda:sm_90"), emit="ptx")  # fmt: skip
    e = info.value
    assert e.message.startswith("fp8 dot on cuda is not built yet")
    assert (e.line, e.col) == (9, 9)  # the tl.dot call

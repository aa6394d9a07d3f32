"""Every budget refusal carries line:col (issue 20): source size, nesting Python's parser cannot take, syntax
nodes and depth, unrolling, tile elements, IR ops and helper-call depth; for tile IR the text's size, and an
integer constant out of its type's range (a 400-digit i32 became -1; a 5000-digit one was an internal error)."""

from __future__ import annotations

import pytest

from tilec.compiler.errors import BudgetExceededError, CompileError
from tilec.compiler.frontend import Budgets
from tilec.compiler.ir import parser as ir_parser
from tilec.compiler.pipeline import compile_kernel, compile_request
from tilec.compiler.request import CompileRequest

HEAD = "import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(x_ptr):\n"
SIG = {"x_ptr": "*fp32"}

# name: (kernel body after HEAD, budgets, (line, col) expected)
CASES = {
    # HEAD is 71 bytes on lines 1-6; byte 300, the first over, is the 10th of line 29 (its newline)
    "source bytes": ("    x = 1\n" * 100, Budgets(max_source_bytes=300), (29, 10)),
    "nesting python cannot parse": ("    x = 1" + " + 1" * 300000 + "\n", Budgets(max_source_bytes=1 << 24), (7, 1)),
    "syntax nodes": ("    x = 1" + " + 1" * 50 + "\n", Budgets(max_ast_nodes=60), None),
    "syntax depth": ("    x = " + "-" * 50 + "1\n", Budgets(max_ast_depth=20), None),
    "unrolling": ("    for i in tl.static_range(100):\n        tl.store(x_ptr + i, 1.0)\n", Budgets(max_unroll=10),
                  (7, 5)),
    "tile elements": ("    tl.store(x_ptr + tl.arange(0, 4096), 1.0)\n", Budgets(max_tile_elements=1024), None),
    "ops": ("    for i in tl.static_range(50):\n        tl.store(x_ptr + i, 1.0)\n", Budgets(max_ops=20), None),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_budget_refusal_is_located(name: str) -> None:
    body, budgets, where = CASES[name]
    request = CompileRequest(
        text=HEAD + body, kind="source", name="k", signature=SIG, emit="tir", budgets=budgets
    )
    with pytest.raises(BudgetExceededError) as info:
        compile_request(request)
    err = info.value
    assert err.line is not None and err.col is not None, f"{name}: {err}"
    assert err.source_line is not None
    if where is not None:
        assert (err.line, err.col) == where, f"{name}: {err}"


def test_helper_call_depth_is_located() -> None:
    helpers = "".join(f"@triton.jit\ndef h{i}(x):\n    return h{i + 1}(x)\n\n\n" for i in range(12))
    source = ("import triton\nimport triton.language as tl\n\n\n" + helpers + "@triton.jit\ndef h12(x):\n    return x\n\n\n"
              "@triton.jit\ndef k(x_ptr):\n    tl.store(x_ptr, h0(1.0))\n")  # fmt: skip
    with pytest.raises(BudgetExceededError) as info:
        compile_kernel(source, "k", signature=SIG, emit="tir")
    assert info.value.line is not None and info.value.col is not None


IR = (
    "module {{\n  kernel @k(%x: ptr<i32>) {{\n    %0 = constant {{value = {v}}} : {t}\n    return\n  }}\n}}\n"
)


@pytest.mark.parametrize(
    ("value", "type_", "message", "col"),
    [
        ("9" * 400, "i32", "integer literal of 400 digits", 28),
        ("-" + "9" * 5000, "i64", "integer literal of 5000 digits", 28),
        ("4294967296", "i32", "integer constant 4294967296 does not fit in i32", 10),
        ("-129", "i8", "integer constant -129 does not fit in i8", 10),
        ("2", "i1", "integer constant 2 does not fit in i1", 10),
    ],
)
def test_an_ir_integer_out_of_its_types_range_is_a_located_error(
    value: str, type_: str, message: str, col: int
) -> None:
    with pytest.raises(CompileError, match=message) as info:
        compile_kernel(IR.format(v=value, t=type_), None, is_ir=True, emit="llir")
    assert (info.value.line, info.value.col) == (3, col)
    assert "internal" not in str(info.value)


@pytest.mark.parametrize(("value", "type_"), [("4294967295", "i32"), ("-2147483648", "i32"), ("255", "i8"),
                                              ("-1", "i1"), ("18446744073709551615", "i64")])  # fmt: skip
def test_constants_that_fit_their_bits_signed_or_unsigned_compile(value: str, type_: str) -> None:
    compile_kernel(IR.format(v=value, t=type_), None, is_ir=True, emit="tir")


def test_ir_text_over_its_size_limit_is_located(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ir_parser, "MAX_IR_BYTES", 40)
    with pytest.raises(CompileError, match="over the 40 byte limit") as info:
        ir_parser.parse_module(IR.format(v=1, t="i32"))
    assert (info.value.line, info.value.col) == (3, 4)  # lines 1 and 2 hold 37 bytes: byte 40 is line 3's 4th

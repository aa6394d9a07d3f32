"""tl.reduce / tl.associative_scan with a bad combine function: a located CompileError that says what is
wrong (arity, number or types of the returned values, constructs a combine cannot hold); and the other ways
to call them: a tl.* function as combine_fn, the tensor methods x.reduce / x.associative_scan."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tilec.compiler.errors import CompileError, UnsupportedSyntaxError
from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import print_module

HEAD = "import triton\nimport triton.language as tl\n\n\n"
SIG = {"x_ptr": "*fp32", "i_ptr": "*i32"}


def build(src: str):
    ks = read_kernel(HEAD + textwrap.dedent(src), "k", filename="k.py")
    return build_ir(ks, SIG, {"N": 8})


def err(src: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        build(src)
    e = info.value
    assert e.filename == "k.py"
    assert "compiler/" not in str(e) and '.py", line' not in str(e)
    return e


KERNEL = """
@triton.jit
def k(x_ptr, i_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    i = tl.load(i_ptr + tl.arange(0, N))
    r = {call}
"""


def with_combine(combine: str, call: str) -> str:
    return textwrap.dedent(combine) + KERNEL.format(call=call)


def line_of(src: str, needle: str) -> int:
    return (HEAD + textwrap.dedent(src)).splitlines().index(
        next(ln for ln in (HEAD + textwrap.dedent(src)).splitlines() if needle in ln)
    ) + 1


def test_wrong_arity_is_located_at_the_call() -> None:
    src = with_combine(
        """
        @triton.jit
        def add(a, b):
            return a + b
        """,
        "tl.reduce((x, i), 0, add)",
    )
    e = err(src)
    assert (
        e.message
        == "tl.reduce: combine function 'add' takes 2 arguments, but combining 2 inputs passes 4 (each side's elements)"
    )
    assert (e.line, e.col) == (line_of(src, "r = tl.reduce"), 9)


def test_returned_value_count_must_match_the_inputs() -> None:
    src = with_combine(
        """
        @triton.jit
        def pick(a, ia, b, ib):
            return tl.maximum(a, b)
        """,
        "tl.associative_scan((x, i), 0, pick)",
    )
    e = err(src)
    assert e.message == "tl.associative_scan: the combine function returns 1 value, but 2 inputs need 2"
    assert e.line == line_of(src, "r = tl.associative_scan")


def test_returned_types_must_match_the_inputs() -> None:
    src = with_combine(
        """
        @triton.jit
        def halve(a, b):
            return (a + b) / 2
        """,
        "tl.reduce(i, 0, halve)",
    )
    e = err(src)
    assert e.message == (
        "tl.reduce: the combine function returns fp32 for input 0, whose elements are i32; cast it to match"
    )


@pytest.mark.parametrize(
    "body,needle,what",
    [
        ("    tl.device_assert(a == a)\n    return a + b", "tl.device_assert", "'assert' is not allowed"),
        (
            "    if a > b:\n        tl.debug_barrier()\n    return a + b",
            "tl.debug_barrier",
            "'barrier' is not allowed",
        ),
        (
            "    return a + tl.sum(tl.arange(0, 4), 0)",
            "tl.arange(0, 4)",
            "makes or takes the tile tile<4xi32>",
        ),
    ],
    ids=["assert", "barrier-in-if", "tile"],
)
def test_constructs_a_combine_cannot_hold_are_located_inside_it(body: str, needle: str, what: str) -> None:
    src = f"@triton.jit\ndef bad(a, b):\n{body}\n" + KERNEL.format(call="tl.reduce(x, 0, bad)")
    e = err(src)
    assert isinstance(e, UnsupportedSyntaxError)
    assert e.message.startswith("combine function 'bad': ") and what in e.message, e.message
    assert e.line == line_of(src, needle)


def test_a_helper_the_combine_calls_is_checked_too() -> None:
    src = (
        "@triton.jit\ndef _clip(a):\n    for j in range(3):\n        tl.device_assert(a > j)\n    return a\n\n\n"
        "@triton.jit\ndef bad(a, b):\n    return _clip(a) + b\n"
        + KERNEL.format(call="tl.associative_scan(x, 0, bad)")
    )
    e = err(src)
    assert e.message.startswith("combine function 'bad': 'assert' is not allowed")
    assert e.line == line_of(src, "tl.device_assert")


def test_combine_fn_must_be_a_function_and_inputs_of_one_shape() -> None:
    e = err(KERNEL.format(call="tl.reduce(x, 0, 3)"))
    assert e.message == "tl.reduce combine_fn must be a @triton.jit function, got constant 3"
    src = with_combine(
        """
        @triton.jit
        def first(a, ia, b, ib):
            return a, ia
        """,
        "tl.reduce((x, tl.arange(0, 4)), 0, first)",
    )
    assert "inputs must have one shape, got [[8], [4]]" in err(src).message


def test_a_library_function_as_combine_fn() -> None:
    m = build(KERNEL.format(call="tl.reduce(x, 0, tl.maximum)") + "    tl.store(x_ptr, r)\n")
    text = print_module(m)
    assert "reduce_with" in text and "maximum" in text
    x = np.array([3, -1, 7, 2, 7, 0, -5, 1], np.float32)
    run_kernel(m, "k", [x, np.zeros(8, np.int32)], (1,))
    assert x[0] == 7


def test_method_forms() -> None:
    src = with_combine(
        """
        @triton.jit
        def keep_first(a, b):
            return a
        """,
        "x.reduce(0, keep_first)",
    )
    src += "    tl.store(x_ptr + tl.arange(0, N), x.associative_scan(0, keep_first, reverse=True) + r)\n"
    m = build(src)
    x = np.arange(8, dtype=np.float32) + 1
    run_kernel(m, "k", [x, np.zeros(8, np.int32)], (1,))
    assert x.tolist() == [9.0] * 8  # the last element (reverse scan of keep-first) plus the first

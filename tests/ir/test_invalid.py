"""Malformed IR text ends in a located CompileError (VerifyError for ill-typed IR), never another exception."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilec.compiler.errors import CompileError, VerifyError
from tilec.compiler.ir import parse_module, print_module, verify_module

from .random_modules import modules

H = "module {\n  kernel @k(%x: ptr<f32>, %n: i32, %b: i1) {\n"
T = "    return\n  }\n}\n"

# name: (text, error class, message, line, col)
CASES = {
    "unknown op": (H + "    %0 = frobnicate %n : i32\n" + T, CompileError, "unknown op 'frobnicate'", 3, 10),
    "undefined value": (
        H + "    %0 = add %n, %zz : i32\n" + T,
        CompileError,
        "use of undefined value %zz",
        3,
        18,
    ),
    "value defined twice": (
        H + "    %0 = add %n, %n : i32\n    %0 = add %n, %n : i32\n" + T,
        CompileError,
        "value %0 is defined twice",
        4,
        5,
    ),
    "wrong operand types": (
        H + "    %c = constant {value = 1.0} : f32\n    %0 = add %n, %c : i32\n" + T,
        VerifyError,
        "'add' operand type f32 differs from result type i32",
        4,
        10,
    ),
    "missing return": (
        "module {\n  kernel @k(%n: i32) {\n    %0 = add %n, %n : i32\n  }\n}\n",
        VerifyError,
        "function @k must end with 'return'",
        2,
        3,
    ),
    "missing yield": (
        H + "    %0 = if %b : i32 {\n      %a = add %n, %n : i32\n    } {\n      yield %n\n    }\n" + T,
        VerifyError,
        "'if' region 0 must end with 'yield'",
        3,
        10,
    ),
    "terminator in the middle": (
        H + "    return\n    %0 = add %n, %n : i32\n" + T,
        VerifyError,
        "'return' is a terminator but is not last",
        3,
        5,
    ),
    "yield outside a region": (
        H + "    yield\n" + T,
        VerifyError,
        "'yield' may only end the region of a for, if, while, reduce_with or scan_with",
        3,
        5,
    ),
    "attribute of the wrong kind": (
        H + '    %0 = program_id {axis = "x"} : i32\n' + T,
        VerifyError,
        "attribute 'axis' has the wrong kind",
        3,
        10,
    ),
    "unknown attribute": (
        H + "    %0 = program_id {axis = 0, color = 1} : i32\n" + T,
        VerifyError,
        "has unknown attribute 'color'",
        3,
        10,
    ),
    "missing attribute": (
        H + "    %0 = program_id : i32\n" + T,
        VerifyError,
        "'program_id' needs attribute 'axis'",
        3,
        10,
    ),
    "attribute given twice": (
        H + "    %0 = program_id {axis = 0, axis = 1} : i32\n" + T,
        CompileError,
        "attribute 'axis' given twice",
        3,
        32,
    ),
    "bad predicate": (
        H + '    %0 = cmp %n, %n {pred = "lol"} : i1\n' + T,
        VerifyError,
        "unknown predicate 'lol'",
        3,
        10,
    ),
    "bad string escape": (
        H + '    %0 = cmp %n, %n {pred = "l\\q"} : i1\n' + T,
        CompileError,
        "bad string literal",
        3,
        29,
    ),
    "zero tile dimension": (
        H + "    %0 = splat %n : tile<0x4xi32>\n" + T,
        CompileError,
        "tile shape must have positive dimensions",
        3,
        21,
    ),
    "bad tile shape": (H + "    %0 = splat %n : tile<4xyxi32>\n" + T, CompileError, "bad tile shape", 3, 21),
    "unknown element type": (
        H + "    %0 = splat %n : tile<4xq32>\n" + T,
        CompileError,
        "unknown element type 'q32'",
        3,
        21,
    ),
    "unknown type": (
        "module {\n  kernel @k(%n: i33) {\n    return\n  }\n}\n",
        CompileError,
        "unknown type 'i33'",
        2,
        17,
    ),
    "pointer to a pointer": (
        "module {\n  kernel @k(%p: ptr<ptr<f32>>) {\n    return\n  }\n}\n",
        CompileError,
        "pointers point to scalars",
        2,
        17,
    ),
    "range not a power of two": (
        H + "    %0 = make_range {end = 6, start = 0} : tile<6xi32>\n" + T,
        VerifyError,
        "range length 6 must be a positive power of two",
        3,
        10,
    ),
    "bad broadcast": (
        H + "    %s = splat %n : tile<2x4xi32>\n    %0 = broadcast %s : tile<4x4xi32>\n" + T,
        VerifyError,
        "cannot broadcast shape [2, 4] to [4, 4]",
        4,
        10,
    ),
    "trans order not ints": (
        H + '    %s = splat %n : tile<2x4xi32>\n    %0 = trans %s {order = ["a", 1]} : tile<4x2xi32>\n' + T,
        VerifyError,
        "is not a permutation of 2 axes",
        4,
        10,
    ),
    "dot shapes": (
        H
        + "    %a = splat %x : tile<2x4xptr<f32>>\n    %l = load %a : tile<2x4xf32>\n    %0 = dot %l, %l, %l : tile<2x4xf32>\n"
        + T,
        VerifyError,
        "'dot' inner dimensions differ: [2, 4] x [2, 4]",
        5,
        10,
    ),
    "load through a non-pointer": (
        H + "    %0 = load %n : i32\n" + T,
        VerifyError,
        "'load' loads through pointers, got i32",
        3,
        10,
    ),
    "store of the wrong type": (
        H + "    store %x, %n\n" + T,
        VerifyError,
        "'store' value must be f32, got i32",
        3,
        5,
    ),
    "mask of the wrong shape": (
        H + "    %0 = load %x, %n : f32\n" + T,
        VerifyError,
        "mask must be i1 of shape []",
        3,
        10,
    ),
    "if on an integer": (
        H + "    if %n {\n      yield\n    } {\n      yield\n    }\n" + T,
        VerifyError,
        "'if' condition must be i1, got i32",
        3,
        5,
    ),
    "for bounds of two types": (
        H
        + "    %c = constant {value = 1} : i64\n    for %n, %n, %c {\n    ^(%i: i32):\n      yield\n    }\n"
        + T,
        VerifyError,
        "bounds must be integer scalars of one type",
        4,
        5,
    ),
    "call of an unknown function": (
        H + '    call {callee = "nope"}\n' + T,
        VerifyError,
        "calls unknown function @nope",
        3,
        5,
    ),
    "call with wrong arguments": (
        'module {\n  func @f(%a: f32) {\n    return\n  }\n\n  kernel @k(%n: i32) {\n    call %n {callee = "f"}\n    return\n  }\n}\n',
        VerifyError,
        "passes ['i32'] to @f, which takes ['f32']",
        7,
        5,
    ),
    "return of the wrong type": (
        "module {\n  func @f(%a: f32) -> i32 {\n    return %a\n  }\n}\n",
        VerifyError,
        "returns ['f32'], @f is declared to return ['i32']",
        3,
        5,
    ),
    "function defined twice": (
        "module {\n  func @f() {\n    return\n  }\n\n  func @f() {\n    return\n  }\n}\n",
        CompileError,
        "function @f is defined twice",
        6,
        3,
    ),
    "results and types disagree": (
        H + "    %0, %1 = add %n, %n : i32\n" + T,
        CompileError,
        "'add' names 2 results but gives 1 types",
        3,
        5,
    ),
    "operand count": (H + "    %0 = add %n : i32\n" + T, VerifyError, "'add' takes 2 operands, got 1", 3, 10),
    "unexpected character": (
        H + "    %0 = add %n, %n : i32 ;\n" + T,
        CompileError,
        "unexpected character ';'",
        3,
        27,
    ),
    "truncated text": (
        H + "    %0 = add %n, %n : i32\n    %1 = mul %0,",
        CompileError,
        "expected a value, got end of input",
        4,
        17,
    ),
    "block pointer box without its strides": (
        H + "    %p = splat %x : tile<4xptr<f32>>\n    %w = constant {value = 4} : i64\n"
        "    %0 = desc_box %p, %n, %x, %w : tile<4xptr<f32>>\n" + T,
        VerifyError,
        "'desc_box' of a block pointer needs the base, 1 shape and 1 stride values after the coordinates",
        5,
        10,
    ),
    "block pointer box of another base type": (
        H + "    %p = splat %x : tile<4xptr<f32>>\n    %w = constant {value = 4} : i64\n"
        "    %0 = desc_box %p, %n, %w, %w, %w : tile<4xptr<f32>>\n" + T,
        VerifyError,
        "'desc_box' base i64 is not the scalar pointer of tile<4xptr<f32>>",
        5,
        10,
    ),
    "descriptor box with a recipe": (
        H + "    %p = splat %x : tile<4xptr<f32>>\n    %w = constant {value = 4} : i64\n"
        '    %0 = desc_box %p, %n, %x, %w, %w {desc = "x"} : tile<4xptr<f32>>\n' + T,
        VerifyError,
        "'desc_box' of a host descriptor (desc) takes only the pointer tile and the coordinates",
        5,
        10,
    ),
    "text after the module": (H + T + "junk\n", CompileError, "unexpected 'junk' after the module", 6, 1),
    "empty text": ("", CompileError, "expected 'module', got end of input", 1, 1),
    "nested attribute lists": (
        H + "    %0 = constant {value = " + "[" * 40 + "]" * 40 + "} : i32\n" + T,
        CompileError,
        "nested deeper than",
        3,
        45,
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_invalid_ir_gives_a_located_error(name):
    text, cls, message, line, col = CASES[name]
    with pytest.raises(CompileError) as info:
        verify_module(parse_module(text, "bad.tir"))
    err = info.value
    assert isinstance(err, cls), type(err)
    assert message in err.message
    assert (err.filename, err.line, err.col) == ("bad.tir", line, col)
    assert str(err).startswith(f"bad.tir:{line}:{col}: ")
    assert "compiler/" not in str(err) and ".py" not in str(err)


def test_deep_pointer_nesting_is_an_error_not_a_crash():
    text = "module {\n  kernel @k(%p: " + "ptr<" * 5000 + "f32" + ">" * 5000 + ") {\n    return\n  }\n}\n"
    with pytest.raises(CompileError, match="pointers point to scalars"):
        parse_module(text)


def test_deep_region_nesting_is_an_error_not_a_crash():
    body = "    if %b {\n" * 300 + "    yield\n    } {\n    yield\n    }\n" * 300
    with pytest.raises(CompileError, match="nested deeper than"):
        parse_module(H + body + T)


PIECES = [
    "%0", "%n", "x", "tile<4x", "{", "}", "->", "ptr<", "i1", "f32", "0", "-1", "1e400", '"', "[", "]", "=", ":",
    "^(", "nan", "yield", "return", "for", "load", "@k", "kernel", "99999999999999999999", ",", "<", ">", "(", ")",
]  # fmt: skip


def _mutate(text: str, data) -> str:
    toks = text.split(" ")
    for _ in range(data.draw(st.integers(1, 4))):
        if not toks:
            break
        i = data.draw(st.integers(0, len(toks) - 1))
        how = data.draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "truncate"]))
        if how == "delete":
            del toks[i]
        elif how == "duplicate":
            toks.insert(i, toks[i])
        elif how == "swap":
            j = data.draw(st.integers(0, len(toks) - 1))
            toks[i], toks[j] = toks[j], toks[i]
        elif how == "replace":
            toks[i] = data.draw(st.sampled_from(PIECES))
        else:
            toks = toks[:i]
    return " ".join(toks)


FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(modules(max_stmts=6), st.data())
def test_mutated_valid_ir_only_raises_compile_errors(m, data):
    bad = _mutate(print_module(m), data)
    try:
        verify_module(parse_module(bad))
    except CompileError:
        pass


@FUZZ
@given(
    st.lists(
        st.sampled_from([*PIECES, *'module{}kernelfunc@%0123456789xtile<>ptr=:,()[]^ \n"-.e']), max_size=120
    ).map("".join)
)
def test_random_garbage_only_raises_compile_errors(text):
    try:
        verify_module(parse_module(text))
    except CompileError:
        pass

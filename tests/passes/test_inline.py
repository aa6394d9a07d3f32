"""inline: errors for recursion and for call trees that would blow up the module."""

from __future__ import annotations

import pytest

from tilec.compiler.errors import CompileError
from tilec.compiler.ir import parse_module, verify_module
from tilec.compiler.passes import PassManager


def _doubling_chain(levels: int) -> str:
    funcs = ["  func @f0(%a: i32) -> i32 {\n    %r = add %a, %a : i32\n    return %r\n  }"]
    for i in range(1, levels):
        funcs.append(f"  func @f{i}(%a: i32) -> i32 {{\n    %x = call %a {{callee = \"f{i - 1}\"}} : i32\n"
                     f"    %y = call %x {{callee = \"f{i - 1}\"}} : i32\n    return %y\n  }}")
    funcs.append(f"  kernel @k(%p: ptr<i32>, %v: i32) {{\n    %r = call %v {{callee = \"f{levels - 1}\"}} : i32\n"
                 "    store %p, %r\n    return\n  }")
    return "module {\n" + "\n\n".join(funcs) + "\n}\n"


def test_small_tree_inlines_fully() -> None:
    m = parse_module(_doubling_chain(4))
    PassManager.from_names(["inline"]).run(m)
    assert [f.name for f in m.functions] == ["k"]
    assert sum(op.name == "add" for op in m.walk()) == 8


def test_exponential_tree_is_refused() -> None:
    m = parse_module(_doubling_chain(40))
    verify_module(m)
    with pytest.raises(CompileError, match="grows it past"):
        PassManager.from_names(["inline"]).run(m)


def test_self_recursion_is_located() -> None:
    text = """module {
  func @f(%a: i32) -> i32 {
    %x = call %a {callee = "f"} : i32
    return %x
  }

  kernel @k(%p: ptr<i32>) {
    return
  }
}
"""
    with pytest.raises(CompileError, match="recursive call to @f") as e:
        PassManager.from_names(["inline"]).run(parse_module(text))
    assert (e.value.line, e.value.col) == (3, 10)

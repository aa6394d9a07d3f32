"""The kernel key, as the service computes it for each kind of input: source by its syntax tree
(comments, formatting and docstrings do not count), tile IR by its canonical text (comments and
spacing do not count); a change of meaning changes either."""

from __future__ import annotations

from pathlib import Path

from tilec.compiler.pipeline import compile_kernel
from tilec.server.worker import analyze

SOURCE = (Path(__file__).parent / "kernels" / "vector_add.py").read_text()
SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
BUDGETS: dict = {}


def _key(kind: str, text: str) -> str:
    return analyze(kind=kind, text=text, name=None, budgets=BUDGETS, signature=None)["key"]


def test_source_key_ignores_comments_and_formatting() -> None:
    reformatted = SOURCE.replace("    x = tl.load(", "    # loads\n    x  =  tl.load(").replace("\n\n", "\n\n\n")
    assert reformatted != SOURCE and _key("source", reformatted) == _key("source", SOURCE)
    assert _key("source", SOURCE.replace("x + y", "x - y")) != _key("source", SOURCE)


def test_ir_key_is_the_hash_of_the_canonical_ir() -> None:
    ir = compile_kernel(SOURCE, "add_kernel", signature=SIGNATURE, constexprs={"BLOCK_SIZE": 64}, emit="tir").tir
    spaced = "// a comment\n" + ir.replace(" = ", "  =  ").replace("\n", "\n\n")
    assert _key("ir", spaced) == _key("ir", ir)
    assert "add %10, %13" in ir and _key("ir", ir.replace("add %10, %13", "sub %10, %13")) != _key("ir", ir)
    # the two kinds of input are keyed in two spaces: the source's IR depends on its specialisation
    assert _key("ir", ir) != _key("source", SOURCE)

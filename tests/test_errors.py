"""One exception tree: every error tilec raises on purpose derives from tilec.TilecError (defined at the bottom
of the layers, compiler/errors.py), the compiler's CompileError and ToolError included; no two exception
classes share a name, so `LaunchError` and `KernelAssertionError` mean one thing each."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import tilec
from tilec.compiler.errors import CompileError, TilecError, ToolError
from tilec.compiler.interp import InterpAssertionError, MemoryFault
from tilec.compiler.tune.launch import LaunchDescriptionError
from tilec.runtime import errors as runtime_errors

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("tilec", "compiler", "runtime", "server", "client")


def test_the_compilers_errors_stand_under_the_public_root() -> None:
    assert tilec.TilecError is TilecError is runtime_errors.TilecError
    for cls in (CompileError, ToolError, LaunchDescriptionError, InterpAssertionError, MemoryFault):
        assert issubclass(cls, tilec.TilecError), cls
    assert issubclass(LaunchDescriptionError, ValueError)  # callers that catch ValueError still do
    assert not issubclass(
        LaunchDescriptionError, tilec.LaunchError
    )  # a bad description is not a failed launch


def test_every_public_error_is_a_tilec_error() -> None:
    errors = [getattr(tilec, n) for n in tilec.__all__ if n.endswith(("Error", "Unavailable"))]
    assert len(errors) > 15
    assert [e.__name__ for e in errors if not issubclass(e, tilec.TilecError)] == []


def _exception_classes() -> dict[str, list[str]]:
    """Class definitions that name an exception (by their bases' names, transitively within the sources)."""
    defs: list[tuple[str, list[str], str]] = []
    for part in PARTS:
        for path in sorted((ROOT / part).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef):
                    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
                    defs.append((node.name, bases, str(path.relative_to(ROOT))))
    known = {"Exception", "ValueError", "RuntimeError", "TypeError", "LookupError", "OSError", "KeyError"}
    changed = True
    while changed:
        changed = False
        for name, bases, _ in defs:
            if name not in known and known.intersection(bases):
                known.add(name)
                changed = True
    where: dict[str, list[str]] = defaultdict(list)
    for name, bases, path in defs:
        if known.intersection(bases):
            where[name].append(path)
    return where


def test_no_two_exception_classes_share_a_name() -> None:
    where = _exception_classes()
    assert "LaunchError" in where and "CompileError" in where  # the scan sees the tree
    assert {n: p for n, p in where.items() if len(p) > 1} == {}


def test_the_description_error_is_imported_by_its_name() -> None:
    """compiler/tune/launch.py's raises call it LaunchError locally; every other module imports it as
    LaunchDescriptionError, so `LaunchError` elsewhere is always the runtime's."""
    wrong = []
    for part in (*PARTS, "tests", "bench"):
        for path in sorted((ROOT / part).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("tune.launch"):
                    wrong += [
                        f"{path.relative_to(ROOT)}:{node.lineno}"
                        for a in node.names
                        if a.name == "LaunchError"
                    ]
    assert wrong == []

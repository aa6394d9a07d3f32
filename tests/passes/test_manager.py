"""The pass registries (the machine-independent one and each backend's), the pass manager (pipelines,
options, verification, dumps, timing) and tilec-opt."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from tilec.compiler.backends import KINDS, backend, backend_passes
from tilec.compiler.errors import CompileError, VerifyError
from tilec.compiler.ir import parse_module, print_module, verify_module
from tilec.compiler.passes import PASSES, PassManager, make_pass, pipeline
from tilec.compiler.passes.manager import split_pass_list
from tilec.compiler.tools.opt import main as opt_main

IR = """module {
  kernel @k(%p: ptr<i32>, %x: i32) {
    %0 = constant {value = 2} : i32
    %1 = constant {value = 3} : i32
    %2 = add %0, %1 : i32
    %3 = mul %x, %2 : i32
    %4 = mul %x, %2 : i32
    %5 = add %3, %4 : i32
    store %p, %5
    return
  }
}
"""


@pytest.mark.parametrize("name", sorted(PASSES))
def test_registry_names_match_classes(name: str) -> None:
    cls = PASSES[name]
    assert cls.name == name
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    assert cls.__doc__ and callable(cls.apply)


@pytest.mark.parametrize("name", sorted(backend_passes()))
def test_backend_registry_names_match_classes(name: str) -> None:
    cls = backend_passes()[name]
    assert cls.name == name and name not in PASSES
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
    assert cls.__doc__ and callable(cls.apply)


@pytest.mark.parametrize("name", sorted({**PASSES, **backend_passes()}))
def test_every_pass_has_a_golden_test(name: str) -> None:
    golden = Path(__file__).resolve().parents[1] / "filecheck" / "passes" / f"{name}.tir"
    assert golden.is_file() and f"-p {name}" in golden.read_text().replace("'", "").split("\n", 1)[0]


def test_every_backend_has_passes_and_stages() -> None:
    for kind in KINDS:
        pkg = backend(kind)
        names = [n for n, _ in pkg.stages()]
        assert names[0] == "tir" and isinstance(pkg.PASSES, dict)
    assert {"gpu-dot-acc", "gpu-layout", "gpu-pipeline"} <= set(backend("cuda").PASSES)
    assert backend("tpu") is None


def test_pipeline_and_passes_load_no_backend() -> None:
    """The passes never import a backend, and the pipeline imports one (llvmlite and all) only when a
    compile for its target runs."""
    code = ("import sys, tilec.compiler.passes, tilec.compiler.pipeline, tilec.compiler.tir\n"
            "print(sorted(m for m in sys.modules if m.startswith(('tilec.compiler.backends.', 'llvmlite'))))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_opt_runs_backend_passes(tmp_path, capsys) -> None:
    f = tmp_path / "k.tir"
    f.write_text(IR)
    assert opt_main([str(f), "-p", "gpu-layout{num_warps=8}"]) == 0
    assert "{gpu.num_warps = 8}" in capsys.readouterr().out
    with pytest.raises(CompileError, match="unknown pass 'gpu-layout'"):
        make_pass("gpu-layout")  # the machine-independent registry alone does not know it


def test_default_pipeline_runs_known_passes() -> None:
    names = pipeline("default")
    assert names[0] == "inline" and names[-1] == "dce"
    assert all(n in PASSES for n in names)
    with pytest.raises(CompileError, match="unknown pipeline"):
        pipeline("nope")


def test_manager_runs_and_records_timing() -> None:
    m = parse_module(IR)
    out = io.StringIO()
    pm = PassManager.from_names(["default"], timing=True, stream=out)
    pm.run(m)
    text = print_module(m)
    assert "constant {value = 5}" in text and text.count("mul") == 1
    assert [n for n, _ in pm.timings] == pipeline("default")
    assert "total" in out.getvalue() and "cse" in out.getvalue()


def test_print_ir_after() -> None:
    out = io.StringIO()
    PassManager.from_names(["canonicalize", "cse"], print_ir_after=["cse"], stream=out).run(parse_module(IR))
    assert out.getvalue().count("IR after") == 1 and "IR after cse" in out.getvalue()
    out = io.StringIO()
    PassManager.from_names(["canonicalize", "cse"], print_ir_after_all=True, stream=out).run(parse_module(IR))
    assert out.getvalue().count("IR after") == 2


def test_pass_options() -> None:
    p = make_pass("canonicalize{max_iterations=3}")
    assert p.max_iterations == 3
    assert split_pass_list("a,b{x=1,y=2}, c") == ["a", "b{x=1,y=2}", "c"]
    for bad, msg in [("nope", "unknown pass"), ("cse{x=1}", "no option"),
                     ("canonicalize{max_iterations=many}", "needs a int"), ("cse{x", "bad pass spec")]:
        with pytest.raises(CompileError, match=msg):
            make_pass(bad)


@dataclass(frozen=True)
class _BreakingPass:
    """Makes an op use a value defined after it."""

    name: ClassVar[str] = "break"

    def apply(self, module) -> None:
        ops = module.functions[0].body.block.ops
        ops[0], ops[2] = ops[2], ops[0]


def test_broken_ir_names_the_pass() -> None:
    m = parse_module(IR)
    with pytest.raises(VerifyError, match="after pass 'break'"):
        PassManager([_BreakingPass()]).run(m)


def test_opt_roundtrip_and_errors(tmp_path, capsys) -> None:
    f = tmp_path / "k.tir"
    f.write_text(IR)
    assert opt_main([str(f)]) == 0
    out = capsys.readouterr().out
    assert out == IR
    verify_module(parse_module(out))
    assert opt_main([str(f), "-p", "canonicalize,cse,dce"]) == 0
    assert capsys.readouterr().out.count("mul") == 1
    f.write_text(IR.replace("%5 = add %3, %4", "%5 = add %3, %9"))
    assert opt_main([str(f)]) == 1
    assert "undefined value %9" in capsys.readouterr().err
    assert opt_main([str(f), "-p", "bogus"]) == 1
    assert opt_main([str(tmp_path / "missing.tir")]) == 1


def test_opt_split_input_file_keeps_going(tmp_path, capsys) -> None:
    f = tmp_path / "k.tir"
    f.write_text(IR + "// -----\nmodule {\n  bad\n}\n// -----\n" + IR)
    assert opt_main([str(f), "--split-input-file"]) == 1
    cap = capsys.readouterr()
    assert cap.out.count("kernel @k") == 2
    assert ":15:3:" in cap.err  # the line number is the line in the whole file


def test_opt_reads_stdin_and_dumps(monkeypatch, capsys) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(IR))
    assert opt_main(["-", "-p", "canonicalize,cse", "--print-ir-after-all", "--timing"]) == 0
    cap = capsys.readouterr()
    assert cap.out.count("mul") == 1
    assert "IR after canonicalize" in cap.err and "IR after cse" in cap.err and "total" in cap.err

"""`tilec compile` and `tilec ir`: output on success, a located error and exit 1 (no traceback) on failure."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tilec.client._cli_compile import register

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
app = typer.Typer()
register(app)
runner = CliRunner()
ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n_elements=i32"


def test_compile_emits_tir() -> None:
    r = runner.invoke(app, ["compile", str(KERNELS / "vector_add.py"), "--signature", ADD_SIG,
                            "--constexpr", "BLOCK_SIZE=64"])
    assert r.exit_code == 0, r.output
    assert "kernel @add_kernel(%x_ptr: ptr<f32>" in r.stdout and "tile<64xf32>" in r.stdout


def test_compile_with_dtypes_and_config(tmp_path: Path) -> None:
    out = tmp_path / "mm.tir"
    sig = "M=i32,N=i32,K=i32,stride_am=i32,stride_ak=i32,stride_bk=i32,stride_bn=i32,stride_cm=i32,stride_cn=i32"
    r = runner.invoke(app, ["compile", str(KERNELS / "matmul.py"), "--kernel", "matmul_kernel", "--signature", sig,
                            "--dtype", "a_ptr=*fp16", "--dtype", "b_ptr=*fp16", "--dtype", "c_ptr=*fp16",
                            "--config", "BLOCK_SIZE_M=32,BLOCK_SIZE_N=32,BLOCK_SIZE_K=16,GROUP_SIZE_M=2,num_warps=4",
                            "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "tile<32x16xf16>" in out.read_text()


def test_compile_error_is_located_without_traceback(tmp_path: Path) -> None:
    src = tmp_path / "bad.py"
    src.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n"
                   "    x = tl.load(x_ptr + tl.arange(0, 8))\n    tl.dot(x, x)\n")
    r = runner.invoke(app, ["compile", str(src), "--signature", "x_ptr=*fp32"])
    assert r.exit_code == 1
    assert f"{src}:7:5: tl.dot needs 2-D tiles, got shape [8]" in r.output
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["compile", str(src), "--signature", "x_ptr"])
    assert r.exit_code == 1 and "expected NAME=VALUE" in r.output
    r = runner.invoke(app, ["compile", str(tmp_path / "missing.py")])
    assert r.exit_code == 1 and "cannot read" in r.output


def test_ir_runs_passes(tmp_path: Path) -> None:
    f = tmp_path / "k.tir"
    f.write_text("module {\n  kernel @k(%x: ptr<f32>) {\n    %0 = constant {value = 1.0} : f32\n"
                 "    %1 = constant {value = 1.0} : f32\n    %2 = add %0, %1 : f32\n    store %x, %0\n    return\n  }\n}\n")
    r = runner.invoke(app, ["ir", str(f), "--passes", "dce"])
    assert r.exit_code == 0, r.output
    assert "add" not in r.stdout and "store" in r.stdout
    r = runner.invoke(app, ["ir", str(f), "--passes", "no-such-pass"])
    assert r.exit_code == 1 and "unknown pass" in r.output and "Traceback" not in r.output
    f.write_text("module {\n  kernel @k( {\n")
    r = runner.invoke(app, ["ir", str(f)])
    assert r.exit_code == 1 and "Traceback" not in r.output


ACC_STEPS = (KERNELS / "static_range_acc.py").read_text()


def test_compile_long_unrolled_kernel_for_cuda(tmp_path: Path) -> None:
    """400 unrolled steps once ran the cuda lowering out of Python recursion (a raw traceback)."""
    src = tmp_path / "acc.py"
    src.write_text(ACC_STEPS)
    r = runner.invoke(app, ["compile", str(src), "--signature", "x_ptr=*fp32,out_ptr=*fp32,n=i32",
                            "--constexpr", "BLOCK=128", "--constexpr", "STEPS=400", "--target", "cuda:sm_90",
                            "--emit", "ptx"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert ".entry acc_kernel" in r.stdout


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (RecursionError("maximum recursion depth exceeded"),
         "error: the kernel nests too deeply to compile (out of recursion depth)"),
        (KeyError("some value"), "internal compiler error (KeyError: 'some value'); please report it"),
    ],
)
def test_internal_error_is_one_line_without_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: Exception, message: str
) -> None:
    """A compiler bug (the backend raising something other than CompileError) is one line and exit 1."""
    import tilec.compiler.pipeline as pipeline

    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(pipeline, "compile_kernel", broken)
    src = tmp_path / "acc.py"
    src.write_text(ACC_STEPS)
    r = runner.invoke(app, ["compile", str(src), "--signature", "x_ptr=*fp32,out_ptr=*fp32,n=i32",
                            "--constexpr", "BLOCK=128", "--constexpr", "STEPS=2", "--emit", "llir"])  # fmt: skip
    assert r.exit_code == 1
    assert isinstance(r.exception, SystemExit), r.exception
    assert r.output.strip() == f"{src}: {message}"
    assert "Traceback" not in r.output and "pipeline.py" not in r.output

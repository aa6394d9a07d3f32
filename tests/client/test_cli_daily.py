"""The command line's rough edges, each as a user meets it: help texts that read whole (the module's
first sentence included, syntax blocks line by line at 80 columns), `tilec --version`, a bad --target or
an unwritable -o refused in one line, an incomplete tune signature or a grid naming an unknown name as
bad input (exit 2), local tuning for a GPU this machine lacks explained, `import tilec`'s public names."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

import tilec
from tilec.cli import _register_all, app
from tilec.client import _cli_compile, _cli_ls, _cli_pull, _cli_tune

from .test_cli_tune import LAUNCH, SIG, files, no_traceback  # noqa: F401 - files: fixture

_register_all()
runner = CliRunner()


def tilec_cli(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"TILEC_URL": None, "TILEC_TOKEN": None, "COLUMNS": "80"})


def words(text: str) -> str:
    """The help as words: rich's panel borders and its wrapping undone."""
    return " ".join(text.replace("│", " ").split())


@pytest.mark.parametrize(
    ("command", "module"),
    [("ls", _cli_ls), ("show", _cli_ls), ("lookup", _cli_ls), ("tune", _cli_tune), ("pull", _cli_pull)],
)
def test_help_carries_the_module_text_from_its_first_sentence(command: str, module: object) -> None:
    r = tilec_cli(command, "--help")
    assert r.exit_code == 0, r.output
    first_paragraph = module.__doc__.split("\n\n")[0]
    assert words(first_paragraph) in words(r.stdout), r.stdout


def test_compile_help_keeps_its_syntax_block_line_by_line() -> None:
    r = tilec_cli("compile", "--help")
    assert r.exit_code == 0, r.output
    printed = [line.strip() for line in r.stdout.splitlines()]
    block = _cli_compile.__doc__.split("Argument syntax of `tilec compile`:\n", 1)[1]
    for line in filter(None, (line.strip() for line in block.splitlines())):
        assert line in printed, f"{line!r} was re-wrapped:\n{r.stdout}"


def test_version() -> None:
    r = tilec_cli("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"tilec {tilec.__version__}"


def test_compile_refuses_an_unknown_target_and_an_unwritable_output(
    files: Callable[..., tuple[Path, Path]],  # noqa: F811
    tmp_path: Path,
) -> None:
    kernel, _ = files()
    args = ("compile", str(kernel), "--signature", SIG, "--constexpr", "BLOCK=64")
    assert tilec_cli(*args).exit_code == 0
    r = tilec_cli(*args, "--target", "foo")
    assert r.exit_code == 1 and r.stderr.startswith("tilec: --target: unknown target 'foo'") and not r.stdout
    no_traceback(r)
    r = tilec_cli(*args, "-o", str(tmp_path / "missing" / "out.tir"))
    assert r.exit_code == 1 and r.stderr == f"tilec: cannot write {tmp_path / 'missing' / 'out.tir'}: " \
        "No such file or directory\n", r.stderr  # fmt: skip
    no_traceback(r)


def test_tune_incomplete_signature_is_bad_input_naming_the_parameters(
    files: Callable[..., tuple[Path, Path]],  # noqa: F811
) -> None:
    kernel, launch = files()
    r = tilec_cli("tune", str(kernel), "--signature", "x_ptr=*fp32,n=i32", "--launch", str(launch))
    assert r.exit_code == 2, r.output
    assert "--signature: no type for y_ptr, out_ptr of vadd" in r.stderr and "None" not in r.stderr, r.stderr
    no_traceback(r)


def test_tune_grid_with_an_unknown_name_is_bad_input(files: Callable[..., tuple[Path, Path]]) -> None:  # noqa: F811
    kernel, launch = files(launch=LAUNCH.replace("cdiv(n, BLOCK)", "cdiv(n, BLOK)"))
    r = tilec_cli("tune", str(kernel), "--signature", SIG, "--launch", str(launch))
    assert r.exit_code == 2, r.output
    assert f"{launch}: grid[0]: unknown name 'BLOK'" in r.stderr and not r.stdout, r.stderr
    no_traceback(r)


def test_local_tune_for_a_gpu_this_machine_lacks_says_so(files: Callable[..., tuple[Path, Path]]) -> None:  # noqa: F811
    from tilec.runtime.cuda import device_sm

    try:
        here = device_sm(0)
    except Exception:  # noqa: BLE001 - no GPU: the case the message is for
        here = None
    target = "cuda:sm_90" if here != 90 else "cuda:sm_80"
    kernel, launch = files()
    r = tilec_cli("tune", str(kernel), "--signature", SIG, "--launch", str(launch), "--target", target)
    assert r.exit_code == 1, r.output
    assert f"tilec: tuning for {target} on this machine needs" in r.stderr, r.stderr
    assert "--server" in r.stderr and f"tilec worker --target {target}" in r.stderr
    assert "internal compiler error" not in r.stderr and "please report" not in r.stderr
    no_traceback(r)


def test_import_tilec_lists_only_its_public_names() -> None:
    code = "import tilec; print(' '.join(n for n in dir(tilec) if not n.startswith('_')))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == sorted(tilec.__all__)

"""Frontend golden tests with the CHECK lines inside the kernel (docs/STYLE.md #6): each file in
tests/frontend/filecheck/ names its signature and constexprs in header comments; it is compiled and
its printed IR is checked against its own `# CHECK:` lines with the `filecheck` package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tilec.compiler.frontend import build_ir, read_kernel
from tilec.compiler.ir import print_module

HERE = Path(__file__).parent / "filecheck"
FILECHECK = Path(sys.executable).parent / "filecheck"


def _header(text: str, key: str) -> dict[str, object]:
    for line in text.splitlines():
        if line.startswith(f"# {key}:"):
            items = [kv.split("=", 1) for kv in line.split(":", 1)[1].strip().split(",") if kv]
            return {k.strip(): _value(v.strip()) for k, v in items}
    return {}


def _value(v: str) -> object:
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(v, v)


@pytest.mark.parametrize("path", sorted(HERE.glob("*.py")), ids=lambda p: p.stem)
def test_frontend_filecheck(path: Path) -> None:
    text = path.read_text()
    ks = read_kernel(text, filename=path.name)
    ir = print_module(build_ir(ks, _header(text, "SIGNATURE"), _header(text, "CONSTEXPRS")))
    proc = subprocess.run([str(FILECHECK), str(path)], input=ir, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n--- IR ---\n{ir}"

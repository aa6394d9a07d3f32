"""Runs the golden IR tests (tests/filecheck/**/*.tir) with lit, the venv's bin first on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def test_lit_golden_files() -> None:
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]), PYTHONPATH=str(ROOT))
    proc = subprocess.run([str(BIN / "lit"), "-q", "-j", "2", str(ROOT / "tests" / "filecheck")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"lit failed:\n{proc.stdout[-20000:]}\n{proc.stderr[-5000:]}"

"""Builds are deterministic: two compiles of one artifact key, each in a fresh interpreter with its own
hash seed (so set and dict orders that depend on it differ), give byte-identical binaries and texts. The
service relies on this: a stored artifact is immutable, and a build that gives other bytes for its key is
counted as a conflict."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.kernels import KERNELS
from tilec.compiler.backends.cuda import nvptx

BUILD = """
import hashlib, json, sys
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel
from tests.kernels import KERNELS, source
stem, target = sys.argv[1], sys.argv[2]
k = KERNELS[stem]
art = compile_kernel(source(stem), k["name"], signature=k["signature"], constexprs=k["constexprs"],
                     options=CompileOptions(target=target))
print(json.dumps({form: hashlib.sha256(value if isinstance(value, bytes) else (value or "").encode()).hexdigest()
                  for form, value in (("binary", art.binary), ("ptx", art.ptx), ("llir", art.llir), ("tir", art.tir),
                                      ("metadata", json.dumps(art.metadata, sort_keys=True)))}))
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [("vector_add", "cpu"), ("fused_softmax", "cpu"), ("matmul", "cpu")]
CUDA = [("vector_add", "cuda:sm_90"), ("fused_softmax", "cuda:sm_80"), ("matmul", "cuda:sm_90")]


def _build(stem: str, target: str, seed: int) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    out = subprocess.run([sys.executable, "-c", BUILD, stem, target], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=600, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("stem", "target"), [c for c in CASES if c[0] in KERNELS])
def test_two_builds_of_one_key_are_byte_identical_cpu(stem: str, target: str) -> None:
    first, second = _build(stem, target, 1), _build(stem, target, 2)
    assert first == second


@pytest.mark.skipif(nvptx.ptxas_path() is None, reason="no ptxas here")
@pytest.mark.parametrize(("stem", "target"), [c for c in CUDA if c[0] in KERNELS])
def test_two_builds_of_one_key_are_byte_identical_cubin(stem: str, target: str) -> None:
    first, second = _build(stem, target, 1), _build(stem, target, 2)
    assert first == second

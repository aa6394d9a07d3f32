"""A tune's compiles under limits (compiler/tune/tuner.py: limited_compiler, run_limited): each config in a child
of its own with a memory limit, a time limit and a process group and temporary directory of its own, so a
compile past its time or cancelled mid-ptxas leaves no ptxas and no temporary files; and the kernel of a tune is
read in such a child, so a hostile source costs the caller nothing."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tilec.compiler.artifact import Artifact, CompileOptions
from tilec.compiler.backends.cuda.nvptx import ptxas_path
from tilec.compiler.errors import CompileError
from tilec.compiler.request import CompileRequest
from tilec.compiler.tune.launch import LaunchDescription
from tilec.compiler.tune.tuner import CompileLimitError, limited_compiler, run_limited
from tilec.runtime.tune import TuneSpec, prepare

KERNELS = Path(__file__).parents[1] / "kernels"
ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
MM_SIG = {n: "*fp16" for n in ("a_ptr", "b_ptr", "c_ptr")} | {
    n: "i32" for n in "M N K stride_am stride_ak stride_bk stride_bn stride_cm stride_cn".split()
}
# a big tile for sm_90: its compile runs for seconds before ptxas starts, and ptxas for seconds more
BIG = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
needs_ptxas = pytest.mark.skipif(ptxas_path() is None, reason="no ptxas here")
# 279 bytes of shared tuples: four levels of (X,) * 100 make 10^8 elements when copied (the kernel's parameter
# defaults are described as JSON): it cost an API process 2.3 GB
HOSTILE = """import triton
import triton.language as tl
A = (1,) * 100
B = (A,) * 100
C = (B,) * 100
D = (C,) * 100
E = (D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D)


@triton.jit
def k(x_ptr, N: tl.constexpr = E, M: tl.constexpr = D):
    tl.store(x_ptr, 1)
"""


def _add(block: int = 1024) -> CompileRequest:
    return CompileRequest(text=(KERNELS / "vector_add.py").read_text(), name="add_kernel", signature=ADD_SIG,
                          constexprs={"BLOCK_SIZE": block}, options=CompileOptions(target="cpu"))  # fmt: skip


def _big_matmul() -> CompileRequest:
    """A compile slow on purpose: a 256x256 fp32 accumulator over 4 warps spills heavily, and ptxas takes its time
    (7.9 s on an idle 2-core machine here; with 8 warps it took 3.1 s, at the edge of the 3 s limit below)."""
    return CompileRequest(text=(KERNELS / "matmul.py").read_text(), name="matmul_kernel", signature=MM_SIG,
                          constexprs=BIG, options=CompileOptions(target="cuda:sm_90", num_warps=4, num_stages=4))  # fmt: skip


def _ptxas_under(root: Path) -> list[int]:
    """ptxas processes whose arguments lie under `root` (their input is in the compile's temporary dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"ptxas") and any(str(root).encode() in a for a in argv):
                found.append(int(entry.name))
    return found


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_configs_compile_and_errors_come_back(private_tmp: Path) -> None:
    results = dict(limited_compiler(2)([_add(256), _add(1000)]))
    assert isinstance(results[0], Artifact) and results[0].target == "cpu"
    assert isinstance(results[1], CompileError), results[1]  # arange of a length that is not a power of two
    assert _left(private_tmp) == [], "every compile's temporary directory is removed"


def test_memory_limit_stops_a_compile(private_tmp: Path) -> None:
    [(index, result)] = list(limited_compiler(1, memory_mb=64)([_add()]))
    assert isinstance(result, CompileLimitError) and index == 0, result
    assert _left(private_tmp) == []


@needs_ptxas
def test_a_cancel_mid_ptxas_leaves_no_ptxas_and_no_files(private_tmp: Path) -> None:
    seen = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 240
        while not _ptxas_under(private_tmp) and time.monotonic() < deadline:
            time.sleep(0.02)
        seen.set()

    threading.Thread(target=watch, daemon=True).start()
    results = list(limited_compiler(1, timeout_s=300, cancelled=seen.is_set)([_big_matmul()]))
    assert results == [], "a cancel ends the compiles before any answer"
    assert seen.is_set()
    _settle(private_tmp)
    assert _ptxas_under(private_tmp) == [], "ptxas died with its compile's process group"
    assert _left(private_tmp) == [], "the compile's temporary directory is removed"


@needs_ptxas
def test_a_compile_past_its_time_leaves_no_ptxas(private_tmp: Path) -> None:
    start = time.monotonic()
    [(_, result)] = list(limited_compiler(1, timeout_s=2)([_big_matmul()]))
    assert isinstance(result, CompileLimitError) and "2 s" in str(result), result
    assert time.monotonic() - start < 30  # the 2 s limit and the children's start on a loaded machine
    _settle(private_tmp)
    assert _ptxas_under(private_tmp) == [] and _left(private_tmp) == []


def test_a_hostile_source_is_read_in_the_child_at_no_cost_here() -> None:
    assert len(HOSTILE.encode()) <= 300
    spec = TuneSpec(source=HOSTILE, name="k", signature={"x_ptr": "*i32"},
                    launch=LaunchDescription(grid=["1"], args={"x_ptr": "zeros(1)"}))  # fmt: skip
    before = _rss_mb()
    try:
        run_limited(prepare, (spec,), timeout_s=60, memory_mb=1024)
    except (CompileError, CompileLimitError) as exc:
        assert "'E'" in str(exc) or "limit" in str(exc), exc
    assert _rss_mb() - before < 50, "the source was read elsewhere"


def _settle(root: Path, timeout_s: float = 60) -> None:
    """Until no ptxas runs under `root` and nothing is left in it, or timeout_s (a killed process leaves /proc
    once reaped, and that takes its time on a loaded machine; the caller's asserts then say what stayed)."""
    deadline = time.monotonic() + timeout_s
    while (_ptxas_under(root) or _left(root)) and time.monotonic() < deadline:
        time.sleep(0.05)


def _left(root: Path) -> list[Path]:
    """What compiles left in `root` (multiprocessing's own pymp-* directory, made when its forkserver starts
    while tempfile.tempdir points here, is not theirs)."""
    return [p for p in root.iterdir() if not p.name.startswith("pymp-")]


def _rss_mb() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) >> 10


@needs_ptxas
def test_the_services_compile_pool_kills_a_compile_with_its_ptxas(private_tmp: Path) -> None:
    """server/pool.py: a compile child is killed (past its time: `_wait` calls kill_group) mid-ptxas: the
    group goes, ptxas with it, and the child's temporary directory."""
    from dataclasses import asdict

    from tilec.server import pool

    tmpdir = tempfile.mkdtemp(prefix="tilec-compile-")
    parent, child = pool._CTX.Pipe(duplex=False)
    proc = pool._CTX.Process(target=pool._child_main, args=(child, "compile", {"request": _big_matmul()}, 4096,
                                                              tmpdir), daemon=True)  # fmt: skip
    with pool._main_not_rerun():
        proc.start()
    child.close()
    deadline = time.monotonic() + 240
    while not _ptxas_under(private_tmp) and time.monotonic() < deadline:
        assert proc.is_alive() and not parent.poll(0), "the compile ended before its ptxas was seen"
        time.sleep(0.02)
    assert _ptxas_under(private_tmp), asdict(_big_matmul().options)
    pool.kill_group(proc, tmpdir)
    parent.close()
    _settle(private_tmp)
    assert _ptxas_under(private_tmp) == [] and _left(private_tmp) == []


KILLED_WORKER = """
import sys, tempfile
sys.path.insert(0, ".")
tempfile.tempdir = sys.argv[1]
from tests.tune.test_limited_compile import _big_matmul
from tilec.compiler.tune.tuner import limited_compiler
list(limited_compiler(1, timeout_s=600)([_big_matmul()]))
"""


@needs_ptxas
def test_a_worker_killed_mid_ptxas_leaves_no_ptxas_and_no_files(tmp_path: Path) -> None:
    """The tune worker itself SIGKILLed (Celery's trap) while a config is in ptxas: its compile child (a group
    of its own, out of reach of a kill of the worker's group) notices, removes its directory and kills its
    group, ptxas included."""
    import signal
    import subprocess
    import sys

    root = Path(__file__).parents[2]
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(tmp_path)], cwd=root)
    try:
        deadline = time.monotonic() + 240
        while not _ptxas_under(tmp_path) and time.monotonic() < deadline:
            assert proc.poll() is None, "the worker ended before its ptxas was seen"
            time.sleep(0.02)
        assert _ptxas_under(tmp_path)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 60  # generous: the child notices its parent's death by polling, on a busy machine
        while (_ptxas_under(tmp_path) or _left(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _ptxas_under(tmp_path) == [] and _left(tmp_path) == []
    finally:
        proc.kill()
        proc.wait()

"""A tune's compile workers do not outlive the process that started them: a tune worker SIGKILLed
mid-job (Celery's trap) must not leave its compiles running for nobody."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = r"""
import sys
from tilec.compiler.request import CompileRequest
from tilec.compiler.tune.tuner import config_request, process_pool_compiler
source = open(sys.argv[1]).read()
base = CompileRequest(text=source, name="add_kernel", signature={"x_ptr": "*fp32", "y_ptr": "*fp32",
                      "out_ptr": "*fp32", "n_elements": "i32"})
configs = [{"kwargs": {"BLOCK_SIZE": 64 << (i % 6)}, "num_warps": 4, "num_stages": 2 + i} for i in range(400)]
for index, _ in process_pool_compiler(2)([config_request(base, c) for c in configs]):
    print(index, flush=True)
"""


def _marked(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"TILEC_TEST_MARK={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_compile_workers_exit_when_their_parent_is_killed() -> None:
    mark = uuid.uuid4().hex
    env = {**os.environ, "TILEC_TEST_MARK": mark}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(ROOT / "tests/kernels/vector_add.py")], env=env,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdout.readline()  # a compile has finished: the pool is up
        assert len(_marked(mark)) >= 3  # the parent, the forkserver and its workers
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 15
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _marked(mark)
        assert left == [], f"processes left behind: {left}"
    finally:
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()

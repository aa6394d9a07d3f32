"""The sandbox's and the tune's limits, measured: how long a sandboxed bench child takes to start and time a
first trial, what a probe child finds, how long after its limit a spinning kernel, a launch too big,
a compile past its time and a cancelled compile (mid-ptxas) are stopped. Run from the repository root:
`python3 bench/sandbox_limits.py` (cpu; the ptxas rows need ptxas). Prints JSON."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.client.test_bench import ADD, CONFIG, SIG, _add_launch, _compile  # noqa: E402
from tests.client.test_sandbox import SPIN  # noqa: E402
from tests.tune.test_limited_compile import _big_matmul, _ptxas_under  # noqa: E402
from tilec.compiler.backends.cuda.nvptx import ptxas_path  # noqa: E402
from tilec.compiler.tune.launch import LaunchDescription, resolve  # noqa: E402
from tilec.compiler.tune.tuner import limited_compiler  # noqa: E402
from tilec.runtime.bench import BenchProcess, TrialFault  # noqa: E402
from tilec.runtime.sandbox import Child, Limits, Profile  # noqa: E402


def seconds(fn) -> tuple[float, object]:
    t0 = time.monotonic()
    try:
        out = fn()
    except TrialFault as exc:
        out = str(exc)
    return round(time.monotonic() - t0, 2), out


def main() -> None:
    res: dict = {}
    add = _compile(ADD, "add_kernel", SIG, CONFIG)
    starts = []
    for _ in range(3):
        t0 = time.monotonic()
        with BenchProcess("cpu", _add_launch(4096)) as b:
            b.time(add, CONFIG, max_seconds=0.01, min_reps=1)
            starts.append(time.monotonic() - t0)
    res["bench_child_start_and_first_trial_s"] = round(min(starts), 2)
    child = Child("tilec.runtime.sandbox:probe", Profile())
    res["probe"] = child.recv() if child.poll(60) else None
    child.kill()

    sig = {"x_ptr": "*fp32", "n": "i64"}
    spin = _compile(SPIN, "spin", sig, {})
    launch = resolve(LaunchDescription(grid=["1"], args={"x_ptr": "randn(4)", "n": 10**15}), sig, list(sig))
    with BenchProcess("cpu", launch, timeout_s=600, limits=Limits(cpu_s=5)) as b:
        b.device_info()  # started
        res["spin_stopped_by_cpu_limit_5s"] = seconds(lambda: b.time(spin, {}))
    with BenchProcess("cpu", launch, timeout_s=5) as b:
        b.device_info()
        res["spin_stopped_by_wall_limit_5s"] = seconds(lambda: b.time(spin, {}))
    big = LaunchDescription(grid=["1"], args={"x_ptr": "randn(n_elements)", "y_ptr": "randn(n_elements)",
                                              "out_ptr": "empty(n_elements)", "n_elements": 1 << 27})  # fmt: skip
    with BenchProcess("cpu", resolve(big, SIG, list(SIG)), limits=Limits(memory_mb=1024)) as b:
        res["1.5GiB_launch_under_1GiB_limit"] = seconds(lambda: b.time(add, CONFIG))

    if ptxas_path() is not None:
        import multiprocessing.forkserver

        multiprocessing.forkserver.ensure_running()  # its own directory stays out of the one watched below
        with tempfile.TemporaryDirectory() as d:
            tempfile.tempdir = d
            [(_, r)] = list(limited_compiler(1, timeout_s=5)([_big_matmul()]))
            t0 = time.monotonic()
            [(_, r)] = list(limited_compiler(1, timeout_s=5)([_big_matmul()]))
            res["compile_past_5s_limit"] = [round(time.monotonic() - t0, 2), str(r)]
            seen = threading.Event()
            stamp: list[float] = []

            def watch() -> None:
                while not _ptxas_under(Path(d)):
                    time.sleep(0.01)
                stamp.append(time.monotonic())
                seen.set()

            threading.Thread(target=watch, daemon=True).start()
            list(limited_compiler(1, timeout_s=600, cancelled=seen.is_set)([_big_matmul()]))
            gone = time.monotonic()
            left = _ptxas_under(Path(d))
            res["cancel_mid_ptxas"] = {"stopped_after_s": round(gone - stamp[0], 2), "ptxas_left": left,
                                       "files_left": [p.name for p in Path(d).iterdir() if not p.name.startswith("pymp-")]}  # fmt: skip
            tempfile.tempdir = None
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()

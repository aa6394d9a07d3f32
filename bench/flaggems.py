"""A Triton operator library's own test suite under the drop-in vs plain Triton: FlagGems (its repository,
FlagOpen/FlagGems: src/ and tests/, not vendored here; bench/gpu_run.sh's flaggems stage takes them from
.wt/flaggems).

Each test file runs under plain Triton and under `python -m tilec run -m pytest` (every @triton.jit kernel
of flag_gems launches through tilec). The tilec run is TILEC_STRICT=fallback: a kernel tilec cannot compile
fails its test instead of running under Triton, so no Triton build counts as a tilec pass (`--lenient` lets
it fall back, counted in tilec.stats()). Files spread over every GPU (`--gpus`, `--slots` pytest processes
per GPU), a file's tests over `--shards` processes, one test in `--sample` (chosen by a hash of its id: the
same ones under both). A plugin writes each test's outcome, first error lines and duration as it ends, so a
run stopped at `--deadline` still reports every test it finished; `--summarize` re-reads a --logs folder.
The summary: tests that pass under Triton, how many of them pass under tilec (the issue asks for 95%), the
rest by reason, and tilec.stats(). `--static` also reads every routed kernel of flag_gems into a bundle.

Usage (GPU machine, repo root, FlagGems' src on PYTHONPATH):
    python3 bench/flaggems.py PATH/TO/FlagGems/tests [--files test_unary_pointwise_ops.py,...] [--static]
        [--json OUT] [--logs DIR] [--sample 6] [--shards 4] [--slots 6] [--deadline 250]
        [--pytest-args "--mode quick"]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tutorials import ROOT, SITECUSTOMIZE  # noqa: E402

STATIC = """
import json, sys, types
import tilec
tilec.install()
import flag_gems  # noqa: F401 - imports its kernels under the drop-in
from tilec.client._dropin import _Routed
from tilec.client._resolve import resolve
from tilec.compiler.frontend.bundle import read_bundle
seen, read, refused = set(), 0, {}
for name, mod in list(sys.modules.items()):
    if not name.startswith("flag_gems") or not isinstance(mod, types.ModuleType):
        continue
    for value in list(vars(mod).values()):
        obj = value
        for _ in range(4):  # under a library's wrappers (libentry, autotune, heuristics)
            if isinstance(obj, _Routed):
                break
            obj = getattr(obj, "fn", None)
        if not isinstance(obj, _Routed) or id(obj) in seen:
            continue
        seen.add(id(obj))
        try:
            read_bundle(resolve(obj.fn))
            read += 1
        except Exception as exc:
            refused[f"{obj.fn.__module__}.{obj.fn.__qualname__}"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
print(json.dumps({"kernels": len(seen), "read": read, "refused": refused}))
"""


# A pytest plugin (`-p tilec_flaggems_plugin`): keeps one test in TILEC_SAMPLE (chosen by a hash of its id, so
# both runs keep the same ones) and writes each test's outcome as one JSON line when it ends, so a run that is
# killed at its deadline still reports every test it finished.
PLUGIN = """
import hashlib, json, os

_KEEP = int(os.environ.get("TILEC_SAMPLE", "1") or 1)
_SHARD, _SHARDS = (int(x) for x in os.environ.get("TILEC_SHARD", "0/1").split("/"))
_OUT = os.environ.get("TILEC_REPORT_FILE")


def _kept(item):
    h = int(hashlib.sha256(item.nodeid.encode()).hexdigest(), 16)
    return h % _KEEP == 0 and (h // _KEEP) % _SHARDS == _SHARD


def pytest_collection_modifyitems(config, items):
    if _KEEP > 1 or _SHARDS > 1:
        keep = [i for i in items if _kept(i)]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def pytest_configure(config):
    # the Triton run (TILEC_UNCACHED_LIBENTRY=1): FlagGems 3.0's launch cache calls Triton's compiled kernel the
    # way Triton 3.5 takes it, which Triton 3.6 refuses ("function takes exactly 25 arguments"); emptied before
    # each call, every launch takes Triton's own run, so the baseline passes what Triton itself can run
    if os.environ.get("TILEC_UNCACHED_LIBENTRY") == "1":
        from flaggems_compat import bypass_launch_cache  # bench/, on the run's PYTHONPATH

        bypass_launch_cache()


def pytest_runtest_logreport(report):
    if not _OUT or (report.when != "call" and not (report.failed or report.skipped)):
        return
    msg = ""
    if report.failed:
        lines = [ln for ln in str(report.longrepr).splitlines() if ln.startswith("E ")] or str(report.longrepr).splitlines()[-1:]
        msg = " | ".join(ln[1:].strip() for ln in lines[:3])[:600]
    state = "passed" if report.passed else "skipped" if report.skipped else "failed"
    with open(_OUT, "a") as f:
        f.write(json.dumps({"id": report.nodeid, "state": state, "msg": msg, "s": round(report.duration, 3)}) + "\\n")
"""


def records(work: Path, stem: str) -> Iterator[dict]:
    """The plugin's lines (one per test report) of every shard of one file and mode, in order; torn lines skipped."""
    for path in sorted(work.glob(f"{stem}*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                yield json.loads(line)
            except ValueError:
                continue


def outcomes(work: Path, stem: str) -> dict[str, tuple[str, str]]:
    """test id -> (passed | failed | skipped, the failure's first error lines), from the plugin's lines of every
    shard of one file and mode (a failure is final: a failed teardown after a passed call is a failure)."""
    out: dict[str, tuple[str, str]] = {}
    for rec in records(work, stem):
        if out.get(rec["id"], ("",))[0] != "failed":
            out[rec["id"]] = (rec["state"], rec["msg"])
    return out


def durations(work: Path, stem: str) -> dict[str, float]:
    """test id -> seconds of its call, from the plugin's lines of every shard of one file and mode."""
    out: dict[str, float] = {}
    for rec in records(work, stem):
        out[rec["id"]] = out.get(rec["id"], 0.0) + float(rec.get("s", 0.0))
    return out


def slowest(work: Path, files: list[Path], modes: list[str], n: int) -> None:
    """The N slowest tests of each mode beside the other mode's time for the same test, and each test function's
    total (its parametrizations summed) under both: where one mode spends its time."""
    if n <= 0:
        return
    per = {m: {k: v for t in files for k, v in durations(work, f"{t.stem}.{m}").items()} for m in modes}
    for m in modes:
        other = next((o for o in modes if o != m), None)
        print(f"\nslowest under {m}" + (f" (and under {other})" if other else "") + ":")
        for k, v in sorted(per[m].items(), key=lambda kv: -kv[1])[:n]:
            o = per[other].get(k) if other else None
            print(f"  {v:8.2f} s  {'' if o is None else f'{o:8.2f} s'}  {k}")
    funcs: dict[str, dict[str, float]] = {}
    for m in modes:
        for k, v in per[m].items():
            funcs.setdefault(k.split("[")[0], {}).setdefault(m, 0.0)
            funcs[k.split("[")[0]][m] += v
    print("\ntest functions by total time (" + ", ".join(modes) + "):")
    for f, t in sorted(funcs.items(), key=lambda kv: -max(kv[1].values()))[:n]:
        print("  " + "  ".join(f"{t.get(m, 0.0):8.1f} s" for m in modes) + f"  {f}")


def run_pytest(prefix: list[str], test: Path, extra: list[str], env: dict, report: Path, timeout: int) -> tuple[int, float]:
    cmd = [*prefix, "-m", "pytest", str(test), "-p", "no:cacheprovider", "-p", "tilec_flaggems_plugin", "-q", *extra]
    t0 = time.monotonic()
    log = report.with_suffix(".log")
    env = {**env, "TILEC_REPORT_FILE": str(report)}
    try:
        with log.open("wb") as out:
            rc = subprocess.run(cmd, env=env, cwd=test.parent, timeout=timeout, stdout=out, stderr=subprocess.STDOUT).returncode
    except subprocess.TimeoutExpired:
        rc = 124
    return rc, time.monotonic() - t0


def reason_of(msg: str) -> str:
    """A failure's message without numbers and addresses, to group like failures."""
    return re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?", "#", msg)[:160]


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
        return max(1, sum(1 for line in out.splitlines() if line.startswith("GPU ")))
    except (OSError, subprocess.TimeoutExpired):
        return 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tests", type=Path, help="FlagGems' tests/ folder")
    ap.add_argument("--files", default="", help="comma-separated test files (default: every test_*.py)")
    ap.add_argument("--pytest-args", default="")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per test file and mode")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs to spread the files over (default: all)")
    ap.add_argument("--slots", type=int, default=2, help="pytest processes per GPU at a time")
    ap.add_argument("--modes", default="triton,tilec")
    ap.add_argument("--lenient", action="store_true",
                    help="let a kernel tilec cannot compile run under Triton (default: TILEC_STRICT=fallback, so such a "
                         "kernel fails its test and no Triton-run test counts as a tilec pass)")
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--logs", type=Path, help="keep each run's log, outcomes and stats here")
    ap.add_argument("--sample", type=int, default=1, help="run one test in N (the same ones in both runs)")
    ap.add_argument("--shards", type=int, default=1, help="split each file's tests over N pytest processes")
    ap.add_argument("--file-shards", default="",
                    help="shards for some files, e.g. special_ops=16,convolution_ops=8 (the rest take --shards); "
                         "a file's shards start in the order of the files' expected time, the most per shard first")
    ap.add_argument("--slowest", type=int, default=25, help="list the N slowest tests of each mode (and the other's)")
    ap.add_argument("--summarize", action="store_true",
                    help="run nothing: summarize the outcomes already in --logs (e.g. one run's Triton outcomes "
                         "next to another's tilec outcomes, for the same --sample)")
    ap.add_argument("--deadline", type=int, default=0,
                    help="seconds for the whole run: files not started by then are left out, running ones stopped")
    args = ap.parse_args()
    tests = args.tests.resolve()
    files = [tests / f for f in args.files.split(",") if f] or sorted(tests.glob("test_*.py"))
    modes = [m for m in args.modes.split(",") if m]
    work = args.logs or Path(tempfile.mkdtemp(prefix="tilec-flaggems-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (work / "tilec_flaggems_plugin.py").write_text(PLUGIN)
    base_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(work), str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH", "")]),
        "TILEC_SAMPLE": str(args.sample),
    }
    base_env.pop("TILEC_TRITON", None)
    extra = shlex.split(args.pytest_args)
    gpus = args.gpus or gpu_count()
    shards = {f"test_{k}.py": int(v) for k, v in (x.split("=") for x in args.file_shards.split(",") if x)}
    count = {t: shards.get(t.name, args.shards) for t in files}
    # the heaviest shards first (a file named in --file-shards is a heavy one), so that the last to finish are short
    jobs = sorted(((t, m, k) for t in files for m in modes for k in range(count[t])),
                  key=lambda j: (j[0].name not in shards, -j[0].stat().st_size))
    if args.summarize:
        jobs = []
    slots: queue.Queue[int] = queue.Queue()
    for i in range(gpus * args.slots):
        slots.put(i % gpus)
    took: dict[tuple[str, str], float] = {}

    def one(job: tuple[Path, str, int]) -> None:
        test, mode, shard = job
        gpu = slots.get()
        try:
            env = {**base_env, "CUDA_VISIBLE_DEVICES": str(gpu), "TILEC_SHARD": f"{shard}/{count[test]}"}
            report = work / f"{test.stem}.{mode}.jsonl" if count[test] == 1 else work / f"{test.stem}.{mode}.{shard}.jsonl"
            prefix = [sys.executable]
            if mode == "triton":
                env["TILEC_UNCACHED_LIBENTRY"] = "1"
            if mode == "tilec":
                env["TILEC_STATS_FILE"] = str(report.with_suffix(".stats"))
                env["TILEC_STRICT"] = "0" if args.lenient else "fallback"  # compiles yes, Triton no
                prefix = [sys.executable, "-m", "tilec", "run"]
            left = end - time.monotonic()
            if left < 5:
                print(f"  {test.name:42s} {mode:6s} not run (deadline)", flush=True)
                return
            rc, secs = run_pytest(prefix, test, extra, env, report, int(min(args.timeout, left)))
            took[(test.name, mode)] = max(secs, took.get((test.name, mode), 0.0))
            print(f"  {test.name:42s} {mode:6s} {shard} gpu {gpu} rc {rc:3d} {secs:7.1f} s", flush=True)
        finally:
            slots.put(gpu)

    t0 = time.monotonic()
    end = t0 + (args.deadline or 10**9)
    with ThreadPoolExecutor(gpus * args.slots) as pool:
        list(pool.map(one, jobs))
    wall = time.monotonic() - t0
    report: dict = {"files": {}, "stats": Counter(), "fallbacks": {}, "wall_s": wall, "gpus": gpus,
                    "strict": not args.lenient}  # fmt: skip
    both = passed_triton = 0
    failures: list[tuple[str, str]] = []
    for test in files:
        t, c = outcomes(work, f"{test.stem}.triton"), outcomes(work, f"{test.stem}.tilec")
        ok_t = {k for k, (s, _) in t.items() if s == "passed"}
        ok_c = {k for k in ok_t if c.get(k, ("missing", ""))[0] == "passed"}
        both += len(ok_c)
        passed_triton += len(ok_t)
        for k in sorted(ok_t - ok_c):
            state, msg = c.get(k, ("missing", "the tilec run ended before this test (crash or timeout)"))
            failures.append((k, f"{state}: {msg}"))
        stats: dict = {}
        for stats_file in work.glob(f"{test.stem}.tilec*.stats"):
            one_run = json.loads(stats_file.read_text())
            for key in ("routed", "launched", "fallbacks", "kernels"):
                report["stats"][key] += one_run.get(key, 0)
                stats[key] = stats.get(key, 0) + one_run.get(key, 0)
            report["fallbacks"].update(one_run.get("reasons", {}))
        report["files"][test.name] = {"triton_passed": len(ok_t), "tilec_passed": len(ok_c), "tests": len(t),
                                      "triton_s": took.get((test.name, "triton")),
                                      "tilec_s": took.get((test.name, "tilec"))}  # fmt: skip
        print(f"{test.name:45s} triton {len(ok_t):5d}  tilec {len(ok_c):5d}  of {len(t):5d}  "
              f"fallbacks {stats.get('fallbacks', 0)}", flush=True)  # fmt: skip
    pct = 100.0 * both / passed_triton if passed_triton else 0.0
    print(f"\n{both}/{passed_triton} tests that pass under Triton pass under tilec ({pct:.1f}%), "
          f"{wall:.0f} s on {gpus} GPU(s)")  # fmt: skip
    slowest(work, files, modes, args.slowest)
    by_reason = Counter(reason_of(why) for _, why in failures)
    for why, n in by_reason.most_common(40):
        print(f"  {n:5d}  {why}")
    print(f"tilec runs: {dict(report['stats'])}")
    for name, why in sorted(report["fallbacks"].items()):
        print(f"  fallback {name}: {why.splitlines()[0][:200]}")
    if args.static:
        p = subprocess.run([sys.executable, "-c", STATIC], env=base_env, capture_output=True, text=True,
                           timeout=args.timeout)  # fmt: skip
        static = (
            json.loads(p.stdout.strip().splitlines()[-1])
            if p.returncode == 0
            else {"error": p.stderr[-2000:]}
        )
        report["static"] = static
        print(f"static: {static.get('read')}/{static.get('kernels')} kernels read into bundles")
        for why, n in Counter(reason_of(r) for r in static.get("refused", {}).values()).most_common(30):
            print(f"  {n:5d}  {why}")
    report.update(passed_triton=passed_triton, passed_both=both, percent=pct, failures=failures)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=list))


if __name__ == "__main__":
    main()

"""Triton's tutorials (python/tutorials of Triton's repository; not vendored here) run unmodified under
`python -m tilec run`, each checked as the tutorial checks itself, and the same script under plain Triton
as the anchor. Benchmarks and plots are switched off from outside the script (a sitecustomize that makes
`triton.testing.perf_report(...)` objects' `.run()` do nothing), so the files stay as they are.

A tutorial passes when it exits 0, prints no mismatch ("❌", "differ"), any "maximum difference" it prints
is small, and (under tilec) no kernel fell back to Triton: `tilec.stats()` is written at exit and its
fallbacks are listed. A file that defines `test_*` functions is also run by pytest under the drop-in.

Usage (GPU machine, repo root): python3 bench/tutorials.py PATH/TO/python/tutorials [--only 01,02]
    [--json OUT] [--timeout 900] [--no-baseline]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = re.compile(r"^\d\d[a-z]?-[\w.-]+\.py$")
MISMATCH = re.compile(r"❌|\bdiffer\b|mismatch", re.IGNORECASE)
MAX_DIFF = re.compile(r"maximum difference[^0-9]*([0-9.eE+-]+)", re.IGNORECASE)

def load_head(path: Path):  # type: ignore[no-untyped-def]
    """A tutorial's module up to its first `torch.manual_seed(0)` or benchmark (`@triton.testing.perf_report`):
    its imports, kernels and wrapper functions, without its checks and benchmarks; loaded from a file of its own
    (Triton reads a kernel's source there)."""
    import importlib.util

    text = path.read_text()
    tmp = Path(tempfile.mkdtemp()) / f"head_{path.stem.replace('-', '_')}.py"
    ends = [i for i in (text.find("torch.manual_seed(0)"), text.find("@triton.testing.perf_report")) if i >= 0]
    tmp.write_text(text[: min(ends)])
    spec = importlib.util.spec_from_file_location(tmp.stem, tmp)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SITECUSTOMIZE = """
import atexit, json, os, sys
if os.environ.get("TILEC_NO_BENCH") == "1":
    try:
        import triton.testing as _tt

        class _NoBench:
            def __init__(self, fn):
                self.fn = fn

            def run(self, *args, **kwargs):
                return None

            def __call__(self, *args, **kwargs):
                return self.fn(*args, **kwargs)

        _tt.perf_report = lambda benchmarks: _NoBench
    except Exception as exc:  # report, never block the run
        print("tutorials.py: could not switch benchmarks off:", exc, file=sys.stderr)
_out = os.environ.get("TILEC_STATS_FILE")
if _out:
    def _dump():
        mod = sys.modules.get("tilec")
        if mod is not None:
            with open(_out, "w") as f:
                json.dump(mod.stats(), f)
    atexit.register(_dump)
"""


def run_one(cmd: list[str], env: dict, timeout: int) -> dict:
    """Run one script; past `timeout` it gets SIGABRT first, so that Python's fault handler writes where each of
    its threads was (the stderr kept says what a tutorial that runs too long was doing), then SIGKILL."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, env={**env, "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGABRT)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        rc, err = 124, f"{err}\ntimed out after {timeout} s"
    return {
        "rc": rc,
        "seconds": round(time.perf_counter() - start, 1),
        "stdout": out[-4000:],
        "stderr": err[-8000:],
    }


def _failures(stdout: str) -> list[str]:
    """pytest's summary: its FAILED lines (-rf) and its last line, at most 8 of them."""
    lines = stdout.strip().splitlines()
    failed = [ln[:240] for ln in lines if ln.startswith("FAILED")]
    return (failed[:7] + lines[-1:]) if lines else []


def verdict(res: dict) -> tuple[bool, str]:
    if res["rc"] != 0:
        last = (res["stderr"].strip().splitlines() or ["?"])[-1]
        return False, f"exit {res['rc']}: {last[:300]}"
    if MISMATCH.search(res["stdout"]):
        line = next(x for x in res["stdout"].splitlines() if MISMATCH.search(x))
        return False, f"mismatch printed: {line[:200]}"
    for m in MAX_DIFF.finditer(res["stdout"]):
        try:
            if float(m.group(1).rstrip(".")) > 1e-3:
                return False, f"maximum difference {m.group(1)}"
        except ValueError:
            continue
    return True, "ok"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tutorials", type=Path)
    ap.add_argument("--only", default="", help="comma-separated prefixes, e.g. 01,02,05")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-baseline", action="store_true", help="skip the plain-Triton run of each tutorial")
    args = ap.parse_args()
    files = sorted(p for p in args.tutorials.iterdir() if TUTORIAL.match(p.name))
    if args.only:
        files = [p for p in files if any(p.name.startswith(x) for x in args.only.split(","))]
    if not files:
        raise SystemExit(f"no tutorials (NN-name.py) in {args.tutorials}")
    site = Path(tempfile.mkdtemp(prefix="tilec-tutorials-"))
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    results = []
    for path in files:
        row: dict = {"tutorial": path.name}
        stats_file = site / f"{path.stem}.stats.json"
        env = {**os.environ, "TILEC_NO_BENCH": "1", "TILEC_STATS_FILE": str(stats_file), "MPLBACKEND": "Agg",
               "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        env.pop("TILEC_TRITON", None)
        if not args.no_baseline:
            base = run_one([sys.executable, str(path)], {**env, "TILEC_STATS_FILE": ""}, args.timeout)
            row["triton"], row["triton_why"] = verdict(base)
        res = run_one([sys.executable, "-m", "tilec", "run", str(path)], env, args.timeout)
        ok, why = verdict(res)
        stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
        if ok and stats.get("fallbacks"):
            ok, why = False, f"{stats['fallbacks']} kernel(s) fell back to Triton"
        row.update(tilec=ok, tilec_why=why, seconds=res["seconds"], stats=stats)
        if "def test_" in path.read_text():
            # pytest with a config of its own: the tutorial may sit inside a project whose pytest settings
            # (this repository's: warnings as errors, asyncio options) are not the tutorial's
            (site / "pytest.ini").write_text("[pytest]\n")
            own = ["-c", str(site / "pytest.ini"), "--rootdir", str(path.parent), "-p", "no:cacheprovider"]
            py = run_one([sys.executable, "-m", "tilec", "run", "-m", "pytest", "-q", "-rf", *own, str(path)], env,
                         args.timeout)  # fmt: skip
            row["pytest"], row["pytest_why"] = verdict(py)
            row["pytest_tail"] = _failures(py["stdout"])
            if not args.no_baseline:  # the same tests under plain Triton: what a pass means here
                base_py = run_one([sys.executable, "-m", "pytest", "-q", "-rf", *own, str(path)],
                                  {**env, "TILEC_STATS_FILE": ""}, args.timeout)  # fmt: skip
                row["pytest_triton"], _ = verdict(base_py)
                row["pytest_triton_tail"] = _failures(base_py["stdout"])
        results.append(row)
        mark = "PASS" if ok else "FAIL"
        base_mark = {True: "pass", False: "FAIL", None: "-"}[row.get("triton")]
        extra = f"  pytest: {'pass' if row.get('pytest') else 'FAIL'}" if "pytest" in row else ""
        if "pytest_triton" in row:
            extra += f" (under Triton: {'pass' if row['pytest_triton'] else 'FAIL'})"
        print(
            f"{mark}  {path.name:50s} tilec {res['seconds']:7.1f}s  triton: {base_mark}{extra}  {why}",
            flush=True,
        )
        if not ok and res["rc"] == 124:  # where it was when it ran out of time (the fault handler's dump)
            for line in res["stderr"].strip().splitlines()[-40:]:
                print(f"        {line}")
        for name, reason in (stats.get("reasons") or {}).items():
            print(f"        fallback {name}: {reason.splitlines()[0][:200]}")
        for line in row.get("pytest_tail", []):
            print(f"        pytest under tilec: {line}")
        for line in row.get("pytest_triton_tail", []):
            print(f"        pytest under Triton: {line}")
    passed = sum(r["tilec"] for r in results)
    anchor = [r for r in results if r.get("triton")]
    print(f"\n{passed}/{len(results)} tutorials pass under tilec; "
          f"{sum(r['tilec'] for r in anchor)}/{len(anchor)} of those that pass under Triton")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

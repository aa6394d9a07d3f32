"""A Triton operator library's own test suite under the drop-in vs plain Triton: FlagGems (`pip install
flag-gems`; its tests are in its repository, FlagOpen/FlagGems, tests/ - not vendored here).

Each test file runs twice with pytest: under plain Triton, and under `python -m tilec run -m pytest`
(every @triton.jit kernel of flag_gems launches through tilec; one tilec cannot compile runs under Triton
and is counted). Per-test outcomes come from pytest's JUnit XML. The summary: tests that pass under Triton,
how many of them pass under tilec (the issue asks for 95%), the rest by reason (first line of the failure),
and tilec.stats() of the tilec runs (kernels routed, distinct kernels tilec launched, fallbacks by reason).
`--static` also reads every routed kernel of flag_gems into a bundle (the resolver and the reader, no
launch): kernels read vs refused, by reason.

Usage (GPU machine, repo root, flag_gems installed):
    python3 bench/flaggems.py PATH/TO/FlagGems/tests [--files test_unary_pointwise_ops.py,...] [--static]
        [--json OUT] [--timeout 3600] [--pytest-args "-k 'not big'"]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
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


def outcomes(xml_path: Path) -> dict[str, tuple[str, str]]:
    """test id -> (passed | failed | skipped | error, first line of the message)."""
    out: dict[str, tuple[str, str]] = {}
    if not xml_path.exists():
        return out
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        state, msg = "passed", ""
        for kind in ("failure", "error", "skipped"):
            el = case.find(kind)
            if el is not None:
                state = {"failure": "failed", "error": "error", "skipped": "skipped"}[kind]
                msg = (el.get("message") or el.text or "").strip().splitlines()[0][:300] if (
                    el.get("message") or el.text) else ""  # fmt: skip
                break
        out[tid] = (state, msg)
    return out


def run_pytest(prefix: list[str], test: Path, extra: list[str], env: dict, xml: Path, timeout: int) -> int:
    cmd = [*prefix, "-m", "pytest", str(test), "-p", "no:cacheprovider", "-q", f"--junitxml={xml}", *extra]
    try:
        return subprocess.run(cmd, env=env, cwd=test.parent, timeout=timeout, capture_output=True).returncode
    except subprocess.TimeoutExpired:
        return 124


def reason_of(msg: str) -> str:
    """A failure's message without numbers and addresses, to group like failures."""
    return re.sub(r"0x[0-9a-f]+|\d+(\.\d+)?", "#", msg)[:160]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tests", type=Path, help="FlagGems' tests/ folder")
    ap.add_argument("--files", default="", help="comma-separated test files (default: every test_*.py)")
    ap.add_argument("--pytest-args", default="")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--static", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    files = [args.tests / f for f in args.files.split(",") if f] or sorted(args.tests.glob("test_*.py"))
    work = Path(tempfile.mkdtemp(prefix="tilec-flaggems-"))
    (work / "sitecustomize.py").write_text(SITECUSTOMIZE)
    base_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(work), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    base_env.pop("TILEC_TRITON", None)
    extra = shlex.split(args.pytest_args)
    report: dict = {"files": {}, "stats": Counter(), "fallbacks": {}}
    both = passed_triton = 0
    failures: list[tuple[str, str]] = []
    for test in files:
        xml_t, xml_c, stats_file = (
            work / f"{test.stem}.triton.xml",
            work / f"{test.stem}.tilec.xml",
            work / f"{test.stem}.stats",
        )
        run_pytest([sys.executable], test, extra, base_env, xml_t, args.timeout)
        run_pytest([sys.executable, "-m", "tilec", "run"], test, extra, {**base_env, "TILEC_STATS_FILE": str(stats_file)},
                   xml_c, args.timeout)  # fmt: skip
        t, c = outcomes(xml_t), outcomes(xml_c)
        ok_t = {k for k, (s, _) in t.items() if s == "passed"}
        ok_c = {k for k in ok_t if c.get(k, ("missing", ""))[0] == "passed"}
        both += len(ok_c)
        passed_triton += len(ok_t)
        for k in sorted(ok_t - ok_c):
            state, msg = c.get(k, ("missing", "the tilec run ended before this test (crash or timeout)"))
            failures.append((k, f"{state}: {msg}"))
        stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
        for key in ("routed", "launched", "fallbacks", "kernels"):
            report["stats"][key] += stats.get(key, 0)
        report["fallbacks"].update(stats.get("reasons", {}))
        report["files"][test.name] = {"triton_passed": len(ok_t), "tilec_passed": len(ok_c), "tests": len(t)}
        print(f"{test.name:45s} triton {len(ok_t):5d}  tilec {len(ok_c):5d}  "
              f"fallbacks {stats.get('fallbacks', 0)}", flush=True)  # fmt: skip
    pct = 100.0 * both / passed_triton if passed_triton else 0.0
    print(f"\n{both}/{passed_triton} tests that pass under Triton pass under tilec ({pct:.1f}%)")
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

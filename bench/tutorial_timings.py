"""Triton's tutorials as published, timed by their own benchmarks: each tutorial script runs unmodified under
plain Triton and under the drop-in (`python -m tilec run`), and its `@triton.testing.perf_report` benchmarks
run with their own functions, shapes and `do_bench` calls. From outside the script (a sitecustomize) the
report's `.run()` is replaced by a loop that calls the benchmark function for the providers whose name starts
with "triton" (under the drop-in those launch tilec's builds; torch's and cuBLAS's lines would time the same
library twice) at every STRIDE-th x value, writes each value (GB/s, TFLOPS or ms, as the tutorial reports it)
and draws no plot. The ratio is tilec's over Triton's for a throughput, Triton's over tilec's for a time, so
above 1 is tilec faster in both.

The two runs are two processes on the same GPU, one after the other; the tutorials' own correctness checks
run in both (bench/tutorials.py judges those).

At small sizes a tutorial's own do_bench times mostly the host path of its wrapper (the L2 clear before each
call does not cover it), and that varies from process to process on either side; `--rounds 02=2` runs such a
tutorial twice a side, alternating, and keeps each side's best value, with how far its rounds differed.

Usage (GPU machine, repo root): python3 bench/tutorial_timings.py PATH/TO/python/tutorials
    [--only 01,02,03,05] [--stride 01=1,02=8,03=4,05=6] [--rounds 02=2,03=2] [--timeout 300] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tutorials import ROOT, TUTORIAL, run_one  # noqa: E402

SITECUSTOMIZE = """
import json, os, sys
try:
    import triton.testing as _tt

    _OUT, _STRIDE = os.environ["TILEC_BENCH_OUT"], int(os.environ.get("TILEC_BENCH_STRIDE", "1"))

    class _Timed:
        def __init__(self, fn, benchmarks):
            self.fn, self.benchmarks = fn, benchmarks if isinstance(benchmarks, list) else [benchmarks]

        def __call__(self, *args, **kwargs):
            return self.fn(*args, **kwargs)

        def run(self, *args, **kwargs):
            for b in self.benchmarks:
                for x in b.x_vals[::_STRIDE]:
                    xs = dict(zip(b.x_names, x if isinstance(x, (list, tuple)) else [x] * len(b.x_names)))
                    for prov in b.line_vals:
                        if not str(prov).startswith("triton"):
                            continue
                        try:
                            y = self.fn(**xs, **{b.line_arg: prov}, **b.args)
                            y = float(y[0] if isinstance(y, (list, tuple)) else y)
                            rec = {"plot": b.plot_name, "x": xs, "provider": prov, "y": y, "ylabel": b.ylabel}
                        except Exception as exc:
                            rec = {"plot": b.plot_name, "x": xs, "provider": prov, "error": repr(exc)[:300]}
                        with open(_OUT, "a") as f:
                            f.write(json.dumps(rec) + "\\n")

    _tt.perf_report = lambda benchmarks: (lambda fn: _Timed(fn, benchmarks))
except Exception as exc:  # report, never block the run
    print("tutorial_timings.py: could not take over the benchmarks:", exc, file=sys.stderr)
"""

DEFAULT_STRIDE = {"01": 1, "02": 8, "03": 4, "05": 6, "06": 1, "08": 1}


def key(rec: dict) -> tuple:
    return rec["plot"], json.dumps(rec["x"], sort_keys=True), rec["provider"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tutorials", type=Path)
    ap.add_argument("--only", default="01,02,03,05")
    ap.add_argument("--stride", default="", help="NN=k,...: every k-th x value of tutorial NN")
    ap.add_argument("--rounds", default="", help="NN=r,...: run tutorial NN r times a side, the sides alternating, and "
                    "keep each side's best value a point (its host path's noise only ever adds time)")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    stride = DEFAULT_STRIDE | {k: int(v) for k, v in (s.split("=") for s in args.stride.split(",") if s)}
    files = sorted(p for p in args.tutorials.iterdir() if TUTORIAL.match(p.name) and p.name[:2] in args.only.split(","))
    site = Path(tempfile.mkdtemp(prefix="tilec-tutorial-timings-"))
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    print(f"{'tutorial / plot':44s} {'x':24s} {'provider':12s} {'unit':10s} {'Triton':>9s} {'tilec':>9s} {'ratio':>6s}")
    ratios, out = [], []
    rounds = {k: int(v) for k, v in (s.split("=") for s in args.rounds.split(",") if s)}
    for path in files:
        got: dict = {"triton": {}, "tilec": {}}
        spread: dict = {}
        for rnd, mode in [(r, m) for r in range(rounds.get(path.name[:2], 1)) for m in ("triton", "tilec")]:
            rec_file = site / f"{path.stem}.{mode}.{rnd}.jsonl"
            env = {**os.environ, "TILEC_BENCH_OUT": str(rec_file), "TILEC_BENCH_STRIDE": str(stride.get(path.name[:2], 1)),
                   "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
            env.pop("TILEC_TRITON", None)
            cmd = [sys.executable, str(path)] if mode == "triton" else [sys.executable, "-m", "tilec", "run", str(path)]
            res = run_one(cmd, env, args.timeout)
            recs = [json.loads(x) for x in rec_file.read_text().splitlines()] if rec_file.exists() else []
            for r in recs:
                k, kept = key(r), got[mode].get(key(r))
                if r.get("y") is not None:
                    spread.setdefault((mode, k), []).append(r["y"])
                lower_better = "ms" in str(r.get("ylabel")).lower()
                if kept is None or kept.get("y") is None or (r.get("y") is not None and
                                                             (r["y"] < kept["y"] if lower_better else r["y"] > kept["y"])):  # fmt: skip
                    got[mode][k] = r
            if res["rc"] != 0:
                last = (res["stderr"].strip().splitlines() or ["?"])[-1]
                print(f"{path.name}: {mode} run exit {res['rc']} after {res['seconds']} s: {last[:200]}")
        for k, t in got["triton"].items():
            c = got["tilec"].get(k, {"error": "no value (the tilec run ended before it)"})
            row = {"tutorial": path.name, "plot": k[0], "x": t["x"], "provider": k[2], "unit": t.get("ylabel"),
                   "triton": t.get("y"), "tilec": c.get("y"), "error": t.get("error") or c.get("error")}  # fmt: skip
            xs = ",".join(f"{n}={v}" for n, v in t["x"].items())
            if row["error"] is None and row["triton"] and row["tilec"]:
                lower_better = "ms" in str(row["unit"]).lower()
                row["ratio"] = row["triton"] / row["tilec"] if lower_better else row["tilec"] / row["triton"]
                ratios.append(row["ratio"])
                seen = [spread.get((m, k), []) for m in ("triton", "tilec")]
                noise = max((max(v) / min(v) for v in seen if len(v) > 1 and min(v) > 0), default=None)
                row["spread"] = noise
                print(f"{path.name[:20] + ' / ' + str(k[0])[:21]:44s} {xs[:24]:24s} {k[2][:12]:12s} "
                      f"{str(row['unit'])[:10]:10s} {row['triton']:9.3f} {row['tilec']:9.3f} {row['ratio']:6.2f}"
                      + (f"  (rounds differ up to {noise:.2f}x)" if noise else ""))  # fmt: skip
            else:
                print(f"{path.name[:20] + ' / ' + str(k[0])[:21]:44s} {xs[:24]:24s} {k[2][:12]:12s} {row['error']}")
            out.append(row)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean {geo:.3f} over {len(ratios)} points; worst {min(ratios):.2f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

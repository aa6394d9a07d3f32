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
    _FIRST = int(os.environ.get("TILEC_BENCH_FIRST", "1"))  # how many times the first x value is timed
    _DIST = os.environ.get("TILEC_BENCH_DIST") == "1"
    _POINTS = int(os.environ.get("TILEC_BENCH_POINTS", "0")) or None  # the readings a benchmark takes at most
    _last = {}

    if _DIST:  # each do_bench's every time, the host time of each call it times, and the collector's passes
        import gc, statistics, time

        _do_bench = _tt.do_bench

        def _dist_bench(fn, *args, quantiles=None, return_mode="mean", **kwargs):
            host, passes = [], []

            def timed():
                t = time.perf_counter_ns()
                fn()
                host.append(time.perf_counter_ns() - t)

            def seen(phase, info):
                passes.append((phase, time.perf_counter_ns(), info.get("generation")))

            gc.callbacks.append(seen)
            try:
                times = _do_bench(timed, *args, return_mode="all", **kwargs)
            finally:
                gc.callbacks.remove(seen)
            q = lambda v, f: sorted(v)[min(len(v) - 1, int(f * len(v)))]
            gc_ns = [b[1] - a[1] for a, b in zip(passes[::2], passes[1::2])]
            _last.update(n=len(times), t_min=min(times), t_p20=q(times, .2), t_p50=q(times, .5), t_p80=q(times, .8),
                         host_us_p20=q(host, .2) / 1e3, host_us_p50=q(host, .5) / 1e3, host_us_p80=q(host, .8) / 1e3,
                         gc_passes=len(gc_ns), gc_gen2=sum(1 for p in passes[::2] if p[2] == 2),
                         gc_ms=sum(gc_ns) / 1e6)
            if quantiles is not None:
                out = [q(times, f) for f in quantiles]
                return out[0] if len(out) == 1 else out
            return {"all": times, "min": min(times), "max": max(times), "median": statistics.median(times)}.get(
                return_mode, statistics.mean(times))

        _tt.do_bench = _dist_bench

    class _Timed:
        def __init__(self, fn, benchmarks):
            self.fn, self.benchmarks = fn, benchmarks if isinstance(benchmarks, list) else [benchmarks]

        def __call__(self, *args, **kwargs):
            return self.fn(*args, **kwargs)

        def run(self, *args, **kwargs):
            for b in self.benchmarks:
                xv = list(b.x_vals[::_STRIDE])
                for x in (xv[:1] * (_FIRST - 1) + xv)[:_POINTS]:
                    xs = dict(zip(b.x_names, x if isinstance(x, (list, tuple)) else [x] * len(b.x_names)))
                    for prov in b.line_vals:
                        if not str(prov).startswith("triton"):
                            continue
                        try:
                            y = self.fn(**xs, **{b.line_arg: prov}, **b.args)
                            y = float(y[0] if isinstance(y, (list, tuple)) else y)
                            rec = {"plot": b.plot_name, "x": xs, "provider": prov, "y": y, "ylabel": b.ylabel}
                            if _last:
                                rec["dist"] = dict(_last)
                                _last.clear()
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
    ap.add_argument("--first", type=int, default=1, help="time each benchmark's first x value this many times")
    ap.add_argument("--points", type=int, default=0, help="at most this many readings a benchmark (0: all)")
    ap.add_argument("--dist", action="store_true", help="print each reading's spread: do_bench's times, the host time "
                    "of the calls it timed, the garbage collector's passes in it")
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
            env |= {"TILEC_BENCH_FIRST": str(args.first), "TILEC_BENCH_POINTS": str(args.points)} | ({"TILEC_BENCH_DIST": "1"} if args.dist else {})
            cmd = [sys.executable, str(path)] if mode == "triton" else [sys.executable, "-m", "tilec", "run", str(path)]
            res = run_one(cmd, env, args.timeout)
            recs = [json.loads(x) for x in rec_file.read_text().splitlines()] if rec_file.exists() else []
            for r in recs:
                if args.dist and r.get("dist"):
                    d, xs = r["dist"], ",".join(f"{n}={v}" for n, v in r["x"].items())
                    print(f"  {path.name[:2]} {mode:6s} round {rnd} {xs[:24]:24s} {r['y']:10.3f}  do_bench ms "
                          f"min {d['t_min']:.4f} p20 {d['t_p20']:.4f} p50 {d['t_p50']:.4f} p80 {d['t_p80']:.4f} (n {d['n']}); "
                          f"host us p20 {d['host_us_p20']:.1f} p50 {d['host_us_p50']:.1f} p80 {d['host_us_p80']:.1f}; "
                          f"gc {d['gc_passes']} passes ({d['gc_gen2']} full) {d['gc_ms']:.1f} ms")  # fmt: skip
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

"""Tutorial 03 (the matmul, as published) at its small points, every autotune config timed alone under plain
Triton and under the drop-in, each side in a process of its own: which configs tilec builds slower, and which
config each side's autotuner picks for the tutorial's own `matmul(a, b)`. Per point and config:

- graph: 20 launches of the config (the tutorial's kernel, its grid) captured in a CUDA graph and replayed, so
  no host time and L2 warm;
- cold: triton.testing.do_bench of one launch (median, L2 cleared before each), the kernel-bound reading the
  tutorial's benchmark takes when its host time keeps up.

Usage (GPU machine, repo root): python3 bench/tutorial03_configs.py [TUTORIALS_DIR] [--points fp16:256,fp16:768]
Under Nsight Compute, one side and one config: T03_ONCE="128x128x32 g8 w4 s4" python3 bench/tutorial03_configs.py
--child {triton|tilec} TUTORIALS_DIR fp16:1280
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_time  # noqa: E402
from dropin_host import _matrices, args03  # noqa: E402
from tutorials import load_head  # noqa: E402

DEFAULT_POINTS = "fp16:256,fp16:768,fp16:1280,fp8:256,fp8:768,fp8:1280"


def _cfg_text(cfg) -> str:  # type: ignore[no-untyped-def]
    kw = cfg.kwargs
    return (f"{kw['BLOCK_SIZE_M']}x{kw['BLOCK_SIZE_N']}x{kw['BLOCK_SIZE_K']} g{kw['GROUP_SIZE_M']} "
            f"w{cfg.num_warps} s{cfg.num_stages}")  # fmt: skip


def _launcher(tuner, cfg, args: tuple, n: int):  # type: ignore[no-untyped-def]
    """One launch of the tutorial's kernel at `cfg`, without its autotuner, on the tutorial's grid."""
    import triton

    grid = (triton.cdiv(n, cfg.kwargs["BLOCK_SIZE_M"]) * triton.cdiv(n, cfg.kwargs["BLOCK_SIZE_N"]),)
    return lambda: tuner.fn.run(*args, ACTIVATION="", grid=grid, warmup=False, **cfg.all_kwargs())


def child(mode: str, tutorials: Path, points: list[tuple[str, int]]) -> None:
    if mode == "tilec":
        import tilec

        tilec.install(strict=True)
    import torch
    import triton

    mod = load_head(tutorials / "03-matrix-multiplication.py")
    tuner = mod.matmul_kernel
    once = os.environ.get("T03_ONCE")  # "128x128x32 g8 w4 s4": that config alone, launched 3 times (for ncu)
    for dtype, n in points:
        a, b = _matrices(dtype, n)
        c = torch.empty((n, n), device="cuda", dtype=torch.float16)
        args = args03(a, b, c, n)
        if once:
            for cfg in [cf for cf in tuner.configs if _cfg_text(cf) == once]:
                launch = _launcher(tuner, cfg, args, n)
                for _ in range(3):
                    launch()
                torch.cuda.synchronize()
            continue
        mod.matmul(a, b)  # the tutorial's call: its autotuner's choice for this point
        chosen = _cfg_text(tuner.best_config)
        for cfg in tuner.configs:
            launch = _launcher(tuner, cfg, args, n)
            row = {"mode": mode, "dtype": dtype, "n": n, "config": _cfg_text(cfg), "chosen": chosen}
            try:
                launch()
                torch.cuda.synchronize()
                row["graph_us"] = graph_time.graph_us(launch)
                row["cold_us"] = (
                    triton.testing.do_bench(launch, warmup=10, rep=50, return_mode="median") * 1e3
                )
            except Exception as exc:  # noqa: BLE001 - a config that cannot build or run is reported as such
                row["error"] = f"{type(exc).__name__}: {exc}"[:160]
            print("ROW " + json.dumps(row), flush=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        pts = [(p.split(":")[0], int(p.split(":")[1])) for p in sys.argv[4].split(",")]
        child(sys.argv[2], Path(sys.argv[3]), pts)
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tutorials", nargs="?", default=".wt/tutorials")
    ap.add_argument("--points", default=DEFAULT_POINTS)
    ns = ap.parse_args()
    rows: dict[tuple, dict] = {}
    for mode in ("triton", "tilec"):
        env = {**os.environ, "TILEC_CACHE_DIR": tempfile.mkdtemp(prefix=f"t03cfg_{mode}_")}
        env.pop("TILEC_TRITON", None)
        out = subprocess.run([sys.executable, __file__, "--child", mode, str(Path(ns.tutorials).resolve()), ns.points],
                             env=env, capture_output=True, text=True, check=False)  # fmt: skip
        for line in out.stdout.splitlines():
            if line.startswith("ROW "):
                r = json.loads(line[4:])
                rows[(r["dtype"], r["n"], r["config"], mode)] = r
        if out.returncode:
            print(f"{mode} child exited {out.returncode}: {out.stderr[-600:]}")
    print(f"{'point':11s} {'config':24s} {'Triton graph':>12s} {'tilec graph':>11s} {'ratio':>6s} "
          f"{'Triton cold':>11s} {'tilec cold':>10s} {'ratio':>6s}  chosen")  # fmt: skip
    seen = []
    for dtype, n, cfg, mode in rows:
        if mode == "triton" and (dtype, n, cfg) not in seen:
            seen.append((dtype, n, cfg))
    for dtype, n, cfg in seen:
        tri, til = rows.get((dtype, n, cfg, "triton"), {}), rows.get((dtype, n, cfg, "tilec"), {})
        marks = ("T" if tri.get("chosen") == cfg else " ") + ("t" if til.get("chosen") == cfg else " ")

        def f(r: dict, k: str) -> str:
            return f"{r[k]:.2f}" if k in r else r.get("error", "-")[:10]

        def ratio(k: str, tri: dict = tri, til: dict = til) -> str:
            return f"{tri[k] / til[k]:.2f}" if k in tri and k in til else "-"

        print(f"{dtype}:{n:<6d} {cfg:24s} {f(tri, 'graph_us'):>12s} {f(til, 'graph_us'):>11s} {ratio('graph_us'):>6s} "
              f"{f(tri, 'cold_us'):>11s} {f(til, 'cold_us'):>10s} {ratio('cold_us'):>6s}  {marks}")  # fmt: skip
    print("ratio: Triton's time / tilec's (above 1: tilec faster); chosen: T Triton's autotuner, t tilec's")


if __name__ == "__main__":
    main()

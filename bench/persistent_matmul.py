"""The persistent rung of the Hopper matmul ladder, on one GPU in one run: tests/kernels/matmul_persistent.py
(one program per SM walking the output tiles in grouped order) under real Triton and under tilec's cuda:sm_90
(wgmma), beside the tutorial's non-persistent matmul on both (bench/wgmma_matmul.py's builders).

Correctness first (odd sizes with masked edges, fp16, outputs poisoned with NaN, both sides), then speed at
fp16 4096^3 and 8192^3 per config and the best of the configs, each timed with triton.testing.do_bench
(median, L2 flushed).
Usage (device, repo root): PYTHONPATH=$PWD python3 bench/persistent_matmul.py [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path

import torch
import triton

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.cuda import launch
from tilec.runtime.launch import specialise

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import wgmma_matmul as tutorial  # noqa: E402 - the tutorial matmul's builders and operands

SRC = (ROOT / "tests/kernels/matmul_persistent.py").read_text()
NAMES = tutorial.NAMES
CONFIGS = [
    (128, 256, 64, 8, 3),
    (128, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 256, 64, 8, 4),
    (128, 128, 32, 4, 4),
]
GROUP_M = 8


def num_sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count


def triton_persistent():
    spec = importlib.util.spec_from_file_location(
        "persistent_matmul", ROOT / "tests/kernels/matmul_persistent.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.matmul_persistent


def persistent_grid(cfg: tuple, m: int, n: int) -> int:
    return min(num_sms(), triton.cdiv(m, cfg[0]) * triton.cdiv(n, cfg[1]))


_ARTS: dict = {}


def tilec_fn(cfg: tuple, args: list):
    bm, bn, bk, nw, ns = cfg
    specs = {n: specialise(n, v) for n, v in zip(NAMES, args, strict=True)}
    key = (cfg, tuple(sorted(specs.items())))
    art = _ARTS.get(key)
    if art is None:
        art = compile_kernel(SRC, "matmul_persistent", signature={n: s.type for n, s in specs.items()},
                             constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M,
                                         "NUM_SMS": num_sms()},
                             hints={n: dict(s.hints) for n, s in specs.items() if s.hints},
                             options=CompileOptions(target="cuda:sm_90", num_warps=nw, num_stages=ns), emit="cubin")  # fmt: skip
        _ARTS[key] = art
    grid = (persistent_grid(cfg, args[3], args[4]), 1, 1)
    return (lambda: launch(art, args, grid)), art


def triton_fn(tk, cfg: tuple, args: list):
    bm, bn, bk, nw, ns = cfg
    grid = (persistent_grid(cfg, args[3], args[4]),)
    return lambda: tk[grid](*args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M, NUM_SMS=num_sms(),
                            num_warps=nw, num_stages=ns)  # fmt: skip


def correctness(tk, quick: bool) -> list[dict]:
    rows = []
    cases = [
        ((1000, 1000, 1008), CONFIGS[:2]),
        ((517, 389, 1000), CONFIGS[1:2]),
        ((2048, 2048, 512), CONFIGS),
    ]
    for (m, n, k), cfgs in cases[:2] if quick else cases:
        for cfg in cfgs:
            for side in ("tilec", "triton"):
                a, b, c, args = tutorial.operands(m, n, k, torch.float16)
                row = {"m": m, "n": n, "k": k, "cfg": cfg, "side": side}
                try:
                    fn = tilec_fn(cfg, args)[0] if side == "tilec" else triton_fn(tk, cfg, args)
                    fn()
                    torch.cuda.synchronize()
                    row["err"] = tutorial.rel_err(c.float(), a.float() @ b.float())
                    row["nan"] = bool(torch.isnan(c).any())
                    row["ok"] = row["err"] < 1e-2 and not row["nan"]
                except Exception as exc:  # noqa: BLE001 - the table reports it and the run goes on
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
                    row["ok"] = False
                    traceback.print_exc()
                rows.append(row)
                print(("ok  " if row["ok"] else "FAIL") + " " + json.dumps(row), flush=True)
    return rows


def speed(tk, quick: bool) -> list[dict]:
    tut = tutorial.triton_kernel()
    rows = []
    for s in (4096,) if quick else (4096, 8192):
        a, b, c, args = tutorial.operands(s, s, s, torch.float16)
        ref = a.float() @ b.float()
        for cfg in CONFIGS:
            row = {"size": s, "cfg": cfg}
            fns = {}
            for side, make in (
                ("triton_persistent", lambda cfg=cfg, args=args: triton_fn(tk, cfg, args)),
                ("tilec_persistent", lambda cfg=cfg, args=args: tilec_fn(cfg, args)[0]),
                ("triton_tutorial", lambda cfg=cfg, args=args: tutorial.triton_fn(tut, cfg, args)),
                ("tilec_tutorial", lambda cfg=cfg, args=args: tutorial.tilec_fn("sm90a", cfg, args)[0]),
            ):
                try:
                    fns[side] = make()
                except Exception as exc:  # noqa: BLE001
                    row[f"{side}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            for side, fn in fns.items():
                try:
                    c.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    row[f"{side}_err"] = tutorial.rel_err(c.float(), ref)
                    ms = tutorial.bench(fn)
                    row[f"{side}_tflops"] = 2 * s**3 / ms / 1e9
                except Exception as exc:  # noqa: BLE001
                    row[f"{side}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    return rows


def table(corr: list[dict], rows: list[dict]) -> None:
    bad = [r for r in corr if not r["ok"]]
    print(f"\ncorrectness: {len(corr) - len(bad)}/{len(corr)} ok")
    for r in bad:
        print("  FAIL", r)
    sides = ["triton_tutorial", "triton_persistent", "tilec_tutorial", "tilec_persistent"]
    print(f"\n{'size':>5} {'config':24} " + " ".join(f"{s:>18}" for s in sides) + "  TFLOP/s")
    best: dict = {}
    for r in rows:
        vals = [r.get(f"{s}_tflops") or 0.0 for s in sides]
        for s, v in zip(sides, vals, strict=True):
            best[(r["size"], s)] = max(best.get((r["size"], s), 0.0), v)
        print(f"{r['size']:>5} {str(r['cfg']):24} " + " ".join(f"{v:18.1f}" for v in vals))
    for size in sorted({k[0] for k in best}):
        v = {s: best[(size, s)] for s in sides}
        anchor = max(v["triton_tutorial"], v["triton_persistent"])
        print(f"best of configs {size}: " + ", ".join(f"{k} {x:.1f}" for k, x in v.items())
              + f"; tilec persistent / best Triton {v['tilec_persistent'] / anchor if anchor else 0:.2f}"
              + f"; best tilec / best Triton {max(v['tilec_tutorial'], v['tilec_persistent']) / anchor if anchor else 0:.2f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, f"{num_sms()} SMs", flush=True)
    tk = triton_persistent()
    t0 = time.perf_counter()
    corr = correctness(tk, args.quick)
    rows = speed(tk, args.quick)
    print(f"took {time.perf_counter() - t0:.1f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "correctness": corr, "speed": rows},
                                              indent=1, default=str))  # fmt: skip
    table(corr, rows)


if __name__ == "__main__":
    main()

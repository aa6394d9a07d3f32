"""C = A @ B.T (B stored N x K, `tl.dot(a, b.T)`, tests/kernels/matmul_bt.py) under Triton and tilec cuda:sm_90
in one run: correctness against torch at odd sizes (masked edges, K not a multiple of the block), then fp16
4096^3 per config with triton.testing.do_bench (median, L2 flushed), and whether tilec's K loop is pipelined
(the trans-load pass turns the transposed load into a load that the cp.async ring takes).
Usage (device, repo root): PYTHONPATH=$PWD python3 bench/matmul_bt.py [--json OUT] [--configs 64x64x32:w2:s4,...]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch
import triton

from tilec import client

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 64, 4, 4)]


def triton_kernel():
    spec = importlib.util.spec_from_file_location("matmul_bt", ROOT / "tests/kernels/matmul_bt.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.matmul_bt_kernel


def run(side, kern, cfg, a, b, c) -> None:
    bm, bn, bk, nw, ns = cfg
    m, k = a.shape
    n = b.shape[0]
    grid = (triton.cdiv(m, bm), triton.cdiv(n, bn))
    kern[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
               num_warps=nw, num_stages=ns)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--configs", default="", help="BMxBNxBK:wW:sS,... in place of the default configs")
    args = ap.parse_args()
    configs = [(*map(int, c.split(":")[0].split("x")), int(c.split(":")[1][1:]), int(c.split(":")[2][1:]))
               for c in args.configs.split(",") if c] or CONFIGS  # fmt: skip
    sides = {"triton": triton_kernel(), "tilec": client.jit((ROOT / "tests/kernels/matmul_bt.py").read_text(),
                                                             "matmul_bt_kernel")}  # fmt: skip
    rows = []
    for m, n, k in ((1000, 1000, 1008), (517, 389, 1000), (4096, 4096, 4096)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(n, k, device="cuda", dtype=torch.float16)
        ref = a.float() @ b.float().T
        for cfg in configs:
            row = {"m": m, "n": n, "k": k, "cfg": cfg}
            for side, kern in sides.items():
                c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
                run(side, kern, cfg, a, b, c)
                torch.cuda.synchronize()
                row[f"{side}_err"] = float((c.float() - ref).norm() / ref.norm())
                if m == 4096:
                    fn = lambda s=side, kk=kern, g=cfg, x=a, y=b, z=c: run(s, kk, g, x, y, z)  # noqa: E731
                    ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
                    row[f"{side}_tflops"] = 2 * m * n * k / ms / 1e9
            art = next(iter(sides["tilec"].cache.values()))
            row["tilec_pipelined"] = art.metadata.get("pipelined_loops")
            sides["tilec"].cache.clear()
            row["ok"] = max(row["triton_err"], row["tilec_err"]) < 1e-2
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"correct: {sum(r['ok'] for r in rows)}/{len(rows)}")
    fast = [r for r in rows if "tilec_tflops" in r]
    bt, bc = max(r["triton_tflops"] for r in fast), max(r["tilec_tflops"] for r in fast)
    print(f"best of configs 4096: triton {bt:.1f}, tilec {bc:.1f} TFLOP/s; ratio {bc / bt:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

"""FlagGems' bmm kernel (its ops/bmm.py as published, decorators set aside) at each config of its tuning list:
Triton's build against tilec's builds under codegen variants (CudaOptions fields), each launched alone in CUDA
graphs (20 launches a replay, best of 5: kernels only, L2 warm), outputs checked against torch.bmm. The
FlagGems ops table autotunes each side, so a codegen change can move its bmm row by moving the config a side
picks; this says what each config does.

Usage (GPU machine, repo root, FlagGems at .wt/flaggems):
python3 bench/bmm_variants.py [--variants uniform_advance_offset=1] [--shape 16,1024,1024,1024]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_time  # noqa: E402
from static_compare import _function_source  # noqa: E402
from t03_variants import parse_variants, source_module, variant_cell  # noqa: E402

from tilec.compiler.artifact import CompileOptions  # noqa: E402

NAMES = ["A", "B", "O", "M", "N", "K"]
# FlagGems' tuning list for bmm on NVIDIA (runtime/backend/_nvidia/tune_configs.yaml): TILE_K 32, 4 warps
CONFIGS = [(m, n, g, s) for s in (2, 3) for m, n, g in ((32, 32, 1), (64, 32, 2), (64, 64, 2), (128, 32, 2), (128, 64, 2), (128, 128, 2))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flaggems", default=".wt/flaggems")
    ap.add_argument("--variants", default="uniform_advance_offset=1", help="field=0|1,...; ';' between variants")
    ap.add_argument("--shape", default="16,1024,1024,1024", help="batch,M,N,K")
    ns = ap.parse_args()
    batch, m, n, k = (int(x) for x in ns.shape.split(","))
    src = _function_source(Path(ns.flaggems) / "src/flag_gems/ops/bmm.py", "bmm_kernel").replace("tle.", "tl.")
    mod = source_module(src, "fg_bmm")
    variants = parse_variants(ns.variants)
    torch.manual_seed(0)
    a = torch.randn((batch, m, k), device="cuda", dtype=torch.float16)
    b = torch.randn((batch, k, n), device="cuda", dtype=torch.float16)
    ref = torch.bmm(a, b)
    out = torch.empty_like(ref)
    print(f"{'config':22s} {'Triton us':>9s} " + " ".join(f"{v[:26]:>26s}" for v in variants) + "  (ratio Triton/tilec)")
    for tm, tn, gm, st in CONFIGS:
        consts = {"TILE_M": tm, "TILE_N": tn, "TILE_K": 32, "GROUP_M": gm, "DIVISIBLE_M": m % tm == 0,
                  "DIVISIBLE_N": n % tn == 0, "DIVISIBLE_K": k % 32 == 0}  # fmt: skip
        grid = (triton.cdiv(m, tm), triton.cdiv(n, tn), batch)
        args = [a, b, out, m, n, k]

        def tri(grid=grid, consts=consts, st=st, args=args) -> None:
            mod.bmm_kernel[grid](*args, **consts, num_warps=4, num_stages=st)

        tri()
        torch.testing.assert_close(out, ref, atol=0.5, rtol=0.02)
        t_tri = graph_time.graph_us(tri, replays=5, best=True)
        cells = [variant_cell(src, "bmm_kernel", dict(zip(NAMES, args, strict=True)), consts, grid,
                              CompileOptions(target="cuda:sm_90", num_warps=4, num_stages=st, cuda=opts), out, ref,
                              0.5, t_tri) for opts in variants.values()]  # fmt: skip
        print(f"{f'{tm}x{tn}x32 g{gm} w4 s{st}':22s} {t_tri:9.2f} " + " ".join(f"{x:>26s}" for x in cells), flush=True)


if __name__ == "__main__":
    main()

"""FlagGems' argmax kernel (its source, as bench/static_compare.py reads it) at the shape bench/flaggems_ops.py
times it, [4096, 4096] fp32 along rows with its heuristics' blocks (8 x 4096, 4 warps): Triton's build against
tilec's builds under codegen variants (CudaOptions fields), each launched alone in CUDA graphs (20 launches a
replay, best of 5: kernels only), the indices checked against torch.argmax. Says which way of reducing a thread's
registers is faster before the ops table does.

Usage (GPU machine, repo root, FlagGems' src under .wt/flaggems):
    python3 bench/argmax_variants.py [--variants "argmax_passes=2"] [--rows 4096] [--cols 4096]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_time  # noqa: E402
from static_compare import _cases  # noqa: E402
from t03_variants import parse_variants, source_module  # noqa: E402

from tilec.compiler.artifact import CompileOptions  # noqa: E402
from tilec.compiler.pipeline import compile_kernel  # noqa: E402
from tilec.runtime.cuda import launch  # noqa: E402
from tilec.runtime.launch import specialise  # noqa: E402

NAMES = ["inp", "out_index", "M", "N", "K"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flaggems", default=".wt/flaggems")
    ap.add_argument("--variants", default="argmax_passes=2", help="field=int,...; ';' between variants")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ns = ap.parse_args()
    src, name, _sig, consts, _div, warps, stages, _ones = _cases(Path(ns.flaggems))["argmax_fg"]
    mod = source_module(src, "fg_argmax")
    variants = parse_variants(ns.variants)
    m, n = ns.rows, ns.cols
    torch.manual_seed(0)
    x = torch.randn((m, n), device="cuda")
    want = torch.argmax(x, dim=1)
    out = torch.empty(m, device="cuda", dtype=torch.int64)
    args = [x, out, m, n, 1]
    grid = (triton.cdiv(m, consts["BLOCK_M"]), 1, 1)

    def tri() -> None:
        mod.argmax_kernel[grid[:2]](*args, **consts, num_warps=warps, num_stages=stages)

    tri()
    assert torch.equal(out, want), "Triton's indices differ from torch.argmax"
    t_tri = graph_time.graph_us(tri, replays=5, best=True)
    print(f"argmax [{m}, {n}] fp32, blocks {consts['BLOCK_M']}x{consts['BLOCK_N']} w{warps}: Triton {t_tri:.2f} us")
    specs = {nm: specialise(nm, v) for nm, v in zip(NAMES, args, strict=True)}
    for label, opts in variants.items():
        art = compile_kernel(src, name, signature={nm: s.type for nm, s in specs.items()}, constexprs=consts,
                             hints={nm: dict(s.hints) for nm, s in specs.items() if s.hints},
                             options=CompileOptions(target="cuda:sm_90", num_warps=warps, num_stages=stages, cuda=opts),
                             emit="cubin")  # fmt: skip
        out.zero_()

        def til(art=art) -> None:
            launch(art, args, grid)

        til()
        torch.cuda.synchronize()
        ok = torch.equal(out, want)
        t = graph_time.graph_us(til, replays=5, best=True)
        print(f"  {label:24s} {t:8.2f} us  ratio {t_tri / t:5.2f}  regs {int(art.metadata['registers'])}"
              f"{'' if ok else '  WRONG'}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""Tutorial 03's kernel (as published, its autotune decorator set aside) at fixed configs: Triton's build against
tilec's builds under codegen variants (CudaOptions fields), each launched alone in CUDA graphs (20 launches a
replay, best of 5: kernels only, L2 warm), outputs checked against torch. Says whether a codegen change moves a
config's per-iteration time, before the tutorial's own benchmark does.

Usage (GPU machine, repo root): python3 bench/t03_variants.py [TUTORIAL_03] [--variants uniform_advance_offset=1]
[--configs 64x32x32:w2:s5,...] [--sizes 1280,4096] [--target cuda:sm_80]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent))
import graph_time  # noqa: E402
from dropin_host import args03  # noqa: E402
from static_compare import tutorial03_source  # noqa: E402

from tilec.compiler.artifact import CompileOptions, CudaOptions  # noqa: E402
from tilec.compiler.pipeline import compile_kernel  # noqa: E402
from tilec.runtime.cuda import launch  # noqa: E402
from tilec.runtime.launch import specialise  # noqa: E402

NAMES = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
         "stride_cn"]  # fmt: skip
CONFIGS = [(128, 128, 32, 4, 4), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (128, 256, 64, 8, 3)]
SIZES = [768, 1280, 4096]


def source_module(src: str, name: str):
    """`src` imported as module `name` from a file of its own (Triton reads a kernel's source from its file)."""
    import importlib.util

    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def parse_variants(text: str) -> dict[str, CudaOptions]:
    """'field=int,...;...' -> {label: CudaOptions}, the defaults first as 'default'."""
    variants = {"default": CudaOptions()}
    for v in [v for v in text.split(";") if v]:
        fields = dict(kv.split("=") for kv in v.split(","))
        variants[v] = CudaOptions(**{k: type(getattr(CudaOptions(), k))(int(x)) for k, x in fields.items()})
    return variants


def variant_cell(src: str, name: str, args: dict, consts: dict, grid: tuple, options: CompileOptions, out, ref,
                 atol: float, t_tri: float) -> str:
    """tilec's build of `name` under `options`, launched on `args` (name -> value; `out` is among them) into `out`,
    checked against `ref`, timed in CUDA graphs: 'us ratio-to-Triton registers' (WRONG where it is)."""
    specs = {nm: specialise(nm, v) for nm, v in args.items()}
    art = compile_kernel(src, name, signature={nm: s.type for nm, s in specs.items()}, constexprs=consts,
                         hints={nm: dict(s.hints) for nm, s in specs.items() if s.hints}, options=options,
                         emit="cubin")  # fmt: skip
    out.zero_()
    values = list(args.values())

    def til() -> None:
        launch(art, values, grid)

    til()
    torch.cuda.synchronize()
    ok = torch.allclose(out.float(), ref.float(), atol=atol, rtol=0.02)
    t = graph_time.graph_us(til, replays=5, best=True)
    return f"{t:7.2f} {t_tri / t:5.2f} r{int(art.metadata['registers']):3d}{'' if ok else ' WRONG'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tutorial", nargs="?", default=".wt/tutorials/03-matrix-multiplication.py")
    ap.add_argument(
        "--variants", default="uniform_advance_offset=1", help="name:field=0|1,...; ';' between variants"
    )
    ap.add_argument(
        "--configs", default="", help="BMxBNxBK:wW:sS,... in place of the default configs (e.g. 64x32x32:w2:s5)"
    )
    ap.add_argument("--sizes", default="", help="n,... in place of the default sizes")
    ap.add_argument("--target", default="cuda:sm_90a", help="tilec's target (cuda:sm_80: mma.sync at any warps)")
    ns = ap.parse_args()
    configs = [(*map(int, c.split(":")[0].split("x")), int(c.split(":")[1][1:]), int(c.split(":")[2][1:]))
               for c in ns.configs.split(",") if c] or CONFIGS  # fmt: skip
    sizes = [int(x) for x in ns.sizes.split(",") if x] or SIZES
    src = tutorial03_source(Path(ns.tutorial))
    mod = source_module(src, "t03_kernel")
    variants = parse_variants(ns.variants)
    print(
        f"{'n':>5s} {'config':18s} {'Triton us':>9s} "
        + " ".join(f"{k[:26]:>26s}" for k in variants)
        + "  (ratio Triton/tilec)"
    )
    for n in sizes:
        torch.manual_seed(0)
        a = torch.randn((n, n), device="cuda", dtype=torch.float16)
        b = torch.randn((n, n), device="cuda", dtype=torch.float16)
        ref = (a.float() @ b.float()).half()
        for bm, bn, bk, w, st in configs:
            grid = (triton.cdiv(n, bm) * triton.cdiv(n, bn),)
            consts = {
                "BLOCK_SIZE_M": bm,
                "BLOCK_SIZE_N": bn,
                "BLOCK_SIZE_K": bk,
                "GROUP_SIZE_M": 8,
                "ACTIVATION": "",
            }
            c = torch.empty((n, n), device="cuda", dtype=torch.float16)
            args = list(args03(a, b, c, n))

            def tri(c=c, grid=grid, consts=consts, w=w, st=st, args=args) -> None:
                mod.matmul_kernel[grid](*args[:2], c, *args[3:], **consts, num_warps=w, num_stages=st)

            try:
                tri()
                torch.testing.assert_close(c, ref, atol=0.25, rtol=0.02)
                t_tri = graph_time.graph_us(tri, replays=5, best=True)
            except Exception as exc:  # noqa: BLE001 - a config Triton cannot build (shared memory) is shown as such
                print(f"{n:5d} {bm}x{bn}x{bk} w{w} s{st}: Triton {type(exc).__name__}")
                continue
            cells = [variant_cell(src, "matmul_kernel", dict(zip(NAMES, args, strict=True)), consts, grid,
                                  CompileOptions(target=ns.target, num_warps=w, num_stages=st, cuda=opts), c, ref,
                                  0.25, t_tri) for opts in variants.values()]  # fmt: skip
            print(f"{n:5d} {f'{bm}x{bn}x{bk} w{w} s{st}':18s} {t_tri:9.2f} " + " ".join(f"{x:>26s}" for x in cells),
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""Flash-attention forward on Hopper, in one run: tests/kernels/attention.py (the tutorial's forward, as a
user writes it) under real Triton and under tilec's cuda:sm_90 (both dots on wgmma), fp16.

First correctness against torch.nn.functional.scaled_dot_product_attention (causal and not, head dim 64
and 128, batch 4, 32 heads, seq 4096 and 1000 (masked key columns and query rows), outputs poisoned with
NaN, every config on tilec, the first on Triton), then speed at seq 4096: each config on both sides with
triton.testing.do_bench (median, L2 flushed), TFLOP/s (4 Z H N^2 D, halved when causal) and the ratio.
tilec variants (the ladder, VARIANTS below): "staged" (P and Q stored to shared memory every iteration, as
the first wgmma path did), "q-once" (Q staged once before each loop), "sm90a-0" (also P from registers),
then the rungs of SPEED_LADDER up to "sm90a" (the default build), timed on each head dim's first config.
Usage (device, repo root): PYTHONPATH=$PWD python3 bench/attention.py [--quick] [--json OUT]
Without a GPU: python bench/attention.py --cpu-smoke (compiles every config for cuda:sm_90 through ptxas
and runs the tilec half on the cpu target with a tiny shape against torch on the CPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import time
import traceback
from pathlib import Path

import torch

from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.launch import ArgSpec, specialise

ROOT = Path(__file__).resolve().parent.parent
SRC = (ROOT / "tests/kernels/attention.py").read_text()
NAMES = ["Q", "K", "V", "Out", "sm_scale"]
NAMES += [f"stride_{t}{d}" for t, row in zip("qkvo", "mnnm", strict=True) for d in ("z", "h", row, "k")]
NAMES += ["H", "N_CTX"]
# (BLOCK_M, BLOCK_N, num_warps, num_stages) per head dim; the first is the one Triton is checked with
CONFIGS = {
    64: [(128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 4), (128, 64, 8, 4)],
    128: [(128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (128, 64, 8, 2)],
}  # 128-row blocks on 4 warps spill at head dim 128 (and causal at 64): left out
# the ladder's rungs: each the cuda codegen options (CudaOptions) it is built with; "sm90a" (all on) is
# the default build. staged/q-once: the first wgmma paths; sm90a-0: this bench's first GPU run's default;
# then exp2 as ex2.approx.ftz with mul+add fused into fma; the warp index made uniform (shfl.sync.idx) and
# the causal second loop reading the Q the first staged; the copies issued after P V's group; P V's group
# left in flight into the next iteration (waited with Q K^T's), as Triton's schedule does ("+in-flight", the
# default until the PTX's `.minnctapersm 1` was dropped); "sm90a" (the default): "+in-flight" without
# `.minnctapersm 1` (leave_occupancy_to_ptxas: ptxas's own heuristic, as Triton's PTX has; causal d=64: 128
# registers, two blocks per SM). (The "+occupancy" rung, a second ptxas run for one more block per SM, went
# with its dead code path: no default build changed under it.)
LADDER_OPTIONS = ["stage_invariants_once", "a_from_registers", "ex2_ftz", "fp_fusion", "uniform_warp", "reuse_staged",
                  "issue_after_last_dot", "mma_in_flight_across", "leave_occupancy_to_ptxas"]  # fmt: skip
_RUNGS = {"staged": 0, "q-once": 1, "sm90a-0": 2, "+ftz-fma": 4, "+uniform": 6, "+copies-late": 7, "+in-flight": 8,
          "sm90a": 9}  # fmt: skip
VARIANTS = {
    name: CudaOptions(**{f: i < on for i, f in enumerate(LADDER_OPTIONS)}) for name, on in _RUNGS.items()
}
assert VARIANTS["sm90a"] == CudaOptions()  # the top rung is the default build
SPEED_LADDER = ["sm90a-0", "+ftz-fma", "+uniform", "+copies-late", "+in-flight", "sm90a"]
QUICK_LADDER = SPEED_LADDER[-3:]  # --quick: the rungs since the previous full run
Z, H = 4, 32


def triton_kernel():
    spec = importlib.util.spec_from_file_location("tutorial_attention", ROOT / "tests/kernels/attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.attn_fwd


def arguments(q, k, v, o, sm_scale: float) -> list:
    strides = [s for t in (q, k, v, o) for s in t.stride()]
    return [q, k, v, o, sm_scale, *strides, q.shape[1], q.shape[2]]


def constexprs(d: int, cfg: tuple, causal: bool, n_ctx: int) -> dict:
    bm, bn, _, _ = cfg
    return {
        "HEAD_DIM": d,
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "STAGE": 3 if causal else 1,
        "MASK_N": n_ctx % bn != 0,
    }


def grid(cfg: tuple, q) -> tuple:
    return (math.ceil(q.shape[2] / cfg[0]), q.shape[0] * q.shape[1], 1)


_ARTS: dict = {}


def build(variant: str, specs: dict[str, ArgSpec], consts: dict, cfg: tuple):
    """tilec's cuda:sm_90 build for these specialisations (compiled once per variant)."""
    key = (variant, cfg, tuple(sorted(consts.items())), tuple(sorted(specs.items())))
    art = _ARTS.get(key)
    if art is None:
        t0 = time.perf_counter()
        options = CompileOptions(
            target="cuda:sm_90", num_warps=cfg[2], num_stages=cfg[3], cuda=VARIANTS[variant]
        )
        art = compile_kernel(SRC, "attn_fwd", signature={n: s.type for n, s in specs.items()}, constexprs=consts,
                             hints={n: dict(s.hints) for n, s in specs.items() if s.hints}, options=options,
                             emit="cubin")  # fmt: skip
        art.metadata["compile_s"] = time.perf_counter() - t0
        _ARTS[key] = art
    return art


def describe(art) -> dict:
    ptx = art.ptx
    return {"target": art.target, "wgmma_smem_a": ptx.count("k16.f32.f16.f16") - ptx.count("}, {"),
            "wgmma_reg_a": ptx.count("}, {"), "pipelined": art.metadata.get("pipelined_loops"),
            "regs": art.metadata.get("registers"), "spills": art.metadata.get("spill_stores"),
            "smem": art.metadata.get("shared_bytes")}  # fmt: skip


def tilec_fn(variant: str, args: list, d: int, cfg: tuple, causal: bool):
    from tilec.runtime.cuda import launch

    q = args[0]
    n_ctx = q.shape[2]
    specs = {n: specialise(n, a) for n, a in zip(NAMES, args, strict=True)}
    art = build(variant, specs, constexprs(d, cfg, causal, n_ctx), cfg)
    g = grid(cfg, q)
    return (lambda: launch(art, args, g)), art


def triton_fn(tk, args: list, d: int, cfg: tuple, causal: bool):
    bm, bn, nw, ns = cfg
    g = grid(cfg, args[0])[:2]
    consts = constexprs(d, cfg, causal, args[0].shape[2])
    return lambda: tk[g](*args, **consts, num_warps=nw, num_stages=ns)


def tensors(n_ctx: int, d: int, device: str = "cuda", z: int = Z, h: int = H):
    gen = torch.Generator(device=device).manual_seed(n_ctx * d)
    q, k, v = (
        torch.randn(z, h, n_ctx, d, device=device, dtype=torch.float16, generator=gen) for _ in range(3)
    )
    o = torch.full_like(q, float("nan"))
    return q, k, v, o


def reference(q, k, v, causal: bool, sm_scale: float):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)


def max_err(got, want) -> float:
    return float((got.float() - want.float()).abs().max())


def correctness(quick: bool, tk) -> list[dict]:
    rows = []
    for d in (64,) if quick else (64, 128):
        for n_ctx in (4096, 1000):
            for causal in (False, True):
                q, k, v, o = tensors(n_ctx, d)
                sm_scale = d**-0.5
                want = reference(q, k, v, causal, sm_scale)
                sides = [("sm90a", cfg) for cfg in CONFIGS[d]] + [("staged", CONFIGS[d][0])]
                sides += [("triton", CONFIGS[d][0])]
                for side, cfg in sides:
                    row = {"d": d, "n_ctx": n_ctx, "causal": causal, "cfg": cfg, "side": side}
                    try:
                        o.fill_(float("nan"))
                        args = arguments(q, k, v, o, sm_scale)
                        if side == "triton":
                            fn = triton_fn(tk, args, d, cfg, causal)
                        else:
                            fn, art = tilec_fn(side, args, d, cfg, causal)
                            row.update(describe(art))
                        fn()
                        torch.cuda.synchronize()
                        row["err"] = max_err(o, want)
                        row["nan"] = bool(torch.isnan(o).any())
                        row["ok"] = row["err"] < 1e-2 and not row["nan"]
                    except Exception as exc:  # noqa: BLE001 - the table reports it and the run goes on
                        row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
                        row["ok"] = False
                        traceback.print_exc()
                    rows.append(row)
                    print(("ok  " if row["ok"] else "FAIL") + " " + json.dumps(row), flush=True)
                del q, k, v, o, want
                torch.cuda.empty_cache()
    return rows


def speed(quick: bool, tk) -> list[dict]:
    import triton

    rows = []
    n_ctx = 4096
    for d in (64,) if quick else (64, 128):
        q, k, v, o = tensors(n_ctx, d)
        sm_scale = d**-0.5
        for causal in (False, True):
            want = reference(q, k, v, causal, sm_scale)
            flops = 4 * Z * H * n_ctx * n_ctx * d * (0.5 if causal else 1.0)
            for cfg in CONFIGS[d][:3] if quick else CONFIGS[d]:
                row = {"d": d, "causal": causal, "cfg": cfg}
                args = arguments(q, k, v, o, sm_scale)
                fns = {"triton": (None, None)}
                ladder = QUICK_LADDER if quick else SPEED_LADDER
                for variant in ladder if cfg == CONFIGS[d][0] else ("sm90a",):
                    fns[variant] = (variant, None)
                for side in fns:
                    try:
                        if side == "triton":
                            fn = triton_fn(tk, args, d, cfg, causal)
                        else:
                            fn, art = tilec_fn(side, args, d, cfg, causal)
                            row[f"{side}_regs"] = art.metadata.get("registers")
                        o.fill_(float("nan"))
                        fn()
                        torch.cuda.synchronize()
                        row[f"{side}_err"] = max_err(o, want)
                        ms = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
                        row[f"{side}_ms"] = ms
                        row[f"{side}_tflops"] = flops / ms / 1e9
                    except Exception as exc:  # noqa: BLE001
                        row[f"{side}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                rows.append(row)
                print(json.dumps(row), flush=True)
        del q, k, v, o
        torch.cuda.empty_cache()
    return rows


def table(corr: list[dict], rows: list[dict]) -> None:
    bad = [r for r in corr if not r["ok"]]
    worst = max((r.get("err", 0.0) for r in corr if r["ok"]), default=0.0)
    print(f"\ncorrectness: {len(corr) - len(bad)}/{len(corr)} ok (worst max abs err {worst:.1e})")
    for r in bad[:20]:
        print("  FAIL", r)
    sides = ["triton", *SPEED_LADDER]
    print(f"\n{'d':>4} {'causal':>6} {'config (BM,BN,w,s)':20} " + " ".join(f"{s:>8}" for s in sides)
          + "   TFLOP/s; sm90a/triton")  # fmt: skip
    best: dict = {}
    for r in rows:
        vals = [r.get(f"{s}_tflops") or 0.0 for s in sides]
        for s, v in zip(sides, vals, strict=True):
            best[(r["d"], r["causal"], s)] = max(best.get((r["d"], r["causal"], s), 0.0), v)
        ratio = vals[sides.index("sm90a")] / vals[0] if vals[0] else 0.0
        print(f"{r['d']:>4} {r['causal']!s:>6} {str(r['cfg']):20} " + " ".join(f"{v:8.1f}" for v in vals)
              + f"   {ratio:.2f}")  # fmt: skip
    for d, causal in sorted({(k[0], k[1]) for k in best}):
        tri, ours = best[(d, causal, "triton")], best[(d, causal, "sm90a")]
        ratio = ours / tri if tri else 0.0
        print(
            f"best of configs d={d} causal={causal}: triton {tri:.1f}, tilec {ours:.1f} TFLOP/s; ratio {ratio:.2f}"
        )


# ---- without a GPU -----------------------------------------------------------------------------


def _host_specs(args: list) -> dict[str, ArgSpec]:
    """The specialisation a CUDA launch would get: tensors (None here) 16-byte aligned, ints as they are."""
    return {n: ArgSpec("*fp16", (("divisibility", 16),)) if a is None else specialise(n, a)
            for n, a in zip(NAMES, args, strict=True)}  # fmt: skip


def cpu_smoke() -> None:
    """Every config and variant compiled for cuda:sm_90 at the bench's shapes (ptxas, sm_90a), then the
    tilec half on the cpu target at a tiny shape against torch on the CPU."""
    from tilec import client

    t0 = time.perf_counter()
    for d, cfgs in CONFIGS.items():
        for n_ctx, causal, cfg in ((n, c, cfg) for n in (4096, 1000) for c in (False, True) for cfg in cfgs):
            strides = [s for _ in range(4) for s in (H * n_ctx * d, n_ctx * d, d, 1)]
            args = [None] * 4 + [d**-0.5, *strides, H, n_ctx]
            for variant in ("staged", "q-once", "sm90a") if cfg == cfgs[0] else ("sm90a",):
                art = build(variant, _host_specs(args), constexprs(d, cfg, causal, n_ctx), cfg)
                info = describe(art)
                assert art.binary[:4] == b"\x7fELF" and info["target"] == "cuda:sm_90a", info
                assert (info["wgmma_reg_a"] > 0) == VARIANTS[variant].a_from_registers, (variant, info)
            print(f"d={d} seq={n_ctx} causal={causal} {cfg}: {json.dumps(info)}", flush=True)
    print(f"compiled {len(_ARTS)} builds for cuda:sm_90 in {time.perf_counter() - t0:.1f} s", flush=True)
    kern = client.jit(SRC, "attn_fwd")
    d, cfg = 64, (64, 32, 4, 2)
    for n_ctx, causal in ((128, False), (100, False), (100, True)):
        q, k, v, o = tensors(n_ctx, d, device="cpu", z=1, h=2)
        args = arguments(q, k, v, o, d**-0.5)
        args[:4] = [t.numpy() for t in (q, k, v, o)]  # the same memory, as NumPy arrays for the cpu target
        kern[grid(cfg, q)](*args, **constexprs(d, cfg, causal, n_ctx))
        err = max_err(o, reference(q.float(), k.float(), v.float(), causal, d**-0.5))
        print(f"cpu target seq={n_ctx} causal={causal}: max abs err {err:.1e} vs torch", flush=True)
        assert err < 1e-2 and not bool(torch.isnan(o).any()), err


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument(
        "--cpu-smoke", action="store_true", help="no GPU: compile every build, run tiny shapes on cpu"
    )
    args = ap.parse_args()
    if args.cpu_smoke:
        cpu_smoke()
        return
    import triton

    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    tk = triton_kernel()
    t0 = time.perf_counter()
    corr = correctness(args.quick, tk)
    print(f"correctness took {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    rows = [] if args.skip_speed else speed(args.quick, tk)
    print(f"speed took {time.perf_counter() - t0:.1f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "correctness": corr,
                                               "speed": rows}, indent=1, default=str))  # fmt: skip
    table(corr, rows)


if __name__ == "__main__":
    main()

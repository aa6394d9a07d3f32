"""Hopper matmul ladder, on one GPU in one run: Triton's tutorial matmul (tests/kernels/matmul.py) under real
Triton and under tilec's cuda:sm_90 (mma.sync) and cuda:sm_90a (wgmma) paths.

First correctness against torch (odd sizes with masked edges, transposed operands through strides,
fp16 and bf16, every tutorial config, fresh random inputs, outputs poisoned with NaN), then speed:
fp16 4096^3 and 8192^3 per tutorial config and the best of the configs, each side timed with
triton.testing.do_bench (median, L2 flushed). tilec variants: "sm90" (mma.sync), "sm90a" (wgmma with
one group in flight where the loop allows, gpu.mma_pending; the default) and "sm90a-p0" (wgmma waited
every iteration).
Usage (device, repo root): PYTHONPATH=$PWD python3 bench/wgmma_matmul.py [--quick] [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import time
import traceback
from pathlib import Path

import torch
import triton

from tilec.compiler.artifact import CompileOptions, CudaOptions
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.cuda import launch
from tilec.runtime.launch import specialise

ROOT = Path(__file__).resolve().parent.parent
SRC = (ROOT / "tests/kernels/matmul.py").read_text()
CONFIGS = [
    (128, 256, 64, 8, 3),
    (64, 256, 32, 4, 4),
    (128, 128, 32, 4, 4),
    (32, 32, 32, 2, 5),
]  # the tutorial's
SPEED_CONFIGS = CONFIGS[:3] + [(128, 128, 64, 8, 3), (128, 256, 64, 8, 4)]  # 32x32x32 on 2 warps is left out
NAMES = (
    "a_ptr",
    "b_ptr",
    "c_ptr",
    "M",
    "N",
    "K",
    "stride_am",
    "stride_ak",
    "stride_bk",
    "stride_bn",
    "stride_cm",
    "stride_cn",
)
# variant: (target, wgmma groups left in flight, cuda:sm_90 takes sm_90a for dots)
VARIANTS = {
    "sm90": ("cuda:sm_90", 1, False),
    "sm90a": ("cuda:sm_90a", 1, True),
    "sm90a-p0": ("cuda:sm_90a", 0, True),
}


def triton_kernel():
    spec = importlib.util.spec_from_file_location("tutorial_matmul", ROOT / "tests/kernels/matmul.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.matmul_kernel  # the Autotuner; .fn is the plain JITFunction


_ARTS: dict = {}


def tilec_fn(variant: str, cfg: tuple, args: list):
    """A launcher of the tilec build of `cfg` for these arguments' specialisation (compiled once)."""
    tgt, pending, auto = VARIANTS[variant]
    bm, bn, bk, nw, ns = cfg
    specs = {n: specialise(n, v) for n, v in zip(NAMES, args, strict=True)}
    key = (variant, cfg, tuple(sorted(specs.items())))
    art = _ARTS.get(key)
    if art is None:
        t0 = time.perf_counter()
        cuda = CudaOptions(wgmma_pending=pending, sm90a_for_dots=auto)
        art = compile_kernel(SRC, "matmul_kernel", signature={n: s.type for n, s in specs.items()},
                             constexprs={"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8,
                                         "ACTIVATION": ""},
                             hints={n: dict(s.hints) for n, s in specs.items() if s.hints},
                             options=CompileOptions(target=tgt, num_warps=nw, num_stages=ns, cuda=cuda), emit="cubin")  # fmt: skip
        art.metadata["compile_s"] = time.perf_counter() - t0
        _ARTS[key] = art
    m, n = args[3], args[4]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), 1, 1)
    return (lambda: launch(art, args, grid)), art


def triton_fn(tk, cfg: tuple, args: list):
    bm, bn, bk, nw, ns = cfg
    m, n = args[3], args[4]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    return lambda: tk.fn[grid](*args, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                               num_warps=nw, num_stages=ns)  # fmt: skip


def operands(m: int, n: int, k: int, dtype, trans_a: bool = False, trans_b: bool = False):
    """A (m x k), B (k x n), C poisoned, and the kernel's arguments. A transposed operand is the transpose
    view of a contiguous tensor; the arguments pass that tensor (the same pointer) with the view's strides,
    since tilec's launcher takes contiguous tensors only."""
    a_mem = (
        torch.randn(k, m, device="cuda", dtype=dtype)
        if trans_a
        else torch.randn(m, k, device="cuda", dtype=dtype)
    )
    b_mem = (
        torch.randn(n, k, device="cuda", dtype=dtype)
        if trans_b
        else torch.randn(k, n, device="cuda", dtype=dtype)
    )
    a = a_mem.t() if trans_a else a_mem
    b = b_mem.t() if trans_b else b_mem
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    strides = [a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)]
    return a, b, c, [a_mem, b_mem, c, m, n, k, *strides]


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    got, ref = got.double(), ref.double()
    return float((got - ref).norm() / ref.norm())


F16, BF16 = torch.float16, torch.bfloat16
T0, T1, T2 = CONFIGS[0], CONFIGS[1], CONFIGS[2]
# (m, n, k), dtype, transpose A, transpose B, configs, variants: 1000/1008 mask the edges of M, N and the
# last K block; K = 1000 (not a multiple of 16) leaves the loads unpipelined, so operands are staged
CASES = [
    ((1000, 1000, 1008), F16, False, False, CONFIGS, ("sm90a", "sm90a-p0")),
    ((517, 389, 1000), F16, False, False, [T0, T2], ("sm90a",)),
    ((512, 512, 512), F16, True, False, [T0, T1, T2], ("sm90a",)),
    ((512, 512, 512), F16, False, True, [T0, T1, T2], ("sm90a",)),
    ((512, 512, 512), F16, True, True, [T0, T2], ("sm90a",)),
    ((1000, 1000, 1008), BF16, False, False, [T0, T2], ("sm90a",)),
    ((1000, 1000, 1008), BF16, True, True, [T2], ("sm90a",)),
    ((1024, 384, 2048), F16, False, False, [T0, T1], ("sm90a", "sm90a-p0")),
]


def correctness(quick: bool) -> list[dict]:
    rows = []
    for (m, n, k), dtype, ta, tb, cfgs, variants in CASES[:3] if quick else CASES:
        for cfg in cfgs:
            for variant in variants:
                a, b, c, args = operands(m, n, k, dtype, ta, tb)
                row = {"m": m, "n": n, "k": k, "dtype": str(dtype).split(".")[-1], "trans_a": ta, "trans_b": tb,
                       "cfg": cfg, "variant": variant}  # fmt: skip
                try:
                    fn, art = tilec_fn(variant, cfg, args)
                    fn()
                    torch.cuda.synchronize()
                    ref = a.float() @ b.float()
                    row["err"] = rel_err(c.float(), ref)
                    row["nan"] = bool(torch.isnan(c).any())
                    row["wgmma"] = art.ptx.count("wgmma.mma_async")
                    row["pending"] = "wgmma.wait_group.sync.aligned 1" in art.ptx
                    row["pipelined"] = art.metadata.get("pipelined_loops", 0)
                    row["ok"] = row["err"] < 1e-2 and not row["nan"]
                except Exception as exc:  # noqa: BLE001 - the table reports it and the run goes on
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
                    row["ok"] = False
                    traceback.print_exc()
                rows.append(row)
                print(("ok  " if row["ok"] else "FAIL") + " " + json.dumps(row), flush=True)
    return rows


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def dump(tk, dump_dir: str) -> None:
    """PTX and SASS of Triton's and tilec's (sm_90a) build of the first tutorial config, for reading."""
    out = Path(dump_dir)
    a, b, c, args = operands(4096, 4096, 4096, torch.float16)
    bm, bn, bk, nw, ns = CONFIGS[0]
    kern = tk.fn[(triton.cdiv(4096, bm) * triton.cdiv(4096, bn),)](
        *args, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8, num_warps=nw, num_stages=ns
    )
    (out / "triton_T0.ptx").write_text(kern.asm.get("ptx", ""))
    (out / "triton_T0.ttgir").write_text(kern.asm.get("ttgir", ""))
    _, art = tilec_fn("sm90a", CONFIGS[0], args)
    (out / "tilec_T0.ptx").write_text(art.ptx)
    tool = Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump"
    for name, blob in (("triton_T0", kern.asm.get("cubin")), ("tilec_T0", art.binary)):
        if not blob or not tool.exists():
            continue
        path = out / f"{name}.cubin"
        path.write_bytes(blob)
        proc = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True, timeout=120)
        path.unlink()
        (out / f"{name}.sass").write_text(proc.stdout + proc.stderr)
        sass = proc.stdout
        print(f"{name}: {sass.count('HGMMA')} HGMMA, {sass.count('BAR.SYNC')} BAR.SYNC, {sass.count('LDGSTS')} LDGSTS, "
              f"{sass.count('WARPGROUP')} WARPGROUP lines", flush=True)  # fmt: skip


def speed(quick: bool) -> list[dict]:
    tk = triton_kernel()
    rows = []
    for s in (4096,) if quick else (4096, 8192):
        a, b, c, args = operands(s, s, s, torch.float16)
        ref = a.float() @ b.float()
        flops = 2 * s**3
        for cfg in SPEED_CONFIGS:
            row = {"size": s, "cfg": cfg}
            fns = {"triton": (triton_fn(tk, cfg, args), None)}
            for variant in ("sm90", "sm90a", "sm90a-p0") if cfg in (T0, T2) else ("sm90a", "sm90a-p0"):
                try:
                    fns[variant] = tilec_fn(variant, cfg, args)
                except Exception as exc:  # noqa: BLE001
                    row[f"{variant}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            for side, (fn, art) in fns.items():
                try:
                    c.fill_(float("nan"))
                    fn()
                    torch.cuda.synchronize()
                    row[f"{side}_err"] = rel_err(c.float(), ref)
                    ms = bench(fn)
                    row[f"{side}_ms"] = ms
                    row[f"{side}_tflops"] = flops / ms / 1e9
                    if art is not None:
                        row[f"{side}_regs"] = art.metadata.get("registers")
                        row[f"{side}_smem"] = art.metadata.get("shared_bytes")
                except Exception as exc:  # noqa: BLE001
                    row[f"{side}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rows.append(row)
            print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    return rows


def table(corr: list[dict], rows: list[dict]) -> None:
    bad = [r for r in corr if not r["ok"]]
    worst = max((r.get("err", 0.0) for r in corr if r["ok"]), default=0.0)
    print(f"\ncorrectness: {len(corr) - len(bad)}/{len(corr)} ok (worst rel err {worst:.1e})")
    for r in bad[:20]:
        print("  FAIL", r)
    sides = ["triton", *VARIANTS]
    print(
        f"\n{'size':>5} {'config (BM,BN,BK,w,s)':24} "
        + " ".join(f"{s:>10}" for s in sides)
        + "   TFLOP/s; best tilec/triton"
    )
    best: dict = {}
    for r in rows:
        vals = [r.get(f"{s}_tflops") or 0.0 for s in sides]
        for s, v in zip(sides, vals, strict=True):
            best[(r["size"], s)] = max(best.get((r["size"], s), 0.0), v)
        ratio = max(vals[1:]) / vals[0] if vals[0] else 0.0
        print(
            f"{r['size']:>5} {str(r['cfg']):24} " + " ".join(f"{v:10.1f}" for v in vals) + f"   {ratio:.2f}"
        )
    for size in sorted({k[0] for k in best}):
        vals = {side: best[(size, side)] for side in sides}
        ratio = max(vals["sm90a"], vals["sm90a-p0"]) / vals["triton"] if vals["triton"] else 0.0
        print(
            f"best of configs {size}: "
            + ", ".join(f"{k} {v:.1f}" for k, v in vals.items())
            + f"; sm90a/triton {ratio:.2f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--dump", default=None, help="a folder for the PTX/SASS of both sides' first config")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    t0 = time.perf_counter()
    corr = correctness(args.quick)
    print(f"correctness took {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    if args.dump:
        try:
            dump(triton_kernel(), args.dump)
        except Exception:  # noqa: BLE001 - the dump is a reading aid; the figures go on
            traceback.print_exc()
    rows = [] if args.skip_speed else speed(args.quick)
    print(f"speed took {time.perf_counter() - t0:.1f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "correctness": corr, "speed": rows},
                                              indent=1, default=str))  # fmt: skip
    table(corr, rows)


if __name__ == "__main__":
    main()

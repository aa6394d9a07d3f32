"""Host-descriptor matmul on Hopper, in one run: the same source (tests/kernels/desc_matmul.py, Triton's
descriptor style: A, B and C passed as triton.tools.tensor_descriptor.TensorDescriptor objects) under real
Triton and under tilec's cuda:sm_90a, whose descriptor loads take TMA + mbarriers into the wgmma ring
("tma"), and, for the rung below, the same build with the alignment hints withheld so the loads stay on
the cp.async ring ("cp.async"); and the block-pointer matmul (tests/kernels/blockptr_matmul.py, Triton's
block-pointer style over plain tensors and strides) under tilec ("blockptr": its loads take TMA where the
strides allow) and under Triton ("triton-blockptr"), same configs, side by side.

First correctness against torch (odd sizes: boxes past the edges; output poisoned with NaN), then fp16
4096^3 and 8192^3 per config, each side timed with triton.testing.do_bench (median, L2 flushed).
Usage (device, repo root): PYTHONPATH=$PWD python3 bench/tma_matmul.py [--json OUT] [--dump DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import traceback
from pathlib import Path

import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel
from tilec.runtime.launch import launch, specialise

ROOT = Path(__file__).resolve().parent.parent
SRC = (ROOT / "tests/kernels/desc_matmul.py").read_text()
CONFIGS = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 3), (128, 128, 32, 4, 4)]
NAMES = ("a_desc", "b_desc", "c_desc", "M", "N", "K")
BP_SRC = (ROOT / "tests/kernels/blockptr_matmul.py").read_text()
BP_NAMES = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
            "stride_cm", "stride_cn")  # fmt: skip
SIDES = ("triton", "tma", "cp.async", "triton-blockptr", "blockptr")
_ARTS: dict = {}


def triton_kernel(stem: str = "desc_matmul", name: str = "matmul_desc_kernel"):
    spec = importlib.util.spec_from_file_location(stem, ROOT / f"tests/kernels/{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, name)


def blockptr_fn(tbk, side: str, cfg: tuple, a, b, c):
    """The block-pointer matmul over plain tensors: Triton's build ("triton-blockptr") or tilec's."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk, nw, ns = cfg
    args = [a, b, c, m, n, k, *a.stride(), *b.stride(), *c.stride()]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), 1, 1)
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8}
    if side == "triton-blockptr":
        return lambda: tbk[grid[:1]](*args, **consts, num_warps=nw, num_stages=ns)
    specs = {nm: specialise(nm, v) for nm, v in zip(BP_NAMES, args, strict=True)}
    key = ("blockptr", cfg, tuple(sorted(specs.items())))
    art = _ARTS.get(key)
    if art is None:
        art = compile_kernel(BP_SRC, "matmul_blockptr_kernel", signature={nm: s.type for nm, s in specs.items()},
                             constexprs=consts, hints={nm: dict(s.hints) for nm, s in specs.items() if s.hints},
                             options=CompileOptions(target="cuda:sm_90a", num_warps=nw, num_stages=ns),
                             emit="cubin")  # fmt: skip
        want = {i for i, s in ((0, k), (1, n)) if s % 16 == 0}  # A (a_ptr) and B (b_ptr) where rows are x16
        assert {t["param"] for t in art.metadata.get("tma") or []} == want, art.metadata.get("tma")
        _ARTS[key] = art
    return lambda: launch("cuda:sm_90a", art, args, grid)


def side_fn(tk, tbk, side: str, cfg: tuple, a, b, c):
    if side in ("blockptr", "triton-blockptr"):
        return blockptr_fn(tbk, side, cfg, a, b, c)
    args = [*descriptors(a, b, c, cfg), a.shape[0], b.shape[1], a.shape[1]]
    return triton_fn(tk, cfg, args) if side == "triton" else tilec_fn(side, cfg, args)[0]


def descriptors(a, b, c, cfg):
    bm, bn, bk = cfg[:3]
    return [TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
            TensorDescriptor.from_tensor(c, [bm, bn])]  # fmt: skip


def tilec_fn(variant: str, cfg: tuple, args: list):
    bm, bn, bk, nw, ns = cfg
    specs = {n: specialise(n, v) for n, v in zip(NAMES, args, strict=True)}
    hints = {n: dict(s.hints) for n, s in specs.items() if s.hints}
    if variant == "cp.async":  # no proof of 16-byte alignment: the loads keep the cp.async ring
        hints = {
            n: {k: v for k, v in h.items() if not k.startswith(("base.", "stride"))} for n, h in hints.items()
        }
    key = (variant, cfg, tuple(sorted(specs.items())))
    art = _ARTS.get(key)
    if art is None:
        art = compile_kernel(SRC, "matmul_desc_kernel", signature={n: s.type for n, s in specs.items()},
                             constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8},
                             hints=hints, options=CompileOptions(target="cuda:sm_90a", num_warps=nw, num_stages=ns),
                             emit="cubin")  # fmt: skip
        # each operand on TMA where its leading stride divides by 16 elements (K for A, N for B); a base
        # parameter index of the expanded signature (a_desc: 0..3, b_desc: 4..7)
        want = {i for i, ok in ((0, args[5] % 16 == 0), (4, args[4] % 16 == 0)) if ok} if variant == "tma" else set()
        got = {m["param"] for m in art.metadata.get("tma") or []}
        assert got == want, (variant, art.metadata.get("tma"))
        _ARTS[key] = art
    m, n = args[3], args[4]
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn), 1, 1)
    return (lambda: launch("cuda:sm_90a", art, args, grid)), art


def triton_fn(tk, cfg: tuple, args: list):
    bm, bn, bk, nw, ns = cfg
    grid = (triton.cdiv(args[3], bm) * triton.cdiv(args[4], bn),)
    return lambda: tk[grid](
        *args, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_SIZE_M=8, num_warps=nw, num_stages=ns
    )


def operands(m: int, n: int, k: int):
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    return a, b, c


def correctness(tk, tbk) -> list[dict]:
    out = []
    cases = [((1000, 1000, 1008), c) for c in CONFIGS] + [((384, 520, 264), CONFIGS[0]), ((512, 512, 512), CONFIGS[0])]
    for (m, n, k), cfg, side in [(s, c, v) for s, c in cases for v in SIDES]:
        row = {"m": m, "n": n, "k": k, "cfg": cfg, "side": side}
        try:
            torch.manual_seed(0)
            a, b, c = operands(m, n, k)
            side_fn(tk, tbk, side, cfg, a, b, c)()
            torch.cuda.synchronize()
            ref = a.float() @ b.float()
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            row.update(ok=bool(err < 1e-2 and not torch.isnan(c).any().item()), rel_err=err)
        except Exception as exc:  # noqa: BLE001 - a failing case is recorded, the rest still runs
            row.update(ok=False, error=f"{type(exc).__name__}: {exc}", tb=traceback.format_exc()[-2000:])
        print(json.dumps(row), flush=True)
        out.append(row)
    return out


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")


def speed(tk, tbk) -> list[dict]:
    out = []
    for size in (4096, 8192):
        torch.manual_seed(0)
        a, b, c = operands(size, size, size)
        flops = 2 * size**3
        for cfg in CONFIGS:
            row = {"size": size, "cfg": cfg}
            for side in SIDES:
                try:
                    row[side] = flops / bench(side_fn(tk, tbk, side, cfg, a, b, c)) * 1e-9
                except Exception as exc:  # noqa: BLE001
                    row[side + "_error"] = f"{type(exc).__name__}: {exc}"
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--dump")
    args = ap.parse_args()
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    tk, tbk = triton_kernel(), triton_kernel("blockptr_matmul", "matmul_blockptr_kernel")
    result = {"gpu": gpu, "torch": torch.__version__, "triton": triton.__version__}
    result["correctness"] = correct = correctness(tk, tbk)
    print(f"correct: {sum(r['ok'] for r in correct)}/{len(correct)}", flush=True)
    result["speed"] = rows = speed(tk, tbk)
    for size in (4096, 8192):
        best = {
            s: max((r.get(s, 0) for r in rows if r["size"] == size), default=0)
            for s in SIDES
        }
        result[f"best_{size}"] = best
        print(f"best {size}: " + ", ".join(f"{k} {v:.1f}" for k, v in best.items()), flush=True)
    if args.dump:
        for (variant, cfg, _), art in _ARTS.items():
            if variant == "tma" and cfg == CONFIGS[0]:
                Path(args.dump, "tilec_tma.ptx").write_text(art.ptx)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

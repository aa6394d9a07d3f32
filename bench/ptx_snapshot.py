"""The PTX of the test kernels, written to a folder, and two such folders compared: what a change to the
cuda lowering (the shared-memory allocator, codegen options) did to the code it generates. No GPU needed:
the compiles stop at the ptx stage (LLVM's NVPTX backend), ptxas is not run.

    .venv/bin/python bench/ptx_snapshot.py write DIR      # every case below -> DIR/<case>.ptx
    .venv/bin/python bench/ptx_snapshot.py compare OLD NEW  # identical / changed (with a unified diff) / missing

The cases: every tests/kernels entry (its small specialisation) on sm_80 and sm_90, every conformance case on
sm_90 (as tests/cuda/test_compile_cases.py specialises it), and the larger configs the cuda tests compile:
matmuls on mma.sync and wgmma with cp.async rings, the persistent matmul, flash attention (causal and not),
TMA descriptor and block-pointer matmuls on sm_90a. Run `write` on the old tree and the new one (the script
only uses compile_kernel and CompileOptions, so a copy of it runs on older commits) and `compare` them.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kernels import KERNELS, source  # noqa: E402
from tilec.compiler.artifact import CompileOptions  # noqa: E402
from tilec.compiler.pipeline import compile_kernel  # noqa: E402


def _ptx(src: str, name: str, target: str, *, sig: dict, consts: dict | None = None, hints: dict | None = None,
         warps: int = 4, stages: int = 3) -> str:  # fmt: skip
    art = compile_kernel(src, name, signature=sig, constexprs=consts or {}, hints=hints or {},
                         options=CompileOptions(target=target, num_warps=warps, num_stages=stages), emit="ptx")  # fmt: skip
    return art.ptx


def _kernel_cases():
    for stem, k in KERNELS.items():
        for target in ("cuda:sm_80", "cuda:sm_90"):
            yield (
                f"kernels-{stem}-{target[5:]}",
                lambda k=k, stem=stem, target=target: _ptx(
                    source(stem), k["name"], target, sig=k["signature"], consts=k["constexprs"]
                ),
            )


def _conformance_cases():
    import numpy as np

    try:
        from tests.conformance.cases import CASES
        from tilec.compiler.frontend import read_kernel
    except ImportError:
        return
    try:  # before the runtime layer (first: an installed tilec.runtime must not serve an older tree)
        from tilec.client._launch import specialise
    except ImportError:
        from tilec.runtime.launch import specialise

    for case in CASES:

        def one(case=case):
            args = case.inputs(np.random.default_rng(0))
            ks = read_kernel(case.source, case.kernel)
            runtime = [p for p in ks.params if not p.constexpr]
            specs = {p.name: specialise(p.name, a) for p, a in zip(runtime, args, strict=False)}
            return _ptx(case.source, case.kernel, "cuda:sm_90", sig={n: s.type for n, s in specs.items()},
                        consts=case.constexprs, hints={n: dict(s.hints) for n, s in specs.items() if s.hints})  # fmt: skip

        yield f"conformance-{case.name}", one


MM = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm",
      "stride_cn")  # fmt: skip
MM_HINTS = {"a_ptr": {"divisibility": 16}, "b_ptr": {"divisibility": 16}, "c_ptr": {"divisibility": 16},
            "M": {"divisibility": 16}, "N": {"divisibility": 16}, "K": {"divisibility": 16},
            "stride_am": {"divisibility": 16}, "stride_ak": {"equal_to_1": True}, "stride_bk": {"divisibility": 16},
            "stride_bn": {"equal_to_1": True}, "stride_cm": {"divisibility": 16}, "stride_cn": {"equal_to_1": True}}  # fmt: skip


def _matmul_cases():
    sig = {n: "*fp16" if n.endswith("_ptr") else "i32" for n in MM}
    for target in ("cuda:sm_80", "cuda:sm_90"):
        for bm, bn, bk, nw, ns in (
            (128, 128, 64, 4, 3),
            (128, 256, 64, 8, 3),
            (64, 64, 32, 4, 4),
            (128, 128, 32, 8, 2),
        ):
            consts = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8}
            yield (
                f"matmul-{bm}x{bn}x{bk}-w{nw}s{ns}-{target[5:]}",
                lambda t=target, c=consts, w=nw, s=ns: _ptx(
                    source("matmul"), "matmul_kernel", t, sig=sig, consts=c, hints=MM_HINTS, warps=w, stages=s
                ),
            )
    psig = dict(sig)
    pc = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "NUM_SMS": 132}
    yield "persistent-128x128x64-sm_90", lambda: _ptx(source("matmul_persistent"), "matmul_persistent", "cuda:sm_90",
                                                      sig=psig, consts=pc, hints=MM_HINTS, warps=8, stages=3)  # fmt: skip


ATT = [f"stride_{t}{d}" for t, row in zip("qkvo", "mnnm", strict=True) for d in ("z", "h", row, "k")]


def _attention(d: int, bm: int, bn: int, nw: int, ns: int, causal: bool, n_ctx: int) -> str:
    vals = dict(zip(ATT, [32 * n_ctx * d, n_ctx * d, d, 1] * 4, strict=True)) | {"H": 32, "N_CTX": n_ctx}
    sig = {
        "Q": "*fp16",
        "K": "*fp16",
        "V": "*fp16",
        "Out": "*fp16",
        "sm_scale": "fp32",
        **dict.fromkeys(vals, "i32"),
    }
    hints = {p: {"divisibility": 16} for p in ("Q", "K", "V", "Out")}
    hints |= {
        p: {"equal_to_1": True} if v == 1 else {"divisibility": 16}
        for p, v in vals.items()
        if v == 1 or v % 16 == 0
    }
    consts = {
        "HEAD_DIM": d,
        "BLOCK_M": bm,
        "BLOCK_N": bn,
        "STAGE": 3 if causal else 1,
        "MASK_N": n_ctx % bn != 0,
    }
    return _ptx(
        source("attention"),
        "attn_fwd",
        "cuda:sm_90",
        sig=sig,
        consts=consts,
        hints=hints,
        warps=nw,
        stages=ns,
    )


def _attention_cases():
    for cfg, causal, n_ctx in (((64, 128, 64, 8, 3), False, 4096), ((64, 128, 64, 8, 3), True, 4096),
                               ((128, 128, 64, 8, 3), True, 4096), ((64, 128, 128, 8, 3), False, 1000),
                               ((64, 64, 64, 4, 4), True, 1000), ((128, 128, 32, 4, 2), False, 4096)):  # fmt: skip
        name = "attention-" + "x".join(map(str, cfg)) + ("-causal" if causal else "") + f"-{n_ctx}"
        yield name, lambda cfg=cfg, causal=causal, n_ctx=n_ctx: _attention(*cfg, causal, n_ctx)


def _tma_cases():
    for bm, bn, bk, nw, ns in ((128, 256, 64, 8, 3), (128, 128, 32, 4, 4), (64, 256, 32, 4, 4)):
        sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
               "c_desc": f"tensordesc<fp16[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}  # fmt: skip
        hints = {d: {f"{p}.divisibility": 16 for p in ("base", "shape0", "shape1", "stride0")}
                 for d in ("a_desc", "b_desc", "c_desc")}  # fmt: skip
        consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8}
        yield (
            f"desc-matmul-{bm}x{bn}x{bk}-w{nw}s{ns}-sm_90a",
            lambda s=sig, h=hints, c=consts, w=nw, n=ns: _ptx(
                source("desc_matmul"),
                "matmul_desc_kernel",
                "cuda:sm_90a",
                sig=s,
                consts=c,
                hints=h,
                warps=w,
                stages=n,
            ),
        )
        bsig = {n: "*fp16" if n.endswith("_ptr") else "i32" for n in MM}
        bconsts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_SIZE_M": 8}
        yield f"blockptr-matmul-{bm}x{bn}x{bk}-w{nw}s{ns}-sm_90a", lambda s=bsig, c=bconsts, w=nw, n=ns: _ptx(
            source("blockptr_matmul"), "matmul_blockptr_kernel", "cuda:sm_90a", sig=s, consts=c, hints=MM_HINTS,
            warps=w, stages=n)  # fmt: skip


def cases():
    yield from _kernel_cases()
    yield from _conformance_cases()
    yield from _matmul_cases()
    yield from _attention_cases()
    yield from _tma_cases()


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    n = failed = 0
    for name, make in cases():
        n += 1
        try:
            (out / f"{name}.ptx").write_text(make())
        except Exception:  # noqa: BLE001 - a case this tree cannot compile is recorded, not fatal
            failed += 1
            (out / f"{name}.error").write_text(traceback.format_exc(limit=3))
    print(f"{n} cases, {failed} failed to compile -> {out}")


def compare(old: Path, new: Path) -> int:
    names = sorted({p.stem for p in old.glob("*.ptx")} | {p.stem for p in new.glob("*.ptx")})
    same, changed, missing = [], [], []
    for name in names:
        a, b = old / f"{name}.ptx", new / f"{name}.ptx"
        if not (a.exists() and b.exists()):
            missing.append(name)
        elif a.read_text() == b.read_text():
            same.append(name)
        else:
            changed.append(name)
    print(f"{len(same)} identical, {len(changed)} changed, {len(missing)} only on one side")
    for name in changed:
        diff = difflib.unified_diff(
            (old / f"{name}.ptx").read_text().splitlines(), (new / f"{name}.ptx").read_text().splitlines(),
            f"old/{name}.ptx", f"new/{name}.ptx", lineterm="", n=2,
        )  # fmt: skip
        print("\n".join(diff))
    for name in missing:
        print(f"only in {'old' if (old / f'{name}.ptx').exists() else 'new'}: {name}")
    return 1 if changed or missing else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("write").add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = ap.parse_args()
    if args.cmd == "write":
        write(args.out)
    else:
        sys.exit(compare(args.old, args.new))


if __name__ == "__main__":
    main()

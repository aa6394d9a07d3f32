"""Triton's speed on code tilec did not write, in one table (bash bench/gpu_run.sh speed):

- kernels written as Triton's tutorials and libraries write them (bench/speed_kernels.py), the same source
  under Triton and under tilec: outputs checked against each other (and torch where it is simple), then
  both timed with triton.testing.do_bench (median, L2 flushed);
- the project's own bench kernels (bench/vs_triton.py's cases);
- launch overhead with a warm cache: a plain kernel, an autotuned one, and a call of a torch.compile'd
  one-kernel function (Inductor's default against tilec.inductor.backend), host time per call;
- torch.compile models of tests/inductor/models.py, per call in steady state, Inductor's default path
  against tilec.inductor.backend.

Columns: kernel, Triton ms, tilec ms, ratio (Triton ms / tilec ms: above 1, tilec is faster); then the
geometric mean and the worst ratio. Usage: python3 bench/speed.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import torch
import triton

from tilec import client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SRC = ROOT / "bench/speed_kernels.py"


def _module():
    spec = importlib.util.spec_from_file_location("speed_kernels", SRC)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TRI = _module()
TEXT = SRC.read_text()


LAST: dict[str, tuple] = {}  # kernel name -> (Triton's, tilec's) of the last case that made them


def pair(name: str):
    LAST[name] = (getattr(TRI, name), client.jit(TEXT, name))
    return LAST[name]


def assembly(name: str, ret) -> dict:
    """The PTX both sides built for `name` (Triton's from the compiled kernel its launch returned)."""
    out = {}
    asm = getattr(ret, "asm", None)
    if asm is not None:
        out["triton"] = asm.get("ptx")
    til = LAST.get(name, (None, None))[1]
    if til is not None and til.cache:
        out["tilec"] = next(iter(til.cache.values())).ptx
    return out


def bench(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---- kernel cases: each returns {side: (launch, output)} and a reference (or None: Triton's output) ------


def case_add(q):
    n = 1 << (22 if q else 26)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    tri, til = pair("add_kernel")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o = torch.empty_like(x)
        outs[side] = (lambda k=k, o=o: k[(cdiv(n, 1024),)](x, y, o, n, BLOCK_SIZE=1024), o)
    return outs, x + y


def case_softmax(q):
    m, n = (1024 if q else 8192), 1000
    x = torch.randn(m, n, device="cuda")
    tri, til = pair("softmax_kernel")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o = torch.empty_like(x)
        outs[side] = (
            lambda k=k, o=o: k[(m,)](o, x, x.stride(0), o.stride(0), n, BLOCK_SIZE=1024, num_warps=8),
            o,
        )
    return outs, torch.softmax(x, 1)


def case_dropout(q):
    n = 1 << (22 if q else 25)
    x = torch.randn(n, device="cuda")
    tri, til = pair("dropout_kernel")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o = torch.empty_like(x)
        outs[side] = (lambda k=k, o=o: k[(cdiv(n, 1024),)](x, o, n, 0.5, 123, BLOCK_SIZE=1024), o)
    return outs, None


def _rows_quantized(q, kernel: str, dtype):
    """Rows of 4096 floats scaled into `dtype` by `kernel` (one program a row); the outputs compared as bytes."""
    m, n = (1024 if q else 8192), 4096
    x = torch.randn(m, n, device="cuda")
    tri, til = pair(kernel)
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o, s = torch.empty(m, n, device="cuda", dtype=dtype), torch.empty(m, device="cuda")
        outs[side] = (lambda k=k, o=o, s=s: k[(m,)](x, o, s, n, x.stride(0), BLOCK_SIZE=4096, num_warps=8), o.view(torch.int8))
    return outs, None


def case_quantize(q):
    return _rows_quantized(q, "quantize_rows", torch.int8)


def case_quantize_fp8(q):
    return _rows_quantized(q, "quantize_rows_fp8", torch.float8_e4m3fn)


def case_dequantize_fp8(q):
    n = 1 << (22 if q else 26)
    a = torch.randn(n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, device="cuda").to(torch.float8_e5m2)
    scale = torch.full((1,), 0.5, device="cuda")
    tri, til = pair("dequantize_fp8")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o = torch.empty(n, device="cuda")
        outs[side] = (lambda k=k, o=o: k[(cdiv(n, 1024),)](a, b, scale, o, n, BLOCK_SIZE=1024), o)
    return outs, (a.float() + b.float()) * 0.5


def case_layer_norm(q):
    m, n = (1024 if q else 4096), 8192
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    w, b = (
        torch.rand(n, device="cuda", dtype=torch.float16),
        torch.randn(n, device="cuda", dtype=torch.float16),
    )
    tri, til = pair("layer_norm_fwd")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        y, mean, rstd = torch.empty_like(x), torch.empty(m, device="cuda"), torch.empty(m, device="cuda")
        outs[side] = (lambda k=k, y=y, mean=mean, rstd=rstd: k[(m,)](x, y, w, b, mean, rstd, x.stride(0), n, 1e-5,
                                                                     BLOCK_SIZE=1024, num_warps=8), y)  # fmt: skip
    ref = torch.nn.functional.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
    return outs, ref


def case_matmul(q, s=4096):
    s = 1024 if q else s
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    tri, til = pair("matmul_kernel")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        c = torch.empty(s, s, device="cuda", dtype=torch.float16)

        def grid(meta):
            return (cdiv(s, meta["BLOCK_SIZE_M"]) * cdiv(s, meta["BLOCK_SIZE_N"]),)

        outs[side] = (lambda k=k, c=c, grid=grid: k[grid](a, b, c, s, s, s, a.stride(0), a.stride(1), b.stride(0),
                                                          b.stride(1), c.stride(0), c.stride(1)), c)  # fmt: skip
    return outs, a.float() @ b.float()


def case_bmm(q):
    bt, s = (4, 512) if q else (16, 1024)
    a = torch.randn(bt, s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(bt, s, s, device="cuda", dtype=torch.float16)
    tri, til = pair("bmm_kernel")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        c = torch.empty(bt, s, s, device="cuda", dtype=torch.float16)

        def grid(meta):
            return (cdiv(s, meta["BLOCK_SIZE_M"]), cdiv(s, meta["BLOCK_SIZE_N"]), bt)

        outs[side] = (
            lambda k=k, c=c, grid=grid: k[grid](a, b, c, s, s, s, *a.stride(), *b.stride(), *c.stride()),
            c,
        )
    return outs, a.float() @ b.float()


def case_gelu_bf16(q):
    n = 1 << (22 if q else 25)
    x = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    tri, til = pair("gelu_bf16")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o = torch.empty_like(x)
        outs[side] = (lambda k=k, o=o: k[(cdiv(n, 1024),)](x, o, n, BLOCK_SIZE=1024), o)
    return outs, None


def _rows_case(name: str, m: int, n: int, bm: int, make_idx: bool = False, warps: int = 4):
    x = torch.randn(m, n, device="cuda")
    idx = torch.randint(0, n, (m, n), device="cuda", dtype=torch.int32) if make_idx else None
    tri, til = pair(name)
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o = torch.empty_like(x)
        args = (x, idx, o) if make_idx else (x, o)
        outs[side] = (
            lambda k=k, args=args: k[(m // bm,)](*args, n, BLOCK_M=bm, BLOCK_N=n, num_warps=warps),
            o,
        )
    return outs, None


def case_cumsum(q):
    return _rows_case("cumsum_rows", 4096 if q else 65536, 1024, 64, warps=8)


def case_sort(q):
    return _rows_case("sort_rows", 4096 if q else 65536, 128, 8)


def case_gather(q):
    return _rows_case("gather_rows", 4096 if q else 65536, 256, 8, make_idx=True)


def case_cross_entropy(q):
    m, n = (512 if q else 4096), 32000
    x = torch.randn(m, n, device="cuda", dtype=torch.float16)
    t = torch.randint(0, n, (m,), device="cuda")
    tri, til = pair("cross_entropy_fwd")
    outs = {}
    for side, k in (("triton", tri), ("tilec", til)):
        o = torch.empty(m, device="cuda")
        outs[side] = (lambda k=k, o=o: k[(m,)](x, t, o, x.stride(0), n, BLOCK_SIZE=2048, num_warps=8), o)
    return outs, torch.nn.functional.cross_entropy(x.float(), t, reduction="none")


KERNEL_OF = {
    "case_add": ("add_kernel",), "case_softmax": ("softmax_kernel",), "case_dropout": ("dropout_kernel",),
    "case_quantize": ("quantize_rows",), "case_layer_norm": ("layer_norm_fwd",), "case_matmul": ("matmul_kernel",),
    "case_bmm": ("bmm_kernel",), "case_gelu_bf16": ("gelu_bf16",), "case_cumsum": ("cumsum_rows",),
    "case_sort": ("sort_rows",), "case_gather": ("gather_rows",), "case_cross_entropy": ("cross_entropy_fwd",),
    "case_quantize_fp8": ("quantize_rows_fp8",), "case_dequantize_fp8": ("dequantize_fp8",),
}  # fmt: skip

CASES = {
    "tutorial vector add fp32": case_add,
    "tutorial softmax fp32 (n=1000)": case_softmax,
    "tutorial dropout fp32": case_dropout,
    "int8 row quantization": case_quantize,
    "fp8 e4m3 row quantization": case_quantize_fp8,
    "fp8 e4m3 + e5m2 dequantize": case_dequantize_fp8,
    "tutorial layer norm fp16 (looped)": case_layer_norm,
    "tutorial matmul fp16 4096 autotuned (% M, K masks)": case_matmul,
    "batched matmul fp16 3-D grid autotuned": case_bmm,
    "bf16 pointwise libdevice (erf, tanh)": case_gelu_bf16,
    "cumsum [64,1024] fp32 rows": case_cumsum,
    "tl.sort [8,128] fp32 rows": case_sort,
    "tl.gather [8,256] fp32 rows": case_gather,
    "cross entropy fwd 32000 vocab fp16": case_cross_entropy,
}


PTX: dict[str, dict] = {}  # kernel row -> {side: PTX}, written with --dump


def run_case(name: str, make, q: bool) -> dict:
    row = {"kernel": name}
    try:
        outs, ref = make(q)
    except Exception as exc:  # noqa: BLE001 - the table shows the failure, the bench goes on
        return {**row, "error": f"setup {type(exc).__name__}: {str(exc)[:300]}"}
    got = {}
    kernel = make.__name__
    for side, (fn, out) in outs.items():
        try:
            ret = fn()
            if side == "triton":
                PTX[name] = {"triton_ret": ret}
            torch.cuda.synchronize()
            got[side] = out.clone()
            row[f"{side}_ms"] = bench(fn)
        except Exception as exc:  # noqa: BLE001
            row[f"{side}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    names = [n for n in LAST if n in KERNEL_OF.get(kernel, ())]
    if names:
        tri, til = LAST[names[0]]
        if getattr(tri, "best_config", None) is not None:
            row["triton_config"] = str(tri.best_config)
        if til.best_configs:
            c = next(iter(til.best_configs.values()))
            row["tilec_config"] = f"{dict(c.kwargs)} w{c.num_warps} s{c.num_stages}"
    if name in PTX and names:
        PTX[name] = assembly(names[0], PTX[name].pop("triton_ret"))
    if "triton" in got and "tilec" in got:
        want = ref if ref is not None else got["triton"]
        a, b = got["tilec"].double(), want.double()
        row["err_vs_ref"] = float((a - b).norm() / max(float(b.norm()), 1e-30))
        row["bits_equal_triton"] = bool(torch.equal(got["tilec"], got["triton"]))
    if "triton_ms" in row and "tilec_ms" in row:
        row["ratio"] = row["triton_ms"] / row["tilec_ms"]
    return row


# ---- the project's own bench kernels ----------------------------------------------------------------


def project_rows(q: bool) -> list[dict]:
    import vs_triton

    rows = []
    for name in ("vector_add fp32", "softmax fp32", "layer_norm fp16", "transpose fp32", "gather fp32",
                 "row_sum axis1 fp32", "matmul fp16 4096 128x128x32 w8 s3"):  # fmt: skip
        r = vs_triton.run_case(name, vs_triton.CASES[name], q)
        row = {"kernel": f"project: {name}", "triton_ms": r.get("triton_ms"), "tilec_ms": r.get("tilec_ms"),
               "err_vs_ref": r.get("tilec_err")}  # fmt: skip
        if r.get("tilec_vs_triton"):
            row["ratio"] = r["tilec_vs_triton"]
        if "tilec_error" in r or "triton_error" in r:
            row["error"] = r.get("tilec_error", "") + r.get("triton_error", "")
        rows.append(row)
    return rows


# ---- launch overhead and torch.compile ----------------------------------------------------------------


def side_by_side(row: dict, fns: dict, reps: int = 2000, rounds: int = 7) -> dict:
    """Host time per call of each side's `fn`, rounds alternating between the sides (drift in the host's
    speed falls on both), the fastest round of each (other work on the host only adds time)."""
    ok = {}
    for side, fn in fns.items():
        try:
            fn()
            torch.cuda.synchronize()
            ok[side] = fn
        except Exception as exc:  # noqa: BLE001
            row[f"{side}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    best = dict.fromkeys(ok, math.inf)
    for _ in range(rounds):
        for side, fn in ok.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            best[side] = min(best[side], (time.perf_counter() - t0) / reps * 1e3)
            torch.cuda.synchronize()
    for side, ms in best.items():
        row[f"{side}_ms"] = ms
    if "triton_ms" in row and "tilec_ms" in row:
        row["ratio"] = row["triton_ms"] / row["tilec_ms"]
    return row


def launch_rows() -> list[dict]:
    n = 1024
    x, y, o = (torch.randn(n, device="cuda") for _ in range(3))
    rows = []
    for label, name, call in (
        ("plain", "add_kernel", lambda k: k[(1,)](x, y, o, n, BLOCK_SIZE=1024)),
        ("autotuned", "add_tuned", lambda k: k[lambda meta: (cdiv(n, meta["BLOCK_SIZE"]),)](x, y, o, n)),
    ):
        row = {"kernel": f"launch overhead: {label} (host ms per call)"}
        fns = {
            side: (lambda k=k, call=call: call(k))
            for side, k in zip(("triton", "tilec"), pair(name), strict=True)
        }
        rows.append(side_by_side(row, fns))
    row = {"kernel": "launch overhead: torch.compile 1 kernel (host ms per call; Inductor default)"}
    fns = {side: (lambda fn=fn: fn(x)) for side, fn in compiled(lambda a: a * 2.0 + 1.0, ()).items()}
    rows.append(side_by_side(row, fns))
    return rows


def profile_compiled() -> None:
    """Where the host time of a warm torch.compile'd call goes, under Inductor's default path and under tilec
    (cProfile, top functions of each)."""
    import cProfile
    import pstats

    x = torch.randn(1024, device="cuda")
    for side, fn in compiled(lambda a: a * 3.0 - 1.0, ()).items():
        fn(x)
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            fn(x)
        prof.disable()
        torch.cuda.synchronize()
        print(f"---- {side}")
        pstats.Stats(prof).sort_stats("tottime").print_stats(22)


def compiled(fn, options) -> dict:
    """Inductor's default path ('triton') and tilec.inductor.backend ('tilec') on the same function."""
    import functools

    import tilec.inductor

    be = (
        functools.partial(tilec.inductor.backend, options=dict(options))
        if options
        else tilec.inductor.backend
    )
    return {"triton": torch.compile(fn, options=dict(options) or None, dynamic=False),
            "tilec": torch.compile(fn, backend=be, dynamic=False)}  # fmt: skip


MODELS = ("add_relu", "gelu_erf", "softmax", "layer_norm", "amax_long")


def model_rows(deadline: float) -> list[dict]:
    from tests.inductor.models import by_name, make_inputs

    rows = []
    for name in MODELS:
        row = {"kernel": f"torch.compile {name} (ms per call; Inductor default)"}
        if time.perf_counter() > deadline:
            rows.append({**row, "error": "not run: the time budget was spent"})
            continue
        model = by_name(name)
        inputs = [t.cuda() for t in make_inputs(model, seed=3)]
        fns = {
            side: (lambda fn=fn, inputs=inputs: fn(*inputs))
            for side, fn in compiled(model.fn, model.options).items()
        }
        rows.append(side_by_side(row, fns, reps=500))
    return rows


# ---- the table ---------------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    lines = [f"{'kernel':70} {'Triton ms':>10} {'tilec ms':>10} {'ratio':>7}  note"]
    for r in rows:
        note = r.get("error") or r.get("tilec_error") or r.get("triton_error") or ""
        if "err_vs_ref" in r and r["err_vs_ref"] is not None:
            note = (
                f"err {r['err_vs_ref']:.1e}"
                + (" bits=Triton" if r.get("bits_equal_triton") else "")
                + " "
                + note
            ).strip()
        t, c, ratio = r.get("triton_ms"), r.get("tilec_ms"), r.get("ratio")
        lines.append(f"{r['kernel'][:70]:70} {_f(t):>10} {_f(c):>10} {_f(ratio, '.2f'):>7}  {note[:120]}")
    ratios = [r["ratio"] for r in rows if r.get("ratio")]
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        worst = min(rows, key=lambda r: r.get("ratio") or math.inf)
        lines.append(
            f"geometric mean of {len(ratios)} ratios: {geo:.3f}   worst: {worst['ratio']:.3f} ({worst['kernel']})"
        )
    for r in rows:
        if "triton_config" in r or "tilec_config" in r:
            lines.append(
                f"config chosen, {r['kernel']}: Triton {r.get('triton_config')}; tilec {r.get('tilec_config')}"
            )
    missing = [r["kernel"] for r in rows if not r.get("ratio")]
    if missing:
        lines.append(f"rows without a ratio (failed or not run): {len(missing)}")
    return "\n".join(lines)


def _f(v, spec=".4f") -> str:
    return format(v, spec) if isinstance(v, float) else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default=None, help="run the kernel rows whose name contains this")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--dump", default=None, help="write both sides' PTX of the kernel rows to this JSON file")
    ap.add_argument("--profile", action="store_true", help="profile tilec's torch.compile'd one-kernel call")
    args = ap.parse_args()
    start = time.perf_counter()
    sys.path.insert(0, str(ROOT / "bench"))
    rows = []
    for name, make in CASES.items():
        if args.only and args.only not in name:
            continue
        rows.append(run_case(name, make, args.quick))
        print(json.dumps(rows[-1]), flush=True)
    if not args.only:
        for part in (
            lambda: project_rows(args.quick),
            launch_rows,
            lambda: model_rows(start + args.budget_s),
        ):
            try:
                got = part()
            except Exception as exc:  # noqa: BLE001
                got = [{"kernel": "(section failed)", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}]
            for r in got:
                print(json.dumps(r), flush=True)
            rows += got
    if args.dump:
        Path(args.dump).write_text(
            json.dumps({k: v for k, v in PTX.items() if "triton_ret" not in v}, indent=1)
        )
    if args.profile:
        profile_compiled()
    gpu = torch.cuda.get_device_name()
    text = table(rows)
    print(
        f"\nGPU: {gpu}  torch {torch.__version__}  triton {triton.__version__}  ({time.perf_counter() - start:.0f} s)"
    )
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": gpu, "rows": rows, "table": text}, indent=1))


if __name__ == "__main__":
    main()

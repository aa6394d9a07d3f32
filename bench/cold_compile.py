"""Cold compile time: a fresh Python process imports what compile_kernel needs and compiles one kernel
(softmax BLOCK 4096 / tutorial matmul; cuda:sm_90 to a cubin, cpu to an object). Median of N processes,
split into import and the compile's stages (read, build, passes, tir rest, gpu passes, llir, ptx,
cubin|object, rest).

    .venv/bin/python bench/cold_compile.py [-n 7] [--only softmax-cuda] [--importtime] [--profile FILE] [--no-pyc] [--triton]

Nothing needs a GPU: nvJitLink and llvmlite's NVPTX backend run on the host. Bytecode is cached (in a
temporary PYTHONPYCACHEPREFIX, filled by one unmeasured process first), as for an installed package;
--no-pyc makes every process compile tilec's sources again (PYTHONDONTWRITEBYTECODE=1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "tests" / "kernels"
DIV16 = {"divisibility": 16}

SOFTMAX_SIG = {
    "output_ptr": "*fp32",
    "input_ptr": "*fp32",
    "input_row_stride": "i32",
    "output_row_stride": "i32",
    "n_cols": "i32",
}
MATMUL_SIG = {
    "a_ptr": "*fp16",
    "b_ptr": "*fp16",
    "c_ptr": "*fp16",
    "M": "i32",
    "N": "i32",
    "K": "i32",
    "stride_am": "i32",
    "stride_ak": "i32",
    "stride_bk": "i32",
    "stride_bn": "i32",
    "stride_cm": "i32",
    "stride_cn": "i32",
}


def _softmax(target: str) -> dict:
    return dict(
        file="fused_softmax.py",
        name="softmax_kernel",
        signature=SOFTMAX_SIG,
        constexprs={"BLOCK_SIZE": 4096},
        hints={p: DIV16 for p in SOFTMAX_SIG},
        target=target,
        num_warps=8,
        num_stages=3,
    )


def _matmul(target: str) -> dict:
    hints = {p: DIV16 for p in MATMUL_SIG if p not in ("stride_ak", "stride_bn", "stride_cn")}
    return dict(
        file="matmul.py",
        name="matmul_kernel",
        signature=MATMUL_SIG,
        constexprs={"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
        hints=hints,
        target=target,
        num_warps=8,
        num_stages=3,
    )


CASES = {
    "softmax-cuda": _softmax("cuda:sm_90"),
    "softmax-cpu": _softmax("cpu"),
    "matmul-cuda": _matmul("cuda:sm_90"),
    "matmul-cpu": _matmul("cpu"),
}

# The child: everything from its first line is timed. Stage timers wrap the backend's own stage list
# (backends.register_target) and the pipeline's frontend calls, so the compile that runs is compile_kernel itself.
CHILD = r"""
import time
t0 = time.perf_counter()
from tilec.compiler.pipeline import compile_kernel
from tilec.compiler.artifact import CompileOptions
t1 = time.perf_counter()
import json, sys
case = json.loads(sys.argv[1])
from tilec.compiler import pipeline
ms = {}

def timed(label, fn):
    def run(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            ms[label] = ms.get(label, 0.0) + (time.perf_counter() - s) * 1e3
    return run

from tilec.compiler import backends, tir
pipeline.read_kernel = timed("read", pipeline.read_kernel)
pipeline.build_ir = timed("build", pipeline.build_ir)
tir.run_passes = timed("passes", tir.run_passes)
kind = "cpu" if case["target"] == "cpu" else "cuda"
labels = {"tir": "tir rest", "gpu-tir": "gpu passes"}
s_load = time.perf_counter()
stage_list = backends.stages(kind)  # imports the backend: counted with the imports, as a plain compile pays it
backend_ms = (time.perf_counter() - s_load) * 1e3
backends.register_target(kind, [(n, timed(labels.get(n, n), f)) for n, f in stage_list])
src = open(case["path"]).read()
opts = CompileOptions(target=case["target"], num_warps=case["num_warps"], num_stages=case["num_stages"])
profile = case.get("profile")
if profile:
    import cProfile
    prof = cProfile.Profile(); prof.enable()
t2 = time.perf_counter()
art = compile_kernel(src, case["name"], signature=case["signature"], constexprs=case["constexprs"],
                     hints=case["hints"], options=opts)
t3 = time.perf_counter()
if profile:
    prof.disable(); prof.dump_stats(profile)
ms["tir rest"] = ms.get("tir rest", 0.0) - ms.get("passes", 0.0)
total = (t3 - t2) * 1e3
ms["rest"] = total - sum(ms.values())
ptx_instrs = sum(1 for ln in art.ptx.splitlines()
                 if ln.strip().endswith(";") and not ln.strip().startswith((".", "//")))
print(json.dumps({"import_ms": (t1 - t0) * 1e3 + backend_ms, "compile_ms": total, "stages": ms, "binary_bytes": len(art.binary),
                  "ptx_instructions": ptx_instrs, "regs": art.metadata.get("registers")}))
"""

# Triton's side of the comparison (needs torch, triton and a GPU): the first launch of the same softmax in
# a fresh process with an empty cache, timed from loading the kernel's module (torch already imported).
TRITON_CHILD = r"""
import importlib.util, json, sys, time, torch
x = torch.randn(64, 4096, device="cuda"); o = torch.empty_like(x); torch.cuda.synchronize()
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("sm", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
m.softmax_kernel[(64,)](o, x, 4096, 4096, 4096, BLOCK_SIZE=4096, num_warps=8); torch.cuda.synchronize()
print(json.dumps({"first_launch_ms": (time.perf_counter() - t0) * 1e3}))
"""

STAGE_ORDER = ("read", "build", "passes", "tir rest", "gpu passes", "llir", "ptx", "cubin", "object", "rest")


PYC = {"PYTHONDONTWRITEBYTECODE": "1"}  # main() replaces this with a cache prefix unless --no-pyc


def run_child(case: dict, python_flags: list[str] | None = None) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env.update(PYC, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    payload = json.dumps({**case, "path": str(KERNELS / case["file"])})
    cmd = [sys.executable, *(python_flags or []), "-c", CHILD, payload]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def measure(case: dict, runs: int) -> dict:
    samples = [run_child(case)[0] for _ in range(runs)]
    med = statistics.median
    stages = {k: med(s["stages"].get(k, 0.0) for s in samples) for k in STAGE_ORDER}
    return {
        "import_ms": med(s["import_ms"] for s in samples),
        "compile_ms": med(s["compile_ms"] for s in samples),
        "total_ms": med(s["import_ms"] + s["compile_ms"] for s in samples),
        "stages": {k: v for k, v in stages.items() if any(k in s["stages"] for s in samples)},
        "binary_bytes": samples[0]["binary_bytes"],
        "ptx_instructions": samples[0]["ptx_instructions"],
        "regs": samples[0]["regs"],
    }


def triton_first_launch(runs: int) -> float:
    """Median ms of Triton's cold softmax (import of triton, compile with an empty cache, launch)."""
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache:
            env = dict(os.environ, TRITON_CACHE_DIR=cache)
            cmd = [sys.executable, "-c", TRITON_CHILD, str(KERNELS / "fused_softmax.py")]
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode != 0:
            raise SystemExit(f"triton child failed:\n{proc.stderr[-4000:]}")
        times.append(json.loads(proc.stdout.strip().splitlines()[-1])["first_launch_ms"])
    return statistics.median(times)


def print_importtime(case: dict, top: int) -> None:
    _, err = run_child(case, ["-X", "importtime"])
    rows = []
    for line in err.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, cum, name = line.removeprefix("import time:").split("|")
        rows.append((int(cum), int(own), name.rstrip()))
    rows.sort(reverse=True)
    print(f"{'cumulative ms':>14}{'self ms':>9}  module")
    for cum, own, name in rows[:top]:
        print(f"{cum / 1e3:>14.1f}{own / 1e3:>9.1f}  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=7)
    ap.add_argument("--only", action="append", choices=sorted(CASES), help="cases to run (default: all)")
    ap.add_argument("--importtime", action="store_true", help="print the heaviest imports of one child")
    ap.add_argument("--profile", metavar="FILE", help="cProfile one child's compile (first case) into FILE")
    ap.add_argument("--json", metavar="FILE", help="also write the medians as JSON")
    ap.add_argument("--triton", action="store_true", help="also time Triton's cold softmax (torch, GPU)")
    ap.add_argument(
        "--no-pyc", action="store_true", help="no bytecode cache: each process compiles the sources"
    )
    args = ap.parse_args()
    names = args.only or list(CASES)
    with tempfile.TemporaryDirectory(prefix="tilec-pyc-") as pyc:
        if not args.no_pyc:
            PYC.clear()
            PYC["PYTHONPYCACHEPREFIX"] = pyc
            for name in names:  # fills the bytecode cache with every module the cases import
                run_child(CASES[name])
        run(args, names)


def run(args: argparse.Namespace, names: list[str]) -> None:
    if args.importtime:
        print_importtime(CASES[names[0]], 40)
        return
    if args.profile:
        run_child({**CASES[names[0]], "profile": str(Path(args.profile).resolve())})
        print(f"profile of {names[0]} written to {args.profile}")
        return
    results = {}
    head = "".join(f"{k:>11}" for k in STAGE_ORDER)
    print(f"{'case':<14}{'import':>8}{'compile':>9}{'total':>8} |{head} {'ptx ins':>8}")
    for name in names:
        r = results[name] = measure(CASES[name], args.runs)
        cols = "".join(f"{r['stages'][k]:>11.1f}" if k in r["stages"] else f"{'-':>11}" for k in STAGE_ORDER)
        print(
            f"{name:<14}{r['import_ms']:>8.1f}{r['compile_ms']:>9.1f}{r['total_ms']:>8.1f} |{cols} "
            f"{r['ptx_instructions']:>8}",
            flush=True,
        )
    if args.triton:
        print(f"triton softmax, first launch with an empty cache: {triton_first_launch(args.runs):.1f} ms")
    pyc = "no bytecode cache" if args.no_pyc else "bytecode cached"
    print(f"(ms, median of {args.runs} fresh processes, {pyc}; {sys.executable})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

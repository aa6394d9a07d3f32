"""Kernels built by tilec and by Triton side by side, without a GPU: both compile the same source for sm_90 here
(Triton's own compiler, from the test extra, stops at PTX), ptxas (CUDA's, or the one Triton ships) assembles
both, and the table gives registers, spill bytes and counts of the instructions that tell builds apart
(shared-memory traffic, barriers, shuffles, branches, predicated loads), and each side's build time to a cubin
(tilec's with its assembler, Triton's with its ptxas; one process, so the first rows also pay for imports). What a change to the cuda lowering did
to code it did not write, before a GPU times it (bench/speed.py, bench/flaggems_ops.py).

    .venv/bin/python bench/static_compare.py [--case argmax,bmm,bicubic,conv2d,cumsum] [--keep DIR]

The FlagGems cases read their kernels from a FlagGems checkout (--flaggems, default .wt/flaggems: its src/ as
bench/NOTES-dropin.md makes it) and are skipped without one. The kernels are taken out of their modules with
`ast` and compiled as they are written; the shapes and configs are the ones bench/speed.py and
bench/flaggems_ops.py time.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.9 warns without it; 1 is its default
os.environ["TRITON_ALWAYS_COMPILE"] = "1"  # build times of real compiles, not of Triton's disk cache

COUNTS = {
    "ld.shared": r"\bld\.shared",
    "ldmatrix": r"\bldmatrix\.",
    "st.shared": r"\bst\.shared",
    "bar.sync": r"\bbar\.sync",
    "shfl": r"\bshfl\.sync",
    "setp": r"\bsetp\.",
    "selp": r"\bselp\.",
    "bra": r"\bbra(\.uni)?\s",
    "@p ld.global": r"@%p\d+ ld\.global",
    "ld.global": r"\bld\.global",
    "div/rem": r"\b(div|rem)\.[su]32",
}

ARGMAX = """import triton
import triton.language as tl


@triton.jit
def row_argmax(inp, out_idx, out_val, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    best = tl.full([BLOCK_M], float("-inf"), tl.float32)
    best_i = tl.zeros([BLOCK_M], tl.int64)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        m = (rows < M) & (cols < N)
        x = tl.load(inp + rows * N + cols, mask=m, other=float("-inf")).to(tl.float32)
        v, i = tl.max(x, 1, return_indices=True, return_indices_tie_break_left=True)
        up = v > best
        best = tl.where(up, v, best)
        best_i = tl.where(up, start + i, best_i)
    r = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(out_idx + r, best_i, mask=r < M)
    tl.store(out_val + r, best, mask=r < M)
"""

CUMSUM = """import triton
import triton.language as tl


@triton.jit
def row_cumsum(in_ptr, out_ptr, N, TILE_SIZE: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, TILE_SIZE)
    mask = offsets < N
    x = tl.load(in_ptr + pid * N + offsets, mask=mask, other=0).to(tl.float32)
    tl.store(out_ptr + pid * N + offsets, tl.cumsum(x, 0), mask=mask)
"""


def _function_source(path: Path, name: str) -> str:
    """`name`'s def out of `path`, decorators dropped, as a module with only Triton's imports (its helpers are
    Triton's own: tle.program_id is tl.program_id)."""
    text = path.read_text()
    fn = next(n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name)
    body = ast.get_source_segment(text, fn).replace("tle.program_id", "tl.program_id")
    return "import triton\nimport triton.language as tl\n\n\n@triton.jit\n" + body + "\n"


def tutorial03_source(path: Path) -> str:
    """Tutorial 03's matmul_kernel and its leaky_relu helper, decorators dropped, as a module of their own."""
    return _function_source(path, "matmul_kernel") + "\n\n" + _function_source(path, "leaky_relu").split("\n\n\n", 1)[1]


def _cases(flaggems: Path) -> dict:
    """name -> (source, kernel, signature, constexprs, divisible-by-16 parameters, num_warps, num_stages[,
    parameters equal to 1])."""
    ops = flaggems / "src/flag_gems/ops"
    bmm_sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16"}
    bmm_sig |= {n: "i32" for n in ("M", "N", "K", "stride_ab", "stride_am", "stride_ak", "stride_bb", "stride_bk",
                                    "stride_bn", "stride_cb", "stride_cm", "stride_cn")}  # fmt: skip
    bmm_consts = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
    ones = ["stride_ak", "stride_bn", "stride_cn"]  # unit strides: specialised to 1 on both sides
    cases = {
        "argmax": (
            ARGMAX,
            "row_argmax",
            {"inp": "*fp32", "out_idx": "*i64", "out_val": "*fp32", "M": "i32", "N": "i32"},
            {"BLOCK_M": 8, "BLOCK_N": 4096},
            ["inp", "out_idx", "out_val", "M", "N"],  # FlagGems launches it at 4096 x 4096: both specialised
            4,
            3,
        ),  # fmt: skip
        "bmm": (
            _function_source(ROOT / "bench/speed_kernels.py", "bmm_kernel"),
            "bmm_kernel",
            bmm_sig,
            bmm_consts,
            [p for p in bmm_sig if p not in ones],
            4,
            4,
            ones,
        ),
        "cumsum": (
            CUMSUM,
            "row_cumsum",
            {"in_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32"},
            {"TILE_SIZE": 4096},
            ["in_ptr", "out_ptr", "N"],
            8,
            3,
        ),  # fmt: skip
    }
    cases["cumsum_rows"] = (_function_source(ROOT / "bench/speed_kernels.py", "cumsum_rows"), "cumsum_rows",
                            {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride": "i32"}, {"BLOCK_M": 64, "BLOCK_N": 1024},
                            ["x_ptr", "out_ptr", "stride"], 8, 3)  # the speed table's [64, 1024] scan  # fmt: skip
    ln_sig = {"X": "*fp16", "Y": "*fp16", "W": "*fp16", "B": "*fp16", "Mean": "*fp32", "Rstd": "*fp32",
              "stride": "i32", "N": "i32", "eps": "fp32"}  # fmt: skip
    cases["layer_norm"] = (_function_source(ROOT / "bench/speed_kernels.py", "layer_norm_fwd"), "layer_norm_fwd", ln_sig,
                           {"BLOCK_SIZE": 1024}, ["X", "Y", "W", "B", "Mean", "Rstd", "stride", "N"], 8, 3)  # fmt: skip
    sm_sig = {"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32", "output_row_stride": "i32",
              "n_cols": "i32"}  # fmt: skip
    cases["tutorial_softmax"] = (_function_source(ROOT / "bench/speed_kernels.py", "softmax_kernel"), "softmax_kernel",
                                 sm_sig, {"BLOCK_SIZE": 1024}, ["output_ptr", "input_ptr"], 8, 3)  # the speed table's n=1000  # fmt: skip
    tut03 = ROOT / ".wt/tutorials/03-matrix-multiplication.py"
    if tut03.is_file():  # Triton's tutorial 03 as published, at configs of its own list (bench/tutorial03_configs.py)
        src = tutorial03_source(tut03)
        names = ["M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"]
        for dt, (bm, bn, bk, w, st) in [("fp16", (128, 128, 32, 4, 4)), ("fp16", (64, 128, 64, 4, 4)),
                                        ("fp16", (64, 32, 32, 2, 5)), ("fp8", (64, 32, 32, 2, 5))]:  # fmt: skip
            ptr = "*fp8e5" if dt == "fp8" else "*fp16"
            sig = {"a_ptr": ptr, "b_ptr": ptr, "c_ptr": "*fp16"} | {n: "i32" for n in names}
            ones = ["stride_ak", "stride_cn", "stride_bk" if dt == "fp8" else "stride_bn"]  # fp8's b is b.T
            consts = {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8, "ACTIVATION": ""}
            cases[f"t03_{dt}_{bm}x{bn}x{bk}w{w}"] = (src, "matmul_kernel", sig, consts,
                                                     [p for p in sig if p not in ones], w, st, ones)  # fmt: skip
    tut05 = ROOT / ".wt/tutorials/05-layer-norm.py"
    if tut05.is_file():  # tutorial 05's backward kernels at its benchmark's N=7,168 (fp16, 4,096 rows)
        dx_sig = {n: "*fp16" for n in ("DX", "DY", "DW", "DB", "X", "W")}
        dx_sig |= {"Mean": "*fp32", "Rstd": "*fp32", "Lock": "*i32", "stride": "i32", "N": "i32"}
        cases["t05_bwd_dx"] = (_function_source(tut05, "_layer_norm_bwd_dx_fused"), "_layer_norm_bwd_dx_fused",
                               dx_sig, {"GROUP_SIZE_M": 96, "BLOCK_SIZE_N": 8192}, list(dx_sig), 8, 3)  # fmt: skip
        dwdb_sig = {"DW": "*fp16", "DB": "*fp16", "FINAL_DW": "*fp16", "FINAL_DB": "*fp16", "M": "i32", "N": "i32"}
        cases["t05_bwd_dwdb"] = (_function_source(tut05, "_layer_norm_bwd_dwdb"), "_layer_norm_bwd_dwdb", dwdb_sig,
                                 {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 128}, ["DW", "DB", "FINAL_DW", "FINAL_DB", "N"],
                                 4, 3)  # fmt: skip
    if (ops / "upsample_bicubic2d_aa.py").is_file():
        bic_sig = {"ptr_o": "*fp16", "ptr_i": "*fp16"} | {
            n: "i32" for n in ("N", "C", "OH", "OW", "IH", "IW")
        }
        bic_sig |= {"reciprocal_scale_h": "fp32", "reciprocal_scale_w": "fp32"}
        cases["bicubic"] = (_function_source(ops / "upsample_bicubic2d_aa.py", "general_interpolate_bicubic2d_aa_kernel"),
                            "general_interpolate_bicubic2d_aa_kernel", bic_sig, {"BLOCK_X": 256, "BLOCK_Y": 2},
                            ["ptr_o", "ptr_i"], 4, 3)  # fmt: skip
    if (ops / "conv2d.py").is_file():
        src = _function_source(ops / "conv2d.py", "conv2d_forward_kernel")
        params = [a.arg for a in ast.parse(src).body[-1].args.args]
        consts = {"weight_c": 32, "weight_height": 3, "weight_width": 3, "stride_height": 1, "stride_width": 1,
                  "padding_height": 1, "padding_width": 1, "dilation_height": 1, "dilation_width": 1, "groups": 1,
                  "BLOCK_NI_HO_WO": 128, "BLOCK_CO": 128, "BLOCK_CI": 32}  # fmt: skip
        ptrs = ["input_pointer", "weight_pointer", "output_pointer", "bias_pointer"]
        sig = {p: ("*fp16" if p in ptrs else "i32") for p in params if p not in consts}
        cases["conv2d"] = (src, "conv2d_forward_kernel", sig, consts, ptrs, 4, 2)
    if (ops / "argmax.py").is_file():  # bench/flaggems_ops.py's argmax: fp32 [4096, 4096] along rows, its heuristics'
        src = _function_source(ops / "argmax.py", "argmax_kernel").replace("get_dtype_min(dtype)", 'float("-inf")')
        cases["argmax_fg"] = (src, "argmax_kernel", {"inp": "*fp32", "out_index": "*i64", "M": "i32", "N": "i32", "K": "i32"},
                              {"BLOCK_M": 8, "BLOCK_N": 4096}, ["inp", "out_index", "M", "N"], 4, 3, ["K"])  # fmt: skip
    if (ops / "softmax.py").is_file():  # bench/flaggems_ops.py's softmax: fp16 [4096, 4096], one row a CTA
        cases["softmax"] = (_function_source(ops / "softmax.py", "softmax_kernel_inner"), "softmax_kernel_inner",
                            {"output_ptr": "*fp16", "input_ptr": "*fp16", "M": "i32", "N": "i32"},
                            {"TILE_N": 4096, "ONE_TILE_PER_CTA": True}, ["output_ptr", "input_ptr", "M", "N"], 16, 3)  # fmt: skip
    if (ROOT / ".wt/flaggems/src/flag_gems/fused/rotary_embedding.py").is_file():  # flaggems_ops' rotary: 4,096
        # tokens, 32 q and 8 k heads of 128, positions given, seq_len None (a constexpr on both sides)
        src = _function_source(flaggems / "src/flag_gems/fused/rotary_embedding.py", "apply_rotary_pos_emb_kernel")
        strides = [f"{t}_stride_{d}" for t in ("q", "k", "oq", "ok") for d in "shd"]
        rot_sig = {p: "*fp16" for p in ("oq_ptr", "ok_ptr", "q_ptr", "k_ptr", "cos_ptr", "sin_ptr")} | {"pos_ptr": "*i64"}
        rot_sig |= {p: "i32" for p in strides + ["p_stride_s", "cos_stride_s", "sin_stride_s"]}
        ones = [p for p in strides if p.endswith("_d")] + ["p_stride_s"]
        cases["rotary"] = (src, "apply_rotary_pos_emb_kernel", rot_sig,
                           {"seq_len": None, "NUM_Q_HEADS": 32, "NUM_K_HEADS": 8, "HEAD_DIM": 128, "PADDED_HEAD_DIM": 128,
                            "ROTARY_INTERLEAVED": False, "MAX_POSITION_EMBEDDINGS": 4096},
                           [p for p in rot_sig if p not in ones], 4, 3, ones)  # fmt: skip
    if (ops / "cat.py").is_file():  # the torch.cat that flaggems_ops' rotary row ends with (1-D, two fp16 inputs)
        src = _function_source(ops / "cat.py", "cat_copy_func_kernel_4")
        cat_sig = {p: "*fp16" for p in ("out_ptr", "in_ptr_a", "in_ptr_b", "in_ptr_c", "in_ptr_d")}
        cat_sig |= {f"{n}_{x}": "i32" for n in ("dim_size_in", "dim_offset", "total_elements") for x in "abcd"}
        cat_sig |= {"dim_size_out": "i32", "dim_prod_post": "i32"}
        cases["cat"] = (src, "cat_copy_func_kernel_4", cat_sig, {"BLOCK_X": 1024},
                        [p for p in cat_sig if p != "dim_prod_post"], 4, 3, ["dim_prod_post"])  # fmt: skip
    liger = ROOT / ".wt/liger/src/liger_kernel/ops"
    if (liger / "kl_div.py").is_file():  # bench/flaggems_ops.py --library liger: its shapes and Liger's configs
        consts = "".join(f"_REDUCTION_MODE_{m} = tl.constexpr({i})\n" for i, m in enumerate(("NONE", "SUM", "MEAN", "BATCHMEAN")))
        src = _function_source(liger / "kl_div.py", "_kldiv_kernel_forward").replace("\n\n\n@", "\n" + consts + "\n\n@", 1)
        kl_sig = {"y_ptr": "*fp32", "y_stride": "i32", "gt_ptr": "*fp32", "gt_stride": "i32", "loss_ptr": "*fp32",
                  "loss_stride": "i32", "n_cols": "i32", "eps": "fp32"}  # fmt: skip
        cases["liger_kl_div"] = (src, "_kldiv_kernel_forward", kl_sig, {"BLOCK_SIZE": 16384, "log_target": False, "reduction": 3},
                                 ["y_ptr", "y_stride", "gt_ptr", "gt_stride", "loss_ptr", "n_cols"], 16, 3, ["loss_stride"])  # fmt: skip
        src = _function_source(liger / "cross_entropy.py", "liger_cross_entropy_kernel").replace(
            "\n\n\n@", "\nLOG2_E = tl.constexpr(1.4426950408889634)\n\n\n@", 1)
        ce_sig = {"X_ptr": "*fp32", "X_stride": "i32", "Y_ptr": "*i64", "Y_stride": "i32", "weight_ptr": "*fp32",
                  "loss_ptr": "*fp32", "z_loss_ptr": "*fp32", "loss_stride": "i32", "token_accuracy_ptr": "*fp32",
                  "token_accuracy_stride": "i32", "predicted_tokens_ptr": "*i64", "predicted_tokens_stride": "i32",
                  "n_cols": "i32", "n_non_ignore": "i32", "sum_non_ignore_weight": "fp32", "weight_sum": "fp32",
                  "ignore_index": "i32", "softcap": "fp32"}  # fmt: skip
        ce_consts = {"lse_square_scale": 0.0, "label_smoothing": 0.0, "reduction": "mean", "RETURN_Z_LOSS": False,
                     "RETURN_TOKEN_ACCURACY": False, "RETURN_PREDICTED_TOKENS": False, "BLOCK_SIZE": 32768,
                     "HAS_WEIGHT": False, "HAS_SOFTCAPPING": False, "HAS_GRADIENTS": False}  # fmt: skip
        cases["liger_ce"] = (src, "liger_cross_entropy_kernel", ce_sig, ce_consts,
                             ["X_ptr", "X_stride", "Y_ptr", "loss_ptr", "n_cols"], 32, 3, ["Y_stride", "loss_stride"])  # fmt: skip
    return cases


def _tilec_ptx(case: tuple) -> str:
    from tilec.compiler.artifact import CompileOptions
    from tilec.compiler.pipeline import compile_kernel

    src, name, sig, consts, div16, warps, stages, *ones = case
    hints = {p: {"divisibility": 16} for p in div16} | {
        p: {"equal_to_1": True} for p in (ones[0] if ones else [])
    }
    art = compile_kernel(src, name, signature=sig, constexprs=consts, hints=hints,
                         options=CompileOptions(target="cuda:sm_90", num_warps=warps, num_stages=stages), emit="cubin")  # fmt: skip
    return art.ptx


def _triton_ptx(case: tuple, work: Path) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src, name, sig, consts, div16, warps, stages, *ones = case
    consts = consts | {p: 1 for p in (ones[0] if ones else [])}  # Triton makes an argument of 1 a constexpr
    path = work / f"tri_{name}.py"  # Triton reads a kernel's source from its file
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    jf = getattr(mod, name)
    names = jf.arg_names
    tsig = {p: ("constexpr" if p in consts else sig[p]) for p in names}
    attrs = {(names.index(p),): [["tt.divisibility", 16]] for p in div16 if p in names}
    compiled = triton.compile(ASTSource(jf, tsig, consts, attrs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": warps, "num_stages": stages})  # fmt: skip
    return compiled.asm["ptx"]


def _ptxas() -> str:
    for cand in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"):
        if cand and Path(cand).is_file():
            return cand
    import triton

    return str(Path(triton.__file__).parent / "backends/nvidia/bin/ptxas")


def _assemble(ptx: str, path: Path) -> str:
    """ptxas -v on the PTX: 'R regs, S B spill' or what went wrong. A .version this ptxas does not read
    (Triton writes its own CUDA's) is lowered to 9.0, then 8.0."""
    target = re.search(r"^\.target (\S+)", ptx, re.M).group(1)
    done = None
    for version in (None, "9.0", "8.0"):
        text = ptx if version is None else re.sub(r"^\.version \S+", f".version {version}", ptx, flags=re.M)
        path.write_text(text)
        done = subprocess.run([_ptxas(), f"-arch={target}", "-v", str(path), "-o", str(path.with_suffix(".cubin"))],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode == 0:
            break
    regs = re.search(r"Used (\d+) registers", done.stderr)
    spill = re.search(r"(\d+) bytes spill stores", done.stderr)
    if regs is None:
        return "ptxas failed"
    return f"{regs.group(1)} regs, {spill.group(1) if spill else 0} B spill"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="", help="comma-separated case names (default: every one available)")
    ap.add_argument("--flaggems", default=str(ROOT / ".wt/flaggems"))
    ap.add_argument("--keep", default=None, help="write the PTX of both sides into this folder")
    ns = ap.parse_args()
    cases = _cases(Path(ns.flaggems))
    wanted = [c for c in ns.case.split(",") if c] or list(cases)
    work = Path(ns.keep or tempfile.mkdtemp(prefix="static-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'case':<11}{'side':<8}{'build s':>8}  {'ptxas':<24}" + "".join(f"{k:>14}" for k in COUNTS))
    for name in wanted:
        if name not in cases:
            print(f"{name:<11}skipped (no FlagGems checkout at {ns.flaggems})" if name in ("bicubic", "conv2d")
                  else f"{name:<11}unknown case")  # fmt: skip
            continue
        for side, build in (("tilec", _tilec_ptx), ("triton", lambda c: _triton_ptx(c, work))):
            t0 = time.perf_counter()
            ptx = build(cases[name])
            took = time.perf_counter() - t0
            asm = _assemble(ptx, work / f"{name}.{side}.ptx")
            row = "".join(f"{len(re.findall(rx, ptx)):>14}" for rx in COUNTS.values())
            print(f"{name:<11}{side:<8}{took:>8.2f}  {asm:<24}{row}", flush=True)


if __name__ == "__main__":
    main()

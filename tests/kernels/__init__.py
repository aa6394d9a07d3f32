"""Triton-tutorial-style kernels, written exactly as a Triton user writes them, shared as test inputs.

KERNELS maps each file stem to its kernel name, a signature (runtime parameter -> Triton type) and
constexpr values that build a small specialisation.
"""

from pathlib import Path

HERE = Path(__file__).parent

KERNELS = {
    "vector_add": dict(
        name="add_kernel",
        signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"},
        constexprs={"BLOCK_SIZE": 128},
    ),
    "fused_softmax": dict(
        name="softmax_kernel",
        signature={"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32",
                   "output_row_stride": "i32", "n_cols": "i32"},
        constexprs={"BLOCK_SIZE": 128},
    ),
    "layer_norm": dict(
        name="_layer_norm_fwd_fused",
        signature={"X": "*fp32", "Y": "*fp32", "W": "*fp32", "B": "*fp32", "Mean": "*fp32", "Rstd": "*fp32",
                   "stride": "i32", "N": "i32", "eps": "fp32"},
        constexprs={"BLOCK_SIZE": 64},
    ),
    "matmul": dict(
        name="matmul_kernel",
        signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                   "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32",
                   "stride_cm": "i32", "stride_cn": "i32"},
        constexprs={"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
    ),
    "matmul_persistent": dict(
        name="matmul_persistent",
        signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                   "stride_am": "i32", "stride_ak": "i32", "stride_bk": "i32", "stride_bn": "i32",
                   "stride_cm": "i32", "stride_cn": "i32"},
        constexprs={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2, "NUM_SMS": 3},
    ),
    "matmul_bt": dict(
        name="matmul_bt_kernel",
        signature={"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32",
                   "stride_am": "i32", "stride_bn": "i32", "stride_cm": "i32"},
        constexprs={"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32},
    ),
    "gather": dict(
        name="gather_kernel",
        signature={"src_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32", "n": "i32"},
        constexprs={"BLOCK": 64},
    ),
    "csr_spmv": dict(
        name="csr_spmv_kernel",
        signature={"rowptr_ptr": "*i32", "col_ptr": "*i32", "val_ptr": "*fp32", "x_ptr": "*fp32", "y_ptr": "*fp32"},
        constexprs={"BLOCK": 16},
    ),
    "helper_2d": dict(
        name="relu_scale_2d_kernel",
        signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32", "stride": "i32", "scale": "fp32"},
        constexprs={"BLOCK_M": 16, "BLOCK_N": 16},
    ),
    "histogram": dict(
        name="histogram_kernel",
        signature={"x_ptr": "*i32", "hist_ptr": "*i32", "n": "i32"},
        constexprs={"NUM_BINS": 16, "BLOCK": 64},
    ),
    "transpose": dict(
        name="transpose_kernel",
        signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "N": "i32", "stride_xm": "i32",
                   "stride_om": "i32"},
        constexprs={"BLOCK_M": 16, "BLOCK_N": 16},
    ),
    "cumsum": dict(
        name="cumsum_kernel",
        signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "stride": "i32"},
        constexprs={"BLOCK_ROWS": 4, "BLOCK_COLS": 32},
    ),
}


def source(stem: str) -> str:
    return (HERE / f"{stem}.py").read_text()

import triton
import triton.language as tl


@triton.heuristics({"HAS_BIAS": lambda args: args["bias_ptr"] is not None})
@triton.jit
def rows_plus_bias(x_ptr, bias_ptr, out_ptr, n_cols, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    if HAS_BIAS:
        x += tl.load(bias_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, x, mask=mask)


@triton.jit
def rows_scale_explicit(x_ptr, scale_ptr, out_ptr, n_cols, HAS_SCALE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    if HAS_SCALE:
        x = x * tl.load(scale_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, x, mask=mask)

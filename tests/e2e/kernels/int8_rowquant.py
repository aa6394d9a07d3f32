import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice


@triton.jit
def quantize_rows_absmax(x_ptr, q_ptr, scale_ptr, n_cols, stride_x, stride_q, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.max(tl.abs(x), axis=0)
    scale = tl.where(absmax == 0, 1.0, absmax / 127.0)
    q = libdevice.round(x / scale)
    q = tl.clamp(q, -127.0, 127.0)
    tl.store(q_ptr + row * stride_q + cols, q.to(tl.int8), mask=mask)
    tl.store(scale_ptr + row, scale)


@triton.jit
def dequantize_rows(q_ptr, scale_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    q = tl.load(q_ptr + row * n_cols + cols, mask=mask, other=0)
    s = tl.load(scale_ptr + row)
    tl.store(out_ptr + row * n_cols + cols, q.to(tl.float32) * s, mask=mask)

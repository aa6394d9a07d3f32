import triton
import triton.language as tl


@triton.jit
def quantize_int8_kernel(x_ptr, q_ptr, scale_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.max(tl.abs(x), axis=0)
    absmax = tl.maximum(absmax, 1e-8)
    scale = absmax / 127.0
    q = x / scale
    q = tl.where(q >= 0, tl.floor(q + 0.5), tl.ceil(q - 0.5))
    q = tl.clamp(q, -127.0, 127.0).to(tl.int8)
    tl.store(q_ptr + row * stride + cols, q, mask=mask)
    tl.store(scale_ptr + row, scale)

import triton
import triton.language as tl


@triton.jit
def clamp_where_kernel(x_ptr, out_ptr, lo, hi, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    x = tl.where(mask, x, 0.0)
    r = tl.maximum(x, 0)
    c = tl.clamp(x, lo, hi)
    m = tl.minimum(r, 2.5)
    out = c + m + tl.where(x > 1.0, 1, 0)
    tl.store(out_ptr + offs, out, mask=mask)

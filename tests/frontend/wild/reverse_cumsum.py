import triton
import triton.language as tl


@triton.jit
def suffix_sum_kernel(x_ptr, out_ptr, prod_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0)
    suffix = tl.cumsum(x, axis=0, reverse=True)
    tl.store(out_ptr + row * n + offs, suffix, mask=mask)
    p = tl.cumprod(tl.where(mask, x, 1.0), 0)
    tl.store(prod_ptr + row * n + offs, p, mask=mask)

import triton
import triton.language as tl


@triton.jit
def histogram_kernel(x_ptr, hist_ptr, n, NUM_BINS: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    bins = tl.minimum(tl.maximum(x, 0), NUM_BINS - 1)
    tl.atomic_add(hist_ptr + bins, 1, mask=mask)

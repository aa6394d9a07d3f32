import triton
import triton.language as tl


@triton.jit
def block_histogram_kernel(x_ptr, hist_ptr, n, NUM_BINS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0)
    local = tl.histogram(x, NUM_BINS, mask=mask)
    tl.atomic_add(hist_ptr + tl.arange(0, NUM_BINS), local)

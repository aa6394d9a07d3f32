import triton
import triton.language as tl


@triton.jit
def absmax_kernel(x_ptr, out_ptr, idx_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    block_max = tl.max(tl.abs(x), axis=0)
    tl.atomic_max(out_ptr, block_max)
    i = tl.argmax(tl.abs(x), axis=0)
    tl.store(idx_ptr + pid, pid * BLOCK_SIZE + i)
    tl.atomic_min(out_ptr + 1, tl.min(x, axis=0), sem="relaxed")

import triton
import triton.language as tl


@triton.jit
def copy_with_hints(src, dst, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    tl.device_assert(n >= 0, "n must be non-negative")
    x = tl.load(src + offs, mask=offs < n)
    tl.debug_barrier()
    tl.device_assert(x == x, "no NaNs allowed", mask=offs < n)
    tl.store(dst + offs, x, mask=offs < n)

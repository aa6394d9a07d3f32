import triton
import triton.language as tl


@triton.jit
def dropout_per_program_seed(x_ptr, keep_ptr, out_ptr, seeds_ptr, n, p, BLOCK: tl.constexpr):
    # each program draws from its own seed (read from memory), so programs are independent streams
    pid = tl.program_id(axis=0)
    seed = tl.load(seeds_ptr + pid)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    in_range = offsets < n
    x = tl.load(x_ptr + offsets, mask=in_range)
    r = tl.rand(seed, offsets)
    keep = r > p
    y = tl.where(keep, x / (1 - p), 0.0)
    tl.store(out_ptr + offsets, y, mask=in_range)
    tl.store(keep_ptr + offsets, keep.to(tl.int8), mask=in_range)

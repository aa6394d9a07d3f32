import triton
import triton.language as tl


@triton.jit
def bucketize_kernel(values_ptr, boundaries_ptr, out_ptr, n_values, n_boundaries, BLOCK: tl.constexpr):
    # per element binary search over sorted boundaries; the trip count depends on loaded data
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_values
    v = tl.load(values_ptr + offs, mask=mask, other=0.0)
    lo = tl.zeros([BLOCK], dtype=tl.int32)
    hi = tl.full([BLOCK], 0, tl.int32) + n_boundaries
    steps = 0
    while steps < 32:
        active = lo < hi
        mid = (lo + hi) // 2
        b = tl.load(boundaries_ptr + mid, mask=active, other=0.0)
        go_right = active & (b <= v)
        lo = tl.where(go_right, mid + 1, lo)
        hi = tl.where(active & ~go_right, mid, hi)
        steps += 1
    tl.store(out_ptr + offs, lo, mask=mask)

import triton
import triton.language as tl


@triton.jit
def kwargs_copy_kernel(in_ptr, out_ptr, flag_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.arange(0, BLOCK_SIZE) + BLOCK_SIZE * tl.program_id(axis=0)
    m = offs < n
    a = tl.load(other=0.0, mask=m, pointer=in_ptr + offs, cache_modifier=".cg")
    b = tl.load(in_ptr + offs, m, 0.0, eviction_policy="evict_last")
    flag = tl.load(flag_ptr, volatile=True)
    c = tl.where(flag != 0, a + b, a - b)
    tl.store(value=c, pointer=out_ptr + offs, mask=m, eviction_policy="evict_first", cache_modifier=".wb")

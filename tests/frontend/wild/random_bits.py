import triton
import triton.language as tl


@triton.jit
def random_bits_kernel(out_int_ptr, out_float_ptr, out_normal_ptr, seed, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    r = tl.randint(seed, offs)
    tl.store(out_int_ptr + offs, r, mask=m)
    u = tl.rand(seed, offs)
    tl.store(out_float_ptr + offs, u, mask=m)
    z = tl.randn(seed, offs)
    tl.store(out_normal_ptr + offs, z, mask=m)

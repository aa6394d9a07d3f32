import triton
import triton.language as tl


@triton.jit
def small_dot_kernel(a_ptr, b_ptr, c_ptr, d_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * BK + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BN + rn[None, :])
    c = tl.dot(a, b, out_dtype=tl.float16)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], c)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    acc = tl.dot(a, b, acc, allow_tf32=False)
    acc = tl.dot(a, b, acc=acc)
    tl.store(d_ptr + rm[:, None] * BN + rn[None, :], acc)

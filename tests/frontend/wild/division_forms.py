import triton
import triton.language as tl


@triton.jit
def divide_kernel(a_ptr, b_ptr, out_ptr, q_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=1.0)
    b = tl.load(b_ptr + offs, mask=mask, other=1.0)
    r1 = tl.fdiv(a, b)
    r2 = tl.math.div_rn(a, b)
    r3 = a / b
    tl.store(out_ptr + offs, r1 + r2 + r3, mask=mask)
    ia = offs * 7 - 50
    q = ia // 4 + ia % 4
    tl.store(q_ptr + offs, q, mask=mask)

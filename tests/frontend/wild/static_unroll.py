import triton
import triton.language as tl


@triton.jit
def horner_kernel(x_ptr, coeff_ptr, out_ptr, n, DEGREE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    acc = tl.full((BLOCK,), 0.0, dtype=tl.float32)
    for i in tl.static_range(DEGREE, -1, -1):
        c = tl.load(coeff_ptr + i)
        acc = acc * x + c
    tl.store(out_ptr + offs, acc, mask=mask)

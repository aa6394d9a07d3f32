import triton
import triton.language as tl


@triton.jit
def suffix_max_scalar(x_ptr, out_ptr, n):
    best = float("-inf")
    for i in range(n - 1, -1, -1):
        best = tl.maximum(best, tl.load(x_ptr + i))
        tl.store(out_ptr + i, best)


@triton.jit
def horner_static(coef_ptr, x_ptr, y_ptr, n, DEGREE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for d in tl.static_range(DEGREE, -1, -1):
        acc = acc * x + tl.load(coef_ptr + d)
    tl.store(y_ptr + offs, acc, mask=offs < n)

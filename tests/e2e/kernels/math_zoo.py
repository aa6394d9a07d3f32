import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def math_zoo(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.5)
    out = out_ptr + offs * 10
    tl.store(out + 0, tl.sigmoid(x), mask=m)
    tl.store(out + 1, tl.log1p(tl.abs(x)), mask=m)
    tl.store(out + 2, libdevice.tanh(x), mask=m)
    tl.store(out + 3, tl.math.rsqrt(tl.abs(x) + 1.0), mask=m)
    tl.store(out + 4, tl.erf(x), mask=m)
    tl.store(out + 5, libdevice.pow(tl.abs(x), 1.5), mask=m)
    tl.store(out + 6, tl.where(libdevice.isnan(tl.sqrt(x)), -1.0, 1.0), mask=m)
    tl.store(out + 7, tl.fdiv(x, 3.0), mask=m)
    tl.store(out + 8, tl.div_rn(x, 7.0) + tl.sqrt_rn(tl.abs(x)), mask=m)
    sm = tl.softmax(tl.where(m, x, float("-inf")))
    tl.store(out + 9, sm, mask=m)

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def mixed_math_kernel(x_ptr, w_ptr, out_ptr, out16_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)      # fp16
    w = tl.load(w_ptr + offs, mask=mask, other=1.0)      # fp32
    y = x * w                                             # promoted to fp32
    e = tl.exp2(y * 1.4426950408889634)                   # exp(y)
    t = libdevice.tanh(y)
    r = tl.math.rsqrt(w * w + 1.0)
    out = e + t + r
    tl.store(out_ptr + offs, out, mask=mask)
    half = x * 2.0 + x                                    # stays fp16
    tl.store(out16_ptr + offs, half, mask=mask)

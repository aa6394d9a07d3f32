import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _scale_for(amax, QMAX: tl.constexpr):
    # a scalar helper with an early return under a runtime condition
    if amax == 0.0:
        return 1.0
    return QMAX / amax


@triton.jit
def quant_rne_kernel(x_ptr, q_ptr, r_ptr, t_ptr, scale_ptr, n, QMAX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    x = tl.where(libdevice.isinf(x), 0.0, x)
    amax = tl.max(tl.abs(x), axis=0)
    scale = _scale_for(amax, QMAX)
    y = x * scale
    tl.store(q_ptr + offs, libdevice.rint(y), mask=mask)       # half to even
    tl.store(r_ptr + offs, libdevice.round(y), mask=mask)      # half away from zero
    neg = libdevice.signbit(y)
    tl.store(t_ptr + offs, tl.where(neg, -libdevice.trunc(-y), libdevice.trunc(y)), mask=mask)
    tl.store(scale_ptr, scale)

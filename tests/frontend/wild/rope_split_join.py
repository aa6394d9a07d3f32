import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, seq_len, stride_s, HALF: tl.constexpr):
    # rotary embedding on interleaved (even, odd) pairs: x[2i], x[2i+1]
    pos = tl.program_id(0)
    if pos >= seq_len:
        return
    offs = tl.arange(0, 2 * HALF)
    x = tl.load(x_ptr + pos * stride_s + offs)
    pairs = tl.reshape(x, (HALF, 2))
    x_even, x_odd = tl.split(pairs)
    c = tl.load(cos_ptr + pos * HALF + tl.arange(0, HALF))
    s = tl.load(sin_ptr + pos * HALF + tl.arange(0, HALF))
    out_even = x_even * c - x_odd * s
    out_odd = x_even * s + x_odd * c
    out = tl.interleave(out_even, out_odd)
    tl.store(out_ptr + pos * stride_s + offs, out)
    again = tl.reshape(tl.join(out_even, out_odd), (2 * HALF,))
    tl.device_assert(tl.sum((again != out).to(tl.int32), axis=0) == 0, "join/interleave disagree")

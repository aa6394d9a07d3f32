import triton
import triton.language as tl


@triton.jit
def conv1d_same(x_ptr, w_ptr, y_ptr, L, C_in, stride_xc, stride_wo, KSIZE: tl.constexpr,
                BLOCK_L: tl.constexpr):
    # y[o, l] = sum_c sum_t w[o, c, t] * x[c, l + t - KSIZE // 2], zero padding
    o = tl.program_id(1)
    ls = tl.program_id(0) * BLOCK_L + tl.arange(0, BLOCK_L)
    acc = tl.zeros((BLOCK_L,), dtype=tl.float32)
    for c in range(C_in):
        for t in tl.static_range(KSIZE):
            pos = ls + (t - KSIZE // 2)
            xv = tl.load(x_ptr + c * stride_xc + pos, mask=(pos >= 0) & (pos < L), other=0.0)
            wv = tl.load(w_ptr + o * stride_wo + c * KSIZE + t)
            acc = tl.fma(xv, wv, acc)
    tl.store(y_ptr + o * L + ls, acc, mask=ls < L)

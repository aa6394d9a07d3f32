import triton
import triton.language as tl


@triton.jit
def scaled_copy_2d(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym, stride_yn, alpha,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, x * alpha, mask=mask)

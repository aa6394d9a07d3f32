import triton
import triton.language as tl


@triton.jit
def int8_matmul_rowscale_kernel(a_ptr, b_ptr, scale_ptr, c_ptr, M, N, K,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // grid_n
    pid_n = pid % grid_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    A = a_ptr + (rm[:, None] * K + rk[None, :])
    B = b_ptr + (rk[:, None] * N + rn[None, :])
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(K, 0, -BLOCK_K):
        a = tl.load(A, mask=(rm[:, None] < M) & (rk[None, :] < k), other=0)
        b = tl.load(B, mask=(rk[:, None] < k) & (rn[None, :] < N), other=0)
        acc += tl.dot(a, b)
        A += BLOCK_K
        B += BLOCK_K * N
    scale = tl.load(scale_ptr + rm, mask=rm < M, other=0.0)
    c = acc.to(tl.float32) * scale[:, None]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], c, mask=(rm[:, None] < M) & (rn[None, :] < N))

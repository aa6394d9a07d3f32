import triton
import triton.language as tl


@triton.jit
def tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped ordering: GROUP_M rows of tiles are walked column by column, so neighbours share A and B in L2."""
    per_group = GROUP_M * num_pid_n
    first_m = (tile // per_group) * GROUP_M
    rows = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def matmul_persistent(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    """C = A @ B with one program per SM: each program walks the output tiles start, start + NUM_SMS, ..."""
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    rk = tl.arange(0, BLOCK_K)
    for tile in range(start, num_pid_m * num_pid_n, NUM_SMS):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        a_rows = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
        b_cols = tl.max_contiguous(tl.multiple_of(rn % N, BLOCK_N), BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ks in range(k_steps):
            kk = ks * BLOCK_K + rk
            a = tl.load(
                a_ptr + a_rows[:, None] * stride_am + kk[None, :] * stride_ak, mask=kk[None, :] < K, other=0.0
            )
            b = tl.load(
                b_ptr + kk[:, None] * stride_bk + b_cols[None, :] * stride_bn, mask=kk[:, None] < K, other=0.0
            )
            acc = tl.dot(a, b, acc)
        c = acc.to(c_ptr.dtype.element_ty)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c, mask=mask)

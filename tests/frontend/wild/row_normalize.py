import triton
import triton.language as tl


@triton.jit
def l2_normalize_rows(x_ptr, out_ptr, M, N, stride, eps, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    ptrs = x_ptr + rows[:, None] * stride + cols[None, :]
    x = tl.load(ptrs, mask=mask, other=0.0)
    sq = tl.sum(x * x, axis=1, keep_dims=True)
    norm = tl.sqrt(sq)
    y = x / tl.maximum(norm, eps)
    tl.store(out_ptr + rows[:, None] * stride + cols[None, :], y, mask=mask)

import triton
import triton.language as tl


@triton.jit
def column_mean_var(x_ptr, mean_ptr, var_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    count = tl.zeros((BLOCK_N,), dtype=tl.float32)
    mean = tl.zeros((BLOCK_N,), dtype=tl.float32)
    m2 = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, M, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        x = tl.load(x_ptr + rows[:, None] * stride_m + cols[None, :], mask=mask, other=0.0)
        n_b = tl.sum(mask.to(tl.float32), 0)
        mean_b = tl.sum(x, 0) / tl.maximum(n_b, 1.0)
        dev = tl.where(mask, x - mean_b[None, :], 0.0)
        m2_b = tl.sum(dev * dev, 0)
        total = count + n_b
        delta = mean_b - mean
        frac = tl.where(total > 0, n_b / tl.maximum(total, 1.0), 0.0)
        mean = mean + delta * frac
        m2 = m2 + m2_b + delta * delta * count * frac
        count = total
    tl.store(mean_ptr + cols, mean, mask=cols < N)
    tl.store(var_ptr + cols, m2 / count, mask=cols < N)

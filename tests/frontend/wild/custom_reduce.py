import triton
import triton.language as tl


@triton.jit
def _add_combine(a, b):
    return a + b


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def row_stats_kernel(x_ptr, sum_ptr, max_ptr, scan_ptr, idx_ptr, M, N: tl.constexpr, BLOCK_M: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, N)
    rmask = rows < M
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=rmask[:, None], other=0.0)
    s = tl.reduce(x, 1, _add_combine)
    mx, imx = tl.max(x, axis=1, return_indices=True)
    run = tl.associative_scan(x, axis=1, combine_fn=_max_combine)
    tl.store(sum_ptr + rows, s, mask=rmask)
    tl.store(max_ptr + rows, mx, mask=rmask)
    tl.store(idx_ptr + rows, imx, mask=rmask)
    tl.store(scan_ptr + rows[:, None] * N + cols[None, :], run, mask=rmask[:, None])

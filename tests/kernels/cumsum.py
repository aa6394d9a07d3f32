import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride, BLOCK_ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    # each program scans a block of rows along axis 1
    pid = tl.program_id(0)
    rows = pid * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * stride + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = tl.cumsum(x, axis=1)
    tl.store(out_ptr + offs, y, mask=mask)

import triton
import triton.language as tl


@triton.jit
def row_cumsum_long(x_ptr, out_ptr, n_cols, stride_row, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # inclusive cumsum along rows longer than one tile: a carry per row crosses the column blocks
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    carry = tl.zeros((BLOCK_R, 1), dtype=tl.int32)
    for c0 in range(0, n_cols, BLOCK_C):
        cols = c0 + tl.arange(0, BLOCK_C)
        offs = rows[:, None] * stride_row + cols[None, :]
        x = tl.load(x_ptr + offs, mask=cols[None, :] < n_cols, other=0)
        s = tl.cumsum(x, 1) + carry
        tl.store(out_ptr + offs, s, mask=cols[None, :] < n_cols)
        carry = tl.sum(x, 1)[:, None] + carry

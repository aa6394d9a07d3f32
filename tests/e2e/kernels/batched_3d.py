import triton
import triton.language as tl


@triton.jit
def scale_rows_3d(x_ptr, scale_ptr, out_ptr, R, C, stride_b, stride_r, BLOCK_C: tl.constexpr):
    # grid (row blocks reversed, column blocks, batch): program 0 of axis 0 takes the last rows
    rb = tl.num_programs(0) - 1 - tl.program_id(0)
    cb = tl.program_id(1)
    b = tl.program_id(2)
    rows = rb + tl.arange(0, 1)[:, None]
    cols = cb * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    mask = (rows < R) & (cols < C)
    s = tl.load(scale_ptr + b * R + rows)
    x = tl.load(x_ptr + b * stride_b + rows * stride_r + cols, mask=mask)
    y = x * s
    tl.store(out_ptr + b * stride_b + rows * stride_r + cols, y, mask=mask)
    n_col_blocks = tl.num_programs(1)
    tl.device_assert(n_col_blocks * BLOCK_C >= C, "too few column blocks")


@triton.jit
def column_sums_bx1(x_ptr, out_ptr, R, C, BLOCK_R: tl.constexpr):
    # [BLOCK_R, 1] tiles walk down one column
    c = tl.program_id(0)
    acc = tl.zeros((BLOCK_R, 1), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)[:, None]
        acc += tl.load(x_ptr + rows * C + c, mask=rows < R, other=0.0)
    total = tl.sum(acc, 0)
    tl.store(out_ptr + c + tl.arange(0, 1), total)

import triton
import triton.language as tl


@triton.jit
def nanmean_rows(x_ptr, mean_ptr, valid_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("nan"))
    valid = x == x
    count = tl.sum(valid.to(tl.int32), 0)
    total = tl.sum(tl.where(valid, x, 0.0), 0)
    mean = tl.where(count > 0, total / count.to(tl.float32), float("nan"))
    tl.store(mean_ptr + row, mean)
    tl.store(valid_ptr + row * n_cols + cols, valid.to(tl.int8), mask=cols < n_cols)

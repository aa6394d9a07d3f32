import triton
import triton.language as tl


@triton.jit
def spmv(row_ptr, col_idx, vals, x_ptr, y_ptr, n_rows, ROWS_PER_PROG: tl.constexpr, BLOCK: tl.constexpr):
    first = tl.program_id(0) * ROWS_PER_PROG
    for r in tl.static_range(ROWS_PER_PROG):
        row = first + r
        if row < n_rows:
            lo = tl.load(row_ptr + row)
            hi = tl.load(row_ptr + row + 1)
            acc = tl.zeros((BLOCK,), tl.float32)
            for k in range(lo, hi, BLOCK):
                ks = k + tl.arange(0, BLOCK)
                m = ks < hi
                c = tl.load(col_idx + ks, mask=m, other=0)
                acc += tl.load(vals + ks, mask=m, other=0.0) * tl.load(x_ptr + c, mask=m, other=0.0)
            tl.store(y_ptr + row, tl.sum(acc, axis=0))

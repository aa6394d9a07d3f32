import triton
import triton.language as tl


@triton.jit
def csr_spmv_kernel(rowptr_ptr, col_ptr, val_ptr, x_ptr, y_ptr, BLOCK: tl.constexpr):
    # y[row] = sum over the row's nonzeros of val * x[col]; the loop bounds are loaded from memory
    pid = tl.program_id(0)
    row_start = tl.load(rowptr_ptr + pid)
    row_end = tl.load(rowptr_ptr + pid + 1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(row_start, row_end, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < row_end
        cols = tl.load(col_ptr + offs, mask=mask, other=0)
        vals = tl.load(val_ptr + offs, mask=mask, other=0.0)
        xs = tl.load(x_ptr + cols, mask=mask, other=0.0)
        acc += vals * xs
    tl.store(y_ptr + pid, tl.sum(acc, axis=0))

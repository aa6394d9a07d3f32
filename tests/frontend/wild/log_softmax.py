import triton
import triton.language as tl


@triton.jit
def log_softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0).to(tl.int64)
    row_ptr = in_ptr + row_idx * in_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    row = tl.load(row_ptr + col_offsets, mask=col_offsets < n_cols, other=-float('inf'))
    row_max = tl.max(row, axis=0)
    shifted = row - row_max
    log_denominator = tl.log(tl.sum(tl.exp(shifted), axis=0))
    out = shifted - log_denominator
    tl.store(out_ptr + row_idx * out_row_stride + col_offsets, out, mask=col_offsets < n_cols)

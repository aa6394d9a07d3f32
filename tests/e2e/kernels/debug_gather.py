import triton
import triton.language as tl


@triton.jit(debug=True)
def checked_gather(table_ptr, idx_ptr, out_ptr, n_idx, n_table, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n_idx
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.device_assert((idx >= 0) & (idx < n_table), "gather index out of range")
    tl.store(out_ptr + offs, tl.load(table_ptr + idx, mask=m), mask=m)

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n_rows"])
def copy_rows_kernel(x_ptr: tl.tensor, out_ptr: tl.tensor, n_rows: tl.int32, n_cols: int,
                     BLOCK: "tl.constexpr"):
    row = tl.program_id(0)
    if row >= n_rows:
        return
    x_ptrs = x_ptr + row * n_cols + tl.arange(0, BLOCK)
    o_ptrs = out_ptr + row * n_cols + tl.arange(0, BLOCK)
    for start in range(0, n_cols, BLOCK):
        mask = start + tl.arange(0, BLOCK) < n_cols
        v = tl.load(x_ptrs, mask=mask)
        tl.store(o_ptrs, v + 1, mask=mask)
        x_ptrs += BLOCK
        o_ptrs += BLOCK

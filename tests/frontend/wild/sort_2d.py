import triton
import triton.language as tl


@triton.jit
def sort_tiles_kernel(x_ptr, rows_asc_ptr, rows_desc_ptr, cols_asc_ptr, R: tl.constexpr, C: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(rows_asc_ptr + offs, tl.sort(x))
    tl.store(rows_desc_ptr + offs, tl.sort(x, dim=1, descending=True))
    tl.store(cols_asc_ptr + offs, x.sort(dim=0))

import triton
import triton.language as tl


@triton.jit
def masked_fill_rows(x_ptr, keep_ptr, out_ptr, hits_ptr, n_cols, fill, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)[None, :]
    inb = cols < n_cols
    keep = tl.load(keep_ptr + row * n_cols + cols, mask=inb, other=False)
    x = tl.load(x_ptr + row * n_cols + cols, mask=inb, other=0.0)
    y = tl.where(keep, x, fill)
    tl.store(out_ptr + row * n_cols + cols, y, mask=inb)
    tl.store(hits_ptr + row + tl.arange(0, 1)[None, :], tl.sum(keep.to(tl.int32), axis=1)[:, None])

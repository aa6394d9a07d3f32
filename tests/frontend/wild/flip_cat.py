import triton
import triton.language as tl


@triton.jit
def mirror_pad_kernel(x_ptr, out_ptr, flipped_ptr, N: tl.constexpr, ROWS: tl.constexpr):
    # out[r] = concat(x[r], reversed x[r]); flipped = x with its rows in reverse order
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + r * N + c)
    row = tl.load(x_ptr + tl.program_id(0) * N + tl.arange(0, N))
    both = tl.cat(row, tl.flip(row, 0), can_reorder=True)
    tl.store(out_ptr + tl.program_id(0) * 2 * N + tl.arange(0, 2 * N), both)
    tl.store(flipped_ptr + r * N + c, tl.flip(x, dim=0), mask=tl.program_id(0) == 0)

import triton
import triton.language as tl


@triton.jit
def compact_positive(x_ptr, out_ptr, count_ptr, n, BLOCK: tl.constexpr):
    # every kept element reserves its own output slot with an atomic on one shared counter
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-1.0)
    keep = x > 0
    slot = tl.atomic_add(count_ptr + tl.zeros_like(offs), 1, mask=keep)
    tl.store(out_ptr + slot, x, mask=keep)

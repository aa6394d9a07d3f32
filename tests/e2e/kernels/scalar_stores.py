import triton
import triton.language as tl


@triton.jit
def fill_and_flag(out_ptr, flags_ptr, n, use_ones, MODE: tl.constexpr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if MODE == "zeros":
        tl.store(out_ptr + offs, 0.0, mask=m)
    elif MODE == "iota":
        tl.store(out_ptr + offs, offs * SCALE, mask=m)
    else:
        tl.store(out_ptr + offs, 1, mask=m)
    tl.store(flags_ptr + offs, tl.where(use_ones, 1, -1), mask=m)

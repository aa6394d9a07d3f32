import triton
import triton.language as tl

BLOCK: tl.constexpr = 64
SCALE = tl.constexpr(0.5)
NUM_REPEATS = 3


@triton.jit
def global_consts_kernel(x_ptr, out_ptr, n):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    for _ in tl.static_range(NUM_REPEATS):
        x = x * SCALE + 1.0
    tl.store(out_ptr + offs, x, mask=mask)

import triton
import triton.language as tl


@triton.jit
def acc_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, STEPS: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(STEPS):
        acc += tl.load(x_ptr + offs, mask=mask, other=0.0) * (i + 1)
    tl.store(out_ptr + offs, acc, mask=mask)

import triton
import triton.language as tl


@triton.jit
def collatz_steps(x_ptr, steps_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=1).to(tl.int64)
    steps = tl.zeros((BLOCK,), tl.int32)
    active = v > 1
    while tl.sum(active.to(tl.int32), axis=0) > 0:
        v = tl.where(active, tl.where(v % 2 == 0, v // 2, 3 * v + 1), v)
        steps += active.to(tl.int32)
        active = v > 1
    tl.store(steps_ptr + offs, steps, mask=offs < n)

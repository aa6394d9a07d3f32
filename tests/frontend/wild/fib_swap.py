import triton
import triton.language as tl


@triton.jit
def fib_tiles_kernel(seed_ptr, out_ptr, steps_ptr, BLOCK: tl.constexpr):
    # per-program step count read from memory; tuple assignment swaps tiles inside the loop
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    a = tl.load(seed_ptr + offs)
    b = a + 1
    n = tl.load(steps_ptr + pid)
    for _ in range(n):
        a, b = b, a + b
    tl.store(out_ptr + pid * BLOCK + offs, a)

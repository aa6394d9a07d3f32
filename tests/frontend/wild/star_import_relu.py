# ruff: noqa: F403, F405, B007
import triton
from triton.language import *


@triton.jit
def relu_star_kernel(x_ptr, out_ptr, n, BLOCK: constexpr):
    pid = program_id(0)
    offs = pid * BLOCK + arange(0, BLOCK)
    mask = offs < n
    x = load(x_ptr + offs, mask=mask, other=0.0)
    y = where(x > 0, x, zeros_like(x))
    total = 0.0
    for i in range(2):
        total += sum(y, axis=0)
    store(out_ptr + offs, maximum(y, 0.0).to(float32), mask=mask)
    atomic_add(out_ptr + n, total)

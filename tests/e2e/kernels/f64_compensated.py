import triton
import triton.language as tl


@triton.jit
def kahan_block_sums(x_ptr, sums_ptr, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    # each program sums CHUNK doubles in BLOCK lanes with compensation, then reduces the lanes
    pid = tl.program_id(0)
    s = tl.zeros((BLOCK,), tl.float64)
    c = tl.zeros((BLOCK,), tl.float64)
    for i in range(0, CHUNK, BLOCK):
        offs = pid * CHUNK + i + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        y = x - c
        t = s + y
        c = (t - s) - y
        s = t
    tl.store(sums_ptr + pid, tl.sum(s, axis=0))

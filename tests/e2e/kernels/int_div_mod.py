import triton
import triton.language as tl


@triton.jit
def div_mod_forms(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m, other=1)
    b = tl.load(b_ptr + offs, mask=m, other=1)
    q = a // b
    r = a % b
    py_mod = ((a % b) + b) % b
    up = tl.cdiv(a, b)
    base = out_ptr + offs * 5
    tl.store(base, q, mask=m)
    tl.store(base + 1, r, mask=m)
    tl.store(base + 2, py_mod, mask=m)
    tl.store(base + 3, up, mask=m)
    tl.store(base + 4, (a.to(tl.float32) % b.to(tl.float32)).to(tl.int32), mask=m)

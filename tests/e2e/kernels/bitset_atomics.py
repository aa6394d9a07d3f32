import triton
import triton.language as tl


@triton.jit
def build_bitset(values_ptr, bits_ptr, stats_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(values_ptr + offs, mask=m, other=0)
    word = v >> 5
    bit = (1 << (v & 31)).to(tl.uint32)
    tl.atomic_or(bits_ptr + word, bit, mask=m)
    tl.atomic_min(stats_ptr, tl.min(tl.where(m, v, 2147483647), 0))
    tl.atomic_max(stats_ptr + 1, tl.max(tl.where(m, v, -1), 0))
    tl.atomic_xor(stats_ptr + 2, xor_all(v, m))


@triton.jit
def _xor(a, b):
    return a ^ b


@triton.jit
def xor_all(x, m):
    return tl.reduce(tl.where(m, x, 0), 0, _xor)

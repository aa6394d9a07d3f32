import triton
import triton.language as tl


@triton.jit
def unpack_bytes_kernel(packed_ptr, out_ptr, hash_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    w = tl.load(packed_ptr + offs, mask=mask, other=0).to(tl.uint32)
    b0 = w & 0xFF
    b1 = w >> 8 & 0xFF
    b2 = (w >> 16) & 0xFF
    b3 = w >> 24
    s = b0 + b1 + b2 + b3
    tl.store(out_ptr + offs, s.to(tl.int32), mask=mask)
    h = w * 2654435761
    h = h ^ (h >> 13)
    h = (h << 3) | (h >> 29)
    tl.store(hash_ptr + offs, h, mask=mask)

import triton
import triton.language as tl


@triton.jit
def fmix32(h):
    h ^= h >> 16
    h *= 0x85EBCA6B
    h ^= h >> 13
    h *= 0xC2B2AE35
    h ^= h >> 16
    return h


@triton.jit
def hash_and_shift(keys_ptr, hashes_ptr, wide_ptr, shifted_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    k = tl.load(keys_ptr + offs, mask=m, other=0)
    tl.store(hashes_ptr + offs, fmix32(k), mask=m)
    w = tl.load(wide_ptr + offs, mask=m, other=0)
    signed = w >> 33
    logical = (w.to(tl.uint64, bitcast=True) >> 33).to(tl.int64, bitcast=True)
    tl.store(shifted_ptr + 2 * offs, signed, mask=m)
    tl.store(shifted_ptr + 2 * offs + 1, logical, mask=m)

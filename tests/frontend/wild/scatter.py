import triton
import triton.language as tl


@triton.jit
def scatter_kernel(src_ptr, index_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    dst_index = tl.load(index_ptr + offsets, mask, 0)
    vals = tl.load(src_ptr + offsets, mask, 0.0)
    tl.store(dst_ptr + dst_index, vals * 2, mask)

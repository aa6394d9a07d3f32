import triton
import triton.language as tl


@triton.jit
def grouped_copy_ptr_array(src_ptrs, dst_ptrs, sizes, BLOCK: tl.constexpr):
    g = tl.program_id(0)
    n = tl.load(sizes + g)
    src = tl.load(src_ptrs + g).to(tl.pointer_type(tl.float16))
    dst = tl.load(dst_ptrs + g).to(tl.pointer_type(tl.float16))
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)

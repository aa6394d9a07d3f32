import triton
import triton.language as tl


@triton.jit
def locked_accumulate_kernel(x_ptr, out_ptr, lock_ptr, count_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    partial = tl.sum(x, axis=0)
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    count = tl.load(count_ptr)
    if count == 0:
        tl.store(out_ptr, partial)
    else:
        tl.store(out_ptr, tl.load(out_ptr) + partial)
    tl.store(count_ptr, count + 1)
    tl.debug_barrier()
    tl.atomic_xchg(lock_ptr, 0)

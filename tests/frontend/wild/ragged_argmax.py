import triton
import triton.language as tl


@triton.jit
def ragged_argmax_kernel(values_ptr, offsets_ptr, best_ptr, best_idx_ptr):
    # one program per ragged segment: scalar loop with a runtime if carrying the best value and index
    seg = tl.program_id(0)
    start = tl.load(offsets_ptr + seg)
    end = tl.load(offsets_ptr + seg + 1)
    best = -float("inf")
    best_i = -1
    p = values_ptr + start
    i = start
    while i < end:
        v = tl.load(p)
        if v > best:
            best = v
            best_i = i - start
        p += 1
        i += 1
    tl.store(best_ptr + seg, best)
    tl.store(best_idx_ptr + seg, best_i)

import triton
import triton.language as tl


@triton.jit
def csr_row_softmax(values_ptr, row_ptr, out_ptr, BLOCK: tl.constexpr):
    # softmax over the stored entries of each CSR row: an online max/sum pass, then a write pass
    row = tl.program_id(0)
    start = tl.load(row_ptr + row)
    end = tl.load(row_ptr + row + 1)
    running_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    running_sum = tl.zeros((BLOCK,), tl.float32)
    for off in range(start, end, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        v = tl.load(values_ptr + idx, mask=idx < end, other=float("-inf"))
        new_max = tl.maximum(running_max, v)
        scale = tl.where(new_max == float("-inf"), 0.0, tl.exp(running_max - new_max))
        running_sum = running_sum * scale + tl.where(v == float("-inf"), 0.0, tl.exp(v - new_max))
        running_max = new_max
    row_max = tl.max(running_max, 0)
    row_sum = tl.sum(running_sum * tl.exp(running_max - row_max), 0)
    for off in range(start, end, BLOCK):
        idx = off + tl.arange(0, BLOCK)
        v = tl.load(values_ptr + idx, mask=idx < end, other=0.0)
        tl.store(out_ptr + idx, tl.exp(v - row_max) / row_sum, mask=idx < end)

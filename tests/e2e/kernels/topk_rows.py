import triton
import triton.language as tl


@triton.jit
def topk_by_argmax(x_ptr, vals_ptr, idx_ptr, n_cols, K: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
    for i in range(K):
        best = tl.argmax(x, axis=0)
        best_val = tl.max(x, axis=0)
        tl.store(vals_ptr + row * K + i, best_val)
        tl.store(idx_ptr + row * K + i, best)
        x = tl.where(cols == best, float("-inf"), x)

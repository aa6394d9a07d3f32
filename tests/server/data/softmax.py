import triton
import triton.language as tl


@triton.autotune(
    configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 256}, num_warps=8)],
    key=["n_cols"],
)
@triton.jit
def softmax(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr = 128):
    # one row per program
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    keep = offs < n_cols
    x = tl.load(x_ptr + row * stride + offs, mask=keep, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + offs, e / tl.sum(e, axis=0), mask=keep)

import triton
import triton.language as tl


@triton.heuristics({
    "BLOCK": lambda args: min(triton.next_power_of_2(args["n_cols"]), 256),
    "EVEN": lambda args: args["n_cols"] % args["BLOCK"] == 0,
})
@triton.jit
def l2_normalize(x_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row * n_cols
    sq = tl.zeros((BLOCK,), tl.float32)
    for c in range(0, n_cols, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        if EVEN:
            x = tl.load(base + cols)
        else:
            x = tl.load(base + cols, mask=cols < n_cols, other=0.0)
        sq += x * x
    inv = 1.0 / tl.sqrt(tl.sum(sq) + eps)
    for c in range(0, n_cols, BLOCK):
        cols = c + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * n_cols + cols, x * inv, mask=cols < n_cols)

import triton
import triton.language as tl


@triton.jit
def rank_scatter_sort(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # rank of x[i] = #{j: x[j] < x[i]} + #{j < i: x[j] == x[i]}; then out[rank] = x (a stable sort)
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=float("inf"))
    xi = x[:, None]
    xj = tl.reshape(x, (1, BLOCK))
    before = (xj < xi) | ((xj == xi) & (i[None, :] < i[:, None]))
    rank = tl.sum(before.to(tl.int32), axis=1)
    tl.store(out_ptr + rank, x, mask=i < n)

import triton
import triton.language as tl


@triton.jit
def pairwise_sq_dist(a_ptr, b_ptr, d_ptr, nearest_ptr, NA, NB, DIM: tl.constexpr, BA: tl.constexpr, BB: tl.constexpr):
    # d[i, j] = sum_k (a[i, k] - b[j, k])^2 through a [BA, BB, DIM] tile; nearest[i] = argmin_j
    ia = tl.program_id(0) * BA + tl.arange(0, BA)
    jb = tl.arange(0, BB)
    k = tl.arange(0, DIM)
    a = tl.load(a_ptr + ia[:, None] * DIM + k[None, :], mask=ia[:, None] < NA, other=0.0)
    b = tl.load(b_ptr + jb[:, None] * DIM + k[None, :], mask=jb[:, None] < NB, other=0.0)
    diff = a[:, None, :] - b[None, :, :]
    d = tl.sum(diff * diff, axis=-1)
    d = tl.where(jb[None, :] < NB, d, float("inf"))
    tl.store(d_ptr + ia[:, None] * NB + jb[None, :], d, mask=(ia[:, None] < NA) & (jb[None, :] < NB))
    best = tl.min(d, axis=1, keep_dims=True)
    idx = tl.argmin(d, axis=-1)
    tl.store(nearest_ptr + ia, idx, mask=ia < NA)
    tl.store(nearest_ptr + NA + ia[:, None] + tl.zeros_like(best).to(tl.int32), best.to(tl.int32),
             mask=ia[:, None] < NA)

import triton
import triton.language as tl


@triton.jit
def embedding_backward(grad_out_ptr, ids_ptr, grad_table_ptr, n_tokens, dim, BLOCK_T: tl.constexpr,
                       BLOCK_D: tl.constexpr):
    # grad_table[ids[t], :] += grad_out[t, :]; repeated ids collide, hence the atomics
    tok = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    d = tl.arange(0, BLOCK_D)
    ids = tl.load(ids_ptr + tok, mask=tok < n_tokens, other=0).to(tl.int64)
    mask = (tok[:, None] < n_tokens) & (d[None, :] < dim)
    g = tl.load(grad_out_ptr + tok[:, None] * dim + d[None, :], mask=mask, other=0.0)
    tl.atomic_add(grad_table_ptr + ids[:, None] * dim + d[None, :], g, mask=mask)

import triton
import triton.language as tl


@triton.jit
def embedding_kernel(
    weight_ptr,
    indices_ptr,
    out_ptr,
    n_indices,
    embedding_dim,
    stride_w: tl.int64,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    pid_n = tl.program_id(axis=0)
    pid_d = tl.program_id(axis=1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = pid_d * BLOCK_D + tl.arange(0, BLOCK_D)
    mask_n = offs_n < n_indices
    mask_d = offs_d < embedding_dim
    idx = tl.load(indices_ptr + offs_n, mask=mask_n, other=0).to(tl.int64)
    w_ptrs = weight_ptr + idx[:, None] * stride_w + offs_d[None, :]
    mask = mask_n[:, None] & mask_d[None, :]
    rows = tl.load(w_ptrs, mask=mask, other=0.0)
    tl.store(out_ptr + offs_n[:, None] * embedding_dim + offs_d[None, :], rows, mask=mask)

import triton
import triton.language as tl


@triton.jit
def cross_entropy_fwd_kernel(
    logits_ptr, labels_ptr, loss_ptr, lse_ptr,
    logits_row_stride,
    n_cols,
    ignore_index,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    logits_ptr += row * logits_row_stride.to(tl.int64)
    label = tl.load(labels_ptr + row)
    m = -float("inf")
    d = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(logits_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, 0))
        d = d * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
        m = m_new
    lse = m + tl.log(d)
    if label == ignore_index:
        loss = 0.0
    else:
        x_label = tl.load(logits_ptr + label).to(tl.float32)
        loss = lse - x_label
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)

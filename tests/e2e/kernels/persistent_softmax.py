import triton
import triton.language as tl


@triton.jit
def softmax_persistent(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr,
                       num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_ptr = in_ptr + row_idx * in_stride
        cols = tl.arange(0, BLOCK)
        row = tl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf"), eviction_policy="evict_last",
                      cache_modifier=".ca")
        z = row - tl.max(row, axis=0)
        num = tl.exp(z)
        out = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row_idx * out_stride + cols, out, mask=cols < n_cols, cache_modifier=".wb")

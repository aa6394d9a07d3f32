import triton
import triton.language as tl


@triton.jit
def segment_sum_kernel(values_ptr, segment_ids_ptr, out_ptr, num_values, feat, BLOCK: tl.constexpr,
                       FEAT: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    fo = tl.arange(0, FEAT)
    m = offs < num_values
    seg = tl.load(segment_ids_ptr + offs, mask=m, other=0)
    mask2 = m[:, None] & (fo[None, :] < feat)
    v = tl.load(values_ptr + offs[:, None] * feat + fo[None, :], mask=mask2, other=0.0)
    tl.atomic_add(out_ptr + seg[:, None] * feat + fo[None, :], v, mask=mask2)

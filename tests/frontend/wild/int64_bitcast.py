import triton
import triton.language as tl


@triton.jit
def abs_via_bits_kernel(in_ptr, out_ptr, bits_ptr, n_rows, row_stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row_start = pid.to(tl.int64) * row_stride
    cols = tl.arange(0, BLOCK)
    mask = cols < row_stride
    raw = tl.load(in_ptr + row_start + cols, mask=mask, other=0)
    # clear the sign bit of an fp32 held as int32
    cleared = raw & 0x7FFFFFFF
    x = cleared.to(tl.float32, bitcast=True)
    tl.store(out_ptr + row_start + cols, x, mask=mask)
    back = x.to(tl.int32, bitcast=True)
    tl.store(bits_ptr + row_start + cols, back, mask=mask)

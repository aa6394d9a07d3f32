import triton
import triton.language as tl


@triton.jit
def fp16_error_flags(x_ptr, err_ptr, flag_ptr, base, n, gain, BLOCK: tl.constexpr):
    # base is an i64 element offset (it may exceed 2**31 in elements of a virtual index space);
    # the kernel only uses it to number elements
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0) * gain
    back = x.to(tl.float16).to(tl.float32)
    err = back - x
    tl.store(err_ptr + offs, err, mask=m)
    exact = tl.abs(err) < 1e-6
    idx = base + offs
    odd = (idx % 2) == 1
    tl.store(flag_ptr + offs, (exact & odd).to(tl.int8) + exact.to(tl.int8), mask=m)

import triton
import triton.language as tl


@triton.jit
def axpy_bf16_kernel(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    out = alpha * x + y
    if out_ptr.dtype.element_ty == tl.bfloat16:
        out = out.to(tl.bfloat16)
    tl.store(out_ptr + offs, out, mask=mask)

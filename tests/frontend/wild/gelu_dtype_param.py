import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, COMPUTE_DTYPE: tl.constexpr = tl.float32):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(COMPUTE_DTYPE)
    k = 0.7978845608028654
    inner = k * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1 + tl.math.tanh(inner))
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)

import triton
import triton.language as tl


@triton.jit
def sort_rows_kernel(x_ptr, out_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + offs)
    y = tl.sort(x, dim=0, descending=False)
    tl.store(out_ptr + row * N + offs, y)

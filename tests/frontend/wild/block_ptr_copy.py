import triton
import triton.language as tl


@triton.jit
def block_ptr_copy_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    x_block = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(pid * BLOCK_M, 0),
                                block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    x = tl.load(x_block, boundary_check=(0, 1), padding_option="zero")
    o_block = tl.make_block_ptr(base=out_ptr, shape=(M, N), strides=(stride_m, 1), offsets=(pid * BLOCK_M, 0),
                                block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    tl.store(o_block, x, boundary_check=(0, 1))

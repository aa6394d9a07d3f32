import triton
import triton.language as tl


@triton.jit
def transpose_desc_kernel(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK, BLOCK])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[N, M], strides=[M, 1], block_shape=[BLOCK, BLOCK])
    tile = x_desc.load([pid_m * BLOCK, pid_n * BLOCK])
    y_desc.store([pid_n * BLOCK, pid_m * BLOCK], tl.trans(tile) * 2)

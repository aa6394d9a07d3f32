import triton
import triton.language as tl


@triton.jit
def load_tile(ptr, stride, offs_m, offs_n, M, N):
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    return tl.load(ptr + offs_m[:, None] * stride + offs_n[None, :], mask=mask, other=0.0), mask


@triton.jit
def scaled_relu(x, scale):
    return tl.maximum(x * scale, 0.0)


@triton.jit
def relu_scale_2d_kernel(x_ptr, out_ptr, M, N, stride, scale, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    x, mask = load_tile(x_ptr, stride, offs_m, offs_n, M, N)
    y = scaled_relu(x, scale)
    tl.store(out_ptr + offs_m[:, None] * stride + offs_n[None, :], y, mask=mask)

import triton
import triton.language as tl


@triton.jit
def swizzled_add_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        GROUP_M: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    num_m = tl.num_programs(0)
    num_n = tl.num_programs(1)
    pid_m, pid_n = tl.swizzle2d(pid_m, pid_n, num_m, num_n, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], x + 1.0, mask=mask)

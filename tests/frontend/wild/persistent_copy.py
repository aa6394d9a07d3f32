import triton
import triton.language as tl


@triton.jit
def persistent_scale_kernel(x_ptr, out_ptr, M, N, stride_m, alpha,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    num_tiles_m = tl.cdiv(M, BLOCK_M)
    num_tiles_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_tiles_m * num_tiles_n
    for tile in range(pid, num_tiles, tl.num_programs(0)):
        tm = tile // num_tiles_n
        tn = tile % num_tiles_n
        rm = tm * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tn * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        offs = rm[:, None] * stride_m + rn[None, :]
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * alpha, mask=mask)

import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 16, "SPLIT_K": 2}, num_warps=2),
        triton.Config({"BLOCK_N": 32, "SPLIT_K": 4}, num_warps=4),
    ],
    key=["M", "N"],
    reset_to_zero=["out_ptr"],
)
@triton.jit
def splitk_matvec(a_ptr, x_ptr, out_ptr, M, N, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr):
    # out[m] = sum_n a[m, n] * x[n]; each program owns one row and one of SPLIT_K column slices
    row = tl.program_id(0)
    part = tl.program_id(1)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(part * BLOCK_N, N, BLOCK_N * SPLIT_K):
        cols = start + tl.arange(0, BLOCK_N)
        a = tl.load(a_ptr + row * N + cols, mask=cols < N, other=0.0)
        x = tl.load(x_ptr + cols, mask=cols < N, other=0.0)
        acc += a * x
    tl.atomic_add(out_ptr + row, tl.sum(acc))

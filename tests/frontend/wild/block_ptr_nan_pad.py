import triton
import triton.language as tl


@triton.jit
def nan_padded_tiles_kernel(x_ptr, tiles_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Copy each (BLOCK_M, BLOCK_N) tile of x into a dense tile buffer, NaN past the ragged edges.
    pid = tl.program_id(0)
    n_col_tiles = tl.cdiv(N, BLOCK_N)
    tm = pid // n_col_tiles
    tn = pid % n_col_tiles
    src = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (tm * BLOCK_M, tn * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    tile = tl.load(src, boundary_check=(0, 1), padding_option="nan")
    rows = tl.arange(0, BLOCK_M)[:, None]
    cols = tl.arange(0, BLOCK_N)[None, :]
    tl.store(tiles_ptr + pid * BLOCK_M * BLOCK_N + rows * BLOCK_N + cols, tile)
    # Rows clamped inside the matrix (M >= BLOCK_M), so only the column edge needs a check.
    first_row = tl.minimum(tm * BLOCK_M, M - BLOCK_M)
    inner = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (first_row, tn * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    cols_only = tl.load(inner, boundary_check=(1,), padding_option="zero")
    tl.store(tiles_ptr + (tl.num_programs(0) + pid) * BLOCK_M * BLOCK_N + rows * BLOCK_N + cols, cols_only)

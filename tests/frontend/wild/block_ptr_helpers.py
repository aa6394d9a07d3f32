import triton
import triton.language as tl


@triton.jit
def _scaled_row_sum(block, n_steps, BLOCK_N: tl.constexpr):
    acc = tl.zeros((block.block_shape[0],), dtype=tl.float32)
    step = 0
    while step < n_steps:
        tile = tl.load(block, boundary_check=(0, 1))
        acc += tl.sum(tile, axis=1)
        block = tl.advance(block, [0, BLOCK_N])
        step += 1
    return acc


@triton.jit
def _row_block(base, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    return tl.make_block_ptr(base, shape=[M, N], strides=[stride_m, 1], offsets=[tl.program_id(0) * BLOCK_M, 0],
                             block_shape=[BLOCK_M, BLOCK_N], order=[1, 0])


@triton.jit
def row_sums_block_ptr_kernel(x_ptr, out_ptr, M, N, stride_m, REVERSE: tl.constexpr, BLOCK_M: tl.constexpr,
                              BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    blk = _row_block(x_ptr, M, N, stride_m, BLOCK_M, BLOCK_N)
    if pid % 2 == 1:
        blk = tl.advance(blk, (0, 0))  # a no-op on odd programs: merges the block pointer through an if
    total = _scaled_row_sum(blk, tl.cdiv(N, BLOCK_N), BLOCK_N)
    out = tl.make_block_ptr(out_ptr, shape=[M], strides=[1], offsets=[pid * BLOCK_M], block_shape=[BLOCK_M],
                            order=[0])
    tl.store(out, total, boundary_check=[0])

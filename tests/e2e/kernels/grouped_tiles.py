import triton
import triton.language as tl


@triton.jit
def grouped_matmul(a_ptr, b_ptr, c_ptr, problems_ptr, group_count, NUM_SMS: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # problems_ptr holds, per GEMM: m, n, k, a_offset, b_offset, c_offset (elements into packed buffers)
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_count):
        desc = problems_ptr + g * 6
        gm = tl.load(desc)
        gn = tl.load(desc + 1)
        gk = tl.load(desc + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_N)
        num_tiles = num_m_tiles * num_n_tiles
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            a = a_ptr + tl.load(desc + 3)
            b = b_ptr + tl.load(desc + 4)
            c = c_ptr + tl.load(desc + 5)
            tile_in_gemm = tile_idx - last_problem_end
            tm = tile_in_gemm // num_n_tiles
            tn = tile_in_gemm % num_n_tiles
            offs_am = tm * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_bn = tn * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(gk, BLOCK_K)):
                k_cur = kk * BLOCK_K + offs_k
                a_tile = tl.load(a + offs_am[:, None] * gk + k_cur[None, :],
                                 mask=(offs_am[:, None] < gm) & (k_cur[None, :] < gk), other=0.0)
                b_tile = tl.load(b + k_cur[:, None] * gn + offs_bn[None, :],
                                 mask=(k_cur[:, None] < gk) & (offs_bn[None, :] < gn), other=0.0)
                acc += tl.dot(a_tile, b_tile)
            c_mask = (offs_am[:, None] < gm) & (offs_bn[None, :] < gn)
            tl.store(c + offs_am[:, None] * gn + offs_bn[None, :], acc.to(tl.float16), mask=c_mask)
            tile_idx += NUM_SMS
        last_problem_end = last_problem_end + num_tiles

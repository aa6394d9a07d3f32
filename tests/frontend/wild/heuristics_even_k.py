import triton
import triton.language as tl


@triton.heuristics({
    'EVEN_K': lambda args: args['K'] % args['BLOCK_K'] == 0,
})
@triton.jit
def rowsum_kernel(x_ptr, out_ptr, K, stride, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    tl.static_assert(BLOCK_K % 16 == 0)
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        offs = k + tl.arange(0, BLOCK_K)
        if EVEN_K:
            x = tl.load(x_ptr + row * stride + offs)
        else:
            x = tl.load(x_ptr + row * stride + offs, mask=offs < K, other=0.0)
        acc += x
    tl.store(out_ptr + row, tl.sum(acc))

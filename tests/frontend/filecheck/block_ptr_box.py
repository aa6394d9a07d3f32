# SIGNATURE: x_ptr=*fp16,out_ptr=*fp16,M=i32,K=i32,stride_m=i32
# CONSTEXPRS: BLOCK_M=16,BLOCK_K=32
import triton
import triton.language as tl


@triton.jit
def block_ptr_box_kernel(x_ptr, out_ptr, M, K, stride_m, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # CHECK-LABEL: kernel @block_ptr_box_kernel
    # CHECK: [[M:%.*]] = cast %M : i64
    # CHECK: [[K:%.*]] = cast %K : i64
    # CHECK: [[SM:%.*]] = cast %stride_m : i64
    blk = tl.make_block_ptr(x_ptr, (M, K), (stride_m, 1), (tl.program_id(0) * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    acc = tl.zeros([BLOCK_M, BLOCK_K], dtype=tl.float16)
    # CHECK: for
    for _ in range(0, K, BLOCK_K):
        # a zero-padded load marks its box: the pointers, the start (row, column), then the block pointer's
        # base, shape and strides (the constant stride 1 as an i64 constant), for a target's TMA
        # CHECK: [[ONE:%.*]] = constant {value = 1} : i64
        # CHECK: [[BOX:%.*]] = desc_box {{%.*}}, {{%.*}}, {{%.*}}, %x_ptr, [[M]], [[K]], [[SM]], [[ONE]] : tile<16x32xptr<f16>>
        # CHECK: load [[BOX]], {{%[0-9]+}} : tile<16x32xf16>
        acc += tl.load(blk, boundary_check=(0, 1))
        # a NaN-padded load stays a plain pointer tile
        # CHECK-NOT: desc_box
        # CHECK: load {{%[0-9]+}}, {{%[0-9]+}}, {{%[0-9]+}} : tile<16x32xf16>
        acc += tl.load(blk, boundary_check=(1,), padding_option="nan")
        # CHECK: yield
        blk = tl.advance(blk, (0, BLOCK_K))
    out = tl.make_block_ptr(out_ptr, (M, K), (stride_m, 1), (tl.program_id(0) * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    tl.store(out, acc, boundary_check=(0, 1))

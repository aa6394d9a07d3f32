# SIGNATURE: x_ptr=*fp32,out_ptr=*fp32,M=i32,K=i32,stride_m=i32
# CONSTEXPRS: BLOCK_M=16,BLOCK_K=32
import triton
import triton.language as tl


@triton.jit
def block_ptr_kernel(x_ptr, out_ptr, M, K, stride_m, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    # CHECK-LABEL: kernel @block_ptr_kernel
    # shape and strides become i64 scalars; the constant stride 1 and offset 0 stay constants
    # CHECK: [[SM:%.*]] = cast %stride_m : i64
    blk = tl.make_block_ptr(x_ptr, (M, K), (stride_m, 1), (tl.program_id(0) * BLOCK_M, 0), (BLOCK_M, BLOCK_K), (1, 0))
    acc = tl.zeros([BLOCK_M], dtype=tl.float32)
    # only what changes is carried: the accumulator and the column offset (an i32 scalar)
    # CHECK: {{%[0-9]+}}, {{%[0-9]+}} = for {{[^,]*}}, %K, {{[^,]*}}, {{[^,]*}}, {{[^,]*}} : tile<16xf32>, i32 {
    for _ in range(0, K, BLOCK_K):
        # a load is a pointer tile with a boundary mask and NaN as `other`
        # CHECK: [[ROWS:%.*]] = mul {{%.*}}, {{%.*}} : tile<16x1xi64>
        # CHECK: [[NAN:%.*]] = constant {value = nan} : f32
        # CHECK: load {{%.*}}, {{%.*}}, {{%.*}} : tile<16x32xf32>
        acc += tl.sum(tl.load(blk, boundary_check=(0, 1), padding_option="nan"), axis=1)
        # CHECK: yield {{%.*}}, {{%.*}}
        blk = tl.advance(blk, (0, BLOCK_K))
    # a store with no boundary_check has no mask
    # CHECK: store {{%[0-9]+}}, {{%[0-9]+}}{{$}}
    tl.store(tl.make_block_ptr(out_ptr, (M,), (1,), (tl.program_id(0) * BLOCK_M,), (BLOCK_M,), (0,)), acc)

# SIGNATURE: x_ptr=*fp32,i_ptr=*i8,o_ptr=*fp32,j_ptr=*i32
# CONSTEXPRS: BM=4,BN=8
import triton
import triton.language as tl


@triton.jit
def _argmax_combine(value1, index1, value2, index2):
    gt = (value1 > value2) | ((value1 == value2) & (index1 < index2))
    return tl.where(gt, value1, value2), tl.where(gt, index1, index2)


@triton.jit
def _triton_helper_fn_add0(arg0_0, arg1_0):
    tmp0 = arg0_0 + arg1_0
    return tmp0


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def combine_kernel(x_ptr, i_ptr, o_ptr, j_ptr, BM: tl.constexpr, BN: tl.constexpr):
    # CHECK-LABEL: kernel @combine_kernel
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    x = tl.load(x_ptr + offs)
    idx = tl.broadcast_to(tl.arange(0, BN)[None, :], (BM, BN))
    # a tuple with a general combine: reduce_with around a call of it, one result per input
    # CHECK: [[V:%.*]], [[J:%.*]] = reduce_with [[X:%.*]], [[I:%.*]] {axis = 1} : tile<4xf32>, tile<4xi32> {
    # CHECK-NEXT: ^([[A:%.*]]: f32, [[B:%.*]]: i32, [[C:%.*]]: f32, [[D:%.*]]: i32):
    # CHECK-NEXT: [[R:%.*]], [[S:%.*]] = call [[A]], [[B]], [[C]], [[D]] {callee = "_argmax_combine"} : f32, i32
    # CHECK-NEXT: yield [[R]], [[S]]
    v, j = tl.reduce((x, idx), 1, _argmax_combine)
    tl.store(j_ptr + tl.arange(0, BM), j)
    # a known combine on one tensor keeps the fast path, also written as Inductor writes it
    # CHECK: reduce {{%.*}} {axis = 0, kind = "max"} : tile<8xf32>
    m = tl.reduce(x, 0, _max_combine)
    # CHECK: scan [[X]] {axis = 1, kind = "sum"} : tile<4x8xf32>
    (c,) = tl.associative_scan((x,), 1, _triton_helper_fn_add0)
    # an int8 sum through the combine stays int8 (the fast path would widen it): the general op
    # CHECK: scan_with {{%.*}} {axis = 0, reverse = true} : tile<4x8xi8> {
    # CHECK: call {{.*}} {callee = "_triton_helper_fn_add0"} : i8
    k = tl.associative_scan(tl.load(i_ptr + offs), 0, _triton_helper_fn_add0, reverse=True)
    # axis=None flattens first; keep_dims puts the reduced axes back as ones
    # CHECK: [[FLAT:%.*]] = reshape {{%.*}} : tile<32xf32>
    # CHECK: [[T:%.*]], {{%.*}} = reduce_with [[FLAT]], {{%.*}} {axis = 0} : f32, i32 {
    # CHECK: splat [[T]] : tile<1x1xf32>
    t, _ = tl.reduce((x, offs), None, _argmax_combine, keep_dims=True)
    tl.store(o_ptr + offs, c + m[None, :] + t + k.to(tl.float32) + v[:, None])
    # CHECK-LABEL: func @_argmax_combine(%value1: f32, %index1: i32, %value2: f32, %index2: i32) -> f32, i32
    # CHECK: return
    # CHECK-LABEL: func @_triton_helper_fn_add0(%arg0_0: i8, %arg1_0: i8) -> i8
    # CHECK: add %arg0_0, %arg1_0 : i8

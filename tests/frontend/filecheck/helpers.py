# SIGNATURE: a_ptr=*fp16,b_ptr=*fp16,c_ptr=*fp32,h_ptr=*i32
# CONSTEXPRS: BM=16,BN=16,BK=16
import triton
import triton.language as tl


@triton.jit
def tile_ptrs(base, rows, cols, stride):
    return base + rows[:, None] * stride + cols[None, :]


@triton.jit
def scale(x, f: tl.constexpr):
    return x * f


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, h_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # CHECK-LABEL: kernel @dot_kernel
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # CHECK: call {{.*}} {callee = "tile_ptrs"} : tile<16x16xptr<f16>>
    a = tl.load(tile_ptrs(a_ptr, rm, rk, BK))
    b = tl.load(tile_ptrs(b_ptr, rk, rn, BN))
    # CHECK: [[Z:%.*]] = constant {value = 0.0} : tile<16x16xf32>
    # CHECK: dot {{%.*}}, {{%.*}}, [[Z]] : tile<16x16xf32>
    c = tl.dot(a, b)
    # one instance per constexpr value
    # CHECK: {callee = "scale"}
    # CHECK: {callee = "scale_1"}
    c = scale(c, 2.0) + scale(c, 3.0)
    # CHECK: reduce {{%.*}} {axis = 1, kind = "max"} : tile<16xf32>
    m = c.max(axis=1)
    # CHECK: reduce {{%.*}} {axis = 0, kind = "argmin"} : i32
    j = tl.argmin(m, axis=0)
    tl.store(tile_ptrs(c_ptr, rm, rn, BN), c)
    # CHECK: atomic_rmw {{.*}} {kind = "add", sem = "relaxed"} : i32
    tl.atomic_add(h_ptr, j, sem="relaxed")
    # CHECK: return

    # a constexpr argument (BK) is a constexpr in the helper, as in Triton: no runtime parameter
    # CHECK-LABEL: func @tile_ptrs(%base: ptr<f16>, %rows: tile<16xi32>, %cols: tile<16xi32>)
    # CHECK: expand_dims {{%.*}} {axis = 1} : tile<16x1xi32>
    # CHECK: broadcast {{%.*}} : tile<16x16xi32>
    # CHECK: [[P:%.*]] = addptr {{%.*}}, {{%.*}} : tile<16x16xptr<f16>>
    # CHECK: return [[P]]
    # CHECK-LABEL: func @scale(%x: tile<16x16xf32>) -> tile<16x16xf32>
    # CHECK: constant {value = 2.0} : f32
    # CHECK-LABEL: func @scale_1
    # CHECK: constant {value = 3.0} : f32

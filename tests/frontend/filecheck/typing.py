# SIGNATURE: x_ptr=*fp16,i_ptr=*i32,u_ptr=*u32,n=i32,big=i64
# CONSTEXPRS: BLOCK=64
import triton
import triton.language as tl


@triton.jit
def typing_kernel(x_ptr, i_ptr, u_ptr, n, big, BLOCK: tl.constexpr):
    # CHECK-LABEL: kernel @typing_kernel
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    # weak float scalars do not widen fp16 tiles
    # CHECK: [[TWO:%.*]] = constant {value = 2.0} : f16
    # CHECK: mul {{%.*}}, {{%.*}} : tile<64xf16>
    y = x * 2.0
    tl.store(x_ptr + offs, y)
    i = tl.load(i_ptr + offs)
    # C semantics for // and % on ints
    # CHECK: div {{%.*}}, {{%.*}} : tile<64xi32>
    # CHECK: rem {{%.*}}, {{%.*}} : tile<64xi32>
    q = i // 3 + i % 5
    # true division of ints goes through f32
    # CHECK: cast {{%.*}} : tile<64xf32>
    # CHECK: div {{%.*}}, {{%.*}} : tile<64xf32>
    r = q / 2
    # int tile + fp16 tile -> fp16
    # CHECK: cast {{%.*}} : tile<64xf16>
    # CHECK: add {{%.*}}, {{%.*}} : tile<64xf16>
    s = i + x
    tl.store(x_ptr + offs, s + r.to(tl.float16))
    # i32 scalar with i64 scalar widens to i64
    # CHECK: cast %n : i64
    # CHECK: add {{%.*}}, %big : i64
    w = n + big
    # unsigned wins over signed of the same width
    u = tl.load(u_ptr + offs)
    # CHECK: add {{%.*}}, {{%.*}} : tile<64xu32>
    tl.store(u_ptr + offs, u + i)
    tl.store(i_ptr + offs, i + w.to(tl.int32))
    # CHECK: return

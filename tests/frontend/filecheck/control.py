# SIGNATURE: x_ptr=*fp32,out_ptr=*fp32,n=i32,flag=i32
# CONSTEXPRS: BLOCK=32,USE_BIAS=False,NSTAGE=2
import triton
import triton.language as tl


@triton.jit
def control_kernel(x_ptr, out_ptr, n, flag, BLOCK: tl.constexpr, USE_BIAS: tl.constexpr, NSTAGE: tl.constexpr):
    # CHECK-LABEL: kernel @control_kernel
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    total = 0.0
    # runtime loop: acc and total are carried, the weak 0.0 becomes an f32 iter arg
    # CHECK: [[Z:%.*]] = constant {value = 0.0} : f32
    # CHECK: {{%[0-9]+}}, {{%[0-9]+}} = for {{.*}} : tile<32xf32>, f32 {
    # CHECK: yield {{%.*}}, {{%.*}}
    for start in range(0, n, BLOCK):
        v = tl.load(x_ptr + start + offs, mask=start + offs < n, other=0.0)
        acc += v
        total += tl.sum(v, axis=0)
    # constexpr if: pruned, no IR
    # CHECK-NOT: USE_BIAS
    if USE_BIAS:
        acc += 1.0
    # runtime if with a result
    # CHECK: [[C:%.*]] = cmp %flag, {{%.*}} {pred = "gt"} : i1
    # CHECK: {{%.*}} = if [[C]] : tile<32xf32> {
    if flag > 0:
        acc = acc * 2.0
    else:
        acc = acc - total
    # static_range unrolls: two muls by constants 0 and 1
    # CHECK-COUNT-2: mul {{%.*}}, {{%.*}} : tile<32xf32>
    for s in tl.static_range(NSTAGE):
        acc = acc * s
    # while loop: i is carried through condition and body
    i = 0
    # CHECK: while {{%.*}} : i32 {
    # CHECK: condition {{%.*}}, {{%.*}}
    while i < flag:
        i += 1
    tl.store(out_ptr + offs + i, acc)
    # CHECK: return

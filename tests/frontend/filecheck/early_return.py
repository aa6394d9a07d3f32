# SIGNATURE: x_ptr=*fp32,n_rows=i32
# CONSTEXPRS: BLOCK=16
import triton
import triton.language as tl


@triton.jit
def guarded_kernel(x_ptr, n_rows, BLOCK: tl.constexpr):
    # CHECK-LABEL: kernel @guarded_kernel
    row = tl.program_id(0)
    # an early return under a runtime condition: the rest of the body becomes the else branch
    # CHECK: [[C:%.*]] = cmp {{%.*}}, %n_rows {pred = "ge"} : i1
    # CHECK: if [[C]] {
    # CHECK-NEXT: yield
    # CHECK-NEXT: } {
    # CHECK: store
    # CHECK: yield
    # CHECK: return
    if row >= n_rows:
        return
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * BLOCK + offs, tl.full([BLOCK], 1.0, tl.float32))

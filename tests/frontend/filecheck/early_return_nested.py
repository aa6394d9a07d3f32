# SIGNATURE: x_ptr=*fp32,label_ptr=*i32,n=i32
# CONSTEXPRS: BLOCK=16,HAS_LABEL=True
import triton
import triton.language as tl


@triton.jit
def ignore_label(x_ptr, label_ptr, n, BLOCK: tl.constexpr, HAS_LABEL: tl.constexpr):
    # CHECK-LABEL: kernel @ignore_label
    row = tl.program_id(0)
    # a return under a runtime if inside a compile-time if: the rest of the whole body (the loop and the
    # store after it) is the else branch, not the rest of the compile-time if's body (issue 21)
    # CHECK: [[SKIP:%.*]] = cmp {{%.*}}, {{%.*}} {pred = "eq"} : i1
    # CHECK: if [[SKIP]] {
    # CHECK-NEXT: yield
    # CHECK-NEXT: } {
    if HAS_LABEL:
        if tl.load(label_ptr + row) == -100:
            return
    # a runtime loop that returns: a while carrying a done flag, stopped by it
    # CHECK: [[DONE:%.*]], {{%.*}} = while {{%.*}}, {{%.*}} : i1, i32 {
    # CHECK: xor
    # CHECK: condition
    # CHECK: } {
    # CHECK: if {{%.*}} : i1 {
    # CHECK: store
    # CHECK: yield
    for i in range(n):
        if i > row:
            return
        tl.store(x_ptr + i, 1.0)
    # after it, `if done: return` with the rest as the else branch
    # CHECK: if [[DONE]] {
    # CHECK-NEXT: yield
    # CHECK-NEXT: } {
    # CHECK: make_range
    # CHECK: store
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + row * BLOCK + offs, tl.full([BLOCK], 2.0, tl.float32))

import triton
import triton.language as tl


@triton.jit
def inline_asm_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise(
        asm="shf.l.wrap.b32 $0, $1, $1, 8;",
        constraints="=r,r",
        args=[x],
        dtype=tl.uint32,
        is_pure=True,
        pack=1,
    )
    tl.store(out_ptr + offs, y)

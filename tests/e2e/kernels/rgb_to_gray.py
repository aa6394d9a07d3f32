import triton
import triton.language as tl


@triton.jit
def rgb_to_gray_u8(img_ptr, gray_ptr, H, W, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    # img: H x W x 3 uint8, interleaved; gray: H x W uint8, rounded to nearest
    ph = tl.program_id(0)
    pw = tl.program_id(1)
    ys = ph * BLOCK_H + tl.arange(0, BLOCK_H)
    xs = pw * BLOCK_W + tl.arange(0, BLOCK_W)
    inside = (ys[:, None] < H) & (xs[None, :] < W)
    pix = (ys[:, None] * W + xs[None, :]) * 3
    r = tl.load(img_ptr + pix, mask=inside, other=0).to(tl.float32)
    g = tl.load(img_ptr + pix + 1, mask=inside, other=0).to(tl.float32)
    b = tl.load(img_ptr + pix + 2, mask=inside, other=0).to(tl.float32)
    y = 0.299 * r + 0.587 * g + 0.114 * b
    y = tl.minimum(tl.maximum(y + 0.5, 0.0), 255.0)
    tl.store(gray_ptr + ys[:, None] * W + xs[None, :], y.to(tl.uint8), mask=inside)


@triton.jit
def invert_threshold_u8(img_ptr, out_ptr, n, threshold, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    p = tl.load(img_ptr + offs, mask=m, other=0)
    inv = 255 - p
    tl.store(out_ptr + offs, tl.where(p > threshold, inv, p), mask=m)

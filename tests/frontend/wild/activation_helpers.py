import triton
import triton.language as tl


@triton.jit
def leaky_relu(x, negative_slope: tl.constexpr = 0.01):
    return tl.where(x >= 0, x, negative_slope * x)


@triton.jit
def gelu(x):
    return 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))


@triton.jit
def silu(x):
    return x * tl.sigmoid(x)


@triton.jit
def apply_activation(x, ACTIVATION: tl.constexpr):
    if ACTIVATION == "leaky_relu":
        x = leaky_relu(x, 0.2)
    elif ACTIVATION == "gelu":
        x = gelu(x)
    elif ACTIVATION == "silu":
        x = silu(x)
    return x


@triton.jit
def bias_act_kernel(x_ptr, bias_ptr, out_ptr, N, stride, ACTIVATION: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.)
    b = tl.load(bias_ptr + cols, mask=mask, other=0.)
    y = apply_activation(x + b, ACTIVATION=ACTIVATION)
    tl.store(out_ptr + row * stride + cols, y, mask=mask)

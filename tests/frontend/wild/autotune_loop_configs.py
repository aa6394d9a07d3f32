# ruff: noqa: E741
import triton
import triton.language as tl


def get_configs():
    configs = []
    for block in [32, 64, 128]:
        for warps in [2, 4, 8]:
            if block * warps <= 256:
                configs.append(triton.Config(kwargs={"BLOCK_N": block}, num_warps=warps, num_stages=2))
    return configs


@triton.jit
def _online_update(m, l, x):
    m_new = tl.maximum(m, tl.max(x, axis=0))
    l_new = l * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
    return m_new, l_new


@triton.autotune(configs=get_configs(), key=["N"], reset_to_zero=["out_ptr"])
@triton.heuristics(values={"ONE_PASS": lambda args: args["N"] <= args["BLOCK_N"]})
@triton.jit
def logsumexp_kernel(x_ptr, out_ptr, N, stride, BLOCK_N: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    if ONE_PASS:
        offs = tl.arange(0, BLOCK_N)
        x = tl.load(x_row + offs, mask=offs < N, other=-float("inf"))
        m = tl.max(x, axis=0)
        lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    else:
        m = -float("inf")
        l = 0.0
        for start in range(0, N, BLOCK_N):
            offs = start + tl.arange(0, BLOCK_N)
            m, l = _online_update(m, l, tl.load(x_row + offs, mask=offs < N, other=-float("inf")))
        lse = m + tl.log(l)
    tl.store(out_ptr + row, lse)

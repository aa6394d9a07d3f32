import triton
import triton.language as tl


def keep_small(configs, named_args, **kwargs):
    return [c for c in configs if c.kwargs["BLOCK"] <= named_args["n"]]


@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
    key=["n"],
    prune_configs_by={"perf_model": None, "top_k": 1},
)
@triton.jit
def square_topk_only(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * x, mask=offs < n)


@triton.autotune(
    configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
    key=["n"],
    prune_configs_by={"early_config_prune": keep_small},
)
@triton.jit
def square_early_prune(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, x * x, mask=offs < n)


def zero_out(nargs):
    nargs["y_ptr"].zero_()


@triton.autotune(configs=[triton.Config({"BLOCK": 32}, pre_hook=zero_out)], key=["n"])
@triton.jit
def square_pre_hook(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

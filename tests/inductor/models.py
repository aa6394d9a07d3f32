"""The small models and ops whose torch.compile output is tilec's Inductor corpus.

One table, shared by the corpus script (run on a GPU: tests/inductor/make_corpus.py), the CPU tests (the
same function recomputed by torch on the CPU is the reference) and the GPU check (bench/inductor_cold.py).
Each entry: a name, the function, a maker of its inputs (CPU tensors from a seeded generator) and the
Inductor options it is compiled with. Shapes are small and odd, so masks and several blocks are exercised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# max-autotune for the matrix products, bounded: Triton templates only (no ATen/cuBLAS choice, so the
# product is a generated kernel), no coordinate descent, no CUDA graphs (every launch goes through run()).
MM_OPTIONS = {
    "max_autotune": True,
    "max_autotune_gemm_backends": "TRITON",
    "coordinate_descent_tuning": False,
    "triton.cudagraphs": False,
}


@dataclass(frozen=True)
class Model:
    name: str
    fn: Callable
    inputs: Callable  # (torch, generator) -> tuple of CPU tensors
    options: dict = field(default_factory=dict)
    covers: str = ""  # what kind of kernel it is meant to produce
    rtol: float = 1e-4
    atol: float = 1e-5


def _randn(torch, g, *shape, dtype=None):
    return torch.randn(*shape, generator=g, dtype=dtype or torch.float32)


def _models() -> list[Model]:
    import torch
    import torch.nn.functional as F  # noqa: N812

    def rn(*shape):
        return lambda t, g: tuple(_randn(t, g, *s) for s in shape)

    def rms_norm(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-1, -2) * 0.125, dim=-1) @ v

    def mlp_gelu(x, w1, b1, w2):
        h = F.layer_norm(x, (x.shape[-1],))
        return F.gelu(F.linear(h, w1, b1)) @ w2

    def indexed_max_mean(x, i):
        rows = x[i]
        return rows.amax(-1) + rows.mean(-1)

    return [
        Model("add_relu", lambda x, y: torch.relu(x + y), rn((37, 129), (37, 129)), covers="pointwise"),
        Model(
            "gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), rn((1000,)), covers="pointwise libdevice"
        ),
        Model("gelu_erf", lambda x: F.gelu(x), rn((3, 333)), covers="pointwise libdevice.erf"),
        Model("silu_mul", lambda a, b: F.silu(a) * b, rn((64, 65), (64, 65)), covers="pointwise"),
        Model(
            "where_exp",
            lambda x: torch.where(x > 0, x.clamp(max=2.0), torch.exp(x) - 1),
            rn((513,)),
            covers="pointwise tl_math.exp",
        ),
        Model(
            "maximum_nan",
            lambda x, y: torch.maximum(x, y) + torch.minimum(x, y * 2),
            rn((301,), (301,)),
            covers="pointwise triton_helpers.maximum/minimum",
        ),
        Model("transpose_add", lambda x, y: x.t() + y, rn((65, 130), (130, 65)), covers="tiled pointwise 2D"),
        Model(
            "half_cast",
            lambda x: (x.half() * 3).float() + 1,
            rn((777,)),
            covers="pointwise fp16",
            rtol=1e-3,
            atol=1e-3,
        ),
        Model(
            "floor_div_rem",
            lambda a, b: (torch.div(a, b, rounding_mode="floor"), a % b),
            lambda t, g: (t.randint(-50, 50, (257,), generator=g), t.randint(1, 9, (257,), generator=g)),
            covers="integer div/rem helpers",
        ),
        Model(
            "bucketize",
            lambda x, b: torch.bucketize(x, b),
            lambda t, g: (_randn(t, g, 200), t.linspace(-2, 2, 17)),
            covers="bucketize_binary_search",
        ),
        Model("sum_rows", lambda x: x.sum(-1), rn((64, 1000)), covers="reduction", rtol=1e-4, atol=1e-4),
        Model("mean_cols", lambda x: x.mean(0), rn((513, 96)), covers="reduction (outer)"),
        Model("amax_long", lambda x: x.amax(-1), rn((8, 8192)), covers="looped reduction"),
        Model(
            "prod_rows",
            lambda x: x.prod(-1),
            lambda t, g: (1 + 0.01 * _randn(t, g, 16, 50),),
            covers="triton_helpers.prod",
        ),
        Model("any_rows", lambda x: (x > 1.5).any(-1), rn((40, 77)), covers="triton_helpers.any"),
        Model("argmax", lambda x: torch.argmax(x, -1), rn((33, 300)), covers="argmax (reduce with index)"),
        Model(
            "argmax_softmax",
            lambda x: torch.argmax(torch.softmax(x, -1), 0),
            rn((50, 70)),
            covers="argmax of softmax (outer)",
        ),
        Model("max_with_index", lambda x: torch.max(x, -1), rn((20, 4000)), covers="looped max with index"),
        Model("softmax", lambda x: torch.softmax(x, -1), rn((33, 257)), covers="persistent reduction"),
        Model(
            "log_softmax_long",
            lambda x: torch.log_softmax(x, -1),
            rn((4, 5000)),
            covers="looped reduction, two passes",
        ),
        Model(
            "layer_norm",
            lambda x, w, b: F.layer_norm(x, (384,), w, b),
            rn((24, 384), (384,), (384,)),
            covers="welford (persistent)",
            atol=1e-4,
        ),
        Model("rms_norm", rms_norm, rn((16, 512), (512,)), covers="RMS norm", atol=1e-4),
        Model(
            "var_mean_long",
            lambda x: torch.var_mean(x, -1),
            rn((6, 3000)),
            covers="looped welford",
            atol=1e-4,
        ),
        Model(
            "cumsum_sigmoid",
            lambda x: torch.cumsum(torch.sigmoid(x), -1),
            rn((10, 300)),
            covers="scan (cumsum)",
            atol=1e-4,
        ),
        Model(
            "cumprod",
            lambda x: torch.cumprod(x, 1),
            lambda t, g: (1 + 0.01 * _randn(t, g, 12, 100),),
            covers="scan (cumprod)",
        ),
        Model(
            "logcumsumexp",
            lambda x: torch.logcumsumexp(x, -1),
            rn((7, 200)),
            covers="scan with a generated combine function",
            atol=1e-4,
        ),
        Model(
            "gather",
            lambda x, i: torch.gather(x, 1, i),
            lambda t, g: (_randn(t, g, 30, 40), t.randint(0, 40, (30, 11), generator=g)),
            covers="indexing",
        ),
        Model(
            "index_select",
            lambda x, i: x.index_select(0, i),
            lambda t, g: (_randn(t, g, 100, 24), t.randint(0, 100, (37,), generator=g)),
            covers="indexing",
        ),
        Model(
            "embedding",
            lambda i, w: F.embedding(i, w),
            lambda t, g: (t.randint(0, 500, (4, 9), generator=g), _randn(t, g, 500, 64)),
            covers="indexing",
        ),
        Model(
            "scatter_add",
            lambda x, i, s: x.scatter_add(0, i, s),
            lambda t, g: (_randn(t, g, 50, 8), t.randint(0, 50, (120, 8), generator=g), _randn(t, g, 120, 8)),
            covers="scatter (atomic add)",
            atol=1e-4,
        ),
        Model(
            "indexed_max_mean",
            indexed_max_mean,
            lambda t, g: (_randn(t, g, 64, 100), t.randint(0, 64, (20,), generator=g)),
            covers="indexed reduction",
        ),
        Model(
            "attention",
            attention,
            rn((2, 16, 32), (2, 16, 32), (2, 16, 32)),
            options=MM_OPTIONS,
            covers="bmm templates + softmax",
            rtol=2e-2,
            atol=2e-2,
        ),
        Model(
            "mm",
            lambda a, b: a @ b,
            rn((64, 96), (96, 80)),
            options=MM_OPTIONS,
            covers="mm template",
            rtol=2e-2,
            atol=2e-2,
        ),
        Model(
            "mlp_gelu",
            mlp_gelu,
            rn((32, 128), (256, 128), (256,), (256, 64)),
            options=MM_OPTIONS,
            covers="layer norm + mm template with epilogue + GELU",
            rtol=2e-2,
            atol=2e-2,
        ),
    ]


_CACHE: list[Model] = []


def models() -> list[Model]:
    if not _CACHE:
        _CACHE.extend(_models())
    return _CACHE


def by_name(name: str) -> Model:
    for m in models():
        if m.name == name:
            return m
    raise KeyError(name)


def make_inputs(model: Model, seed: int = 0) -> tuple[Any, ...]:
    import torch

    g = torch.Generator().manual_seed(seed)
    out = model.inputs(torch, g)
    return out if isinstance(out, tuple) else (out,)

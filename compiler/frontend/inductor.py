"""Kernel modules as PyTorch Inductor writes them: their `triton_heuristics.*` decorators read as data
(never run), Inductor's runtime helpers (`triton_helpers.*`) as tilec's own Triton-language helpers, and
the launch grid Inductor's launcher would use.

The helpers below are written for tilec from the documented behaviour of Inductor's helpers (NaN-propagating
maximum/minimum, Welford's online variance, first-index argmax/argmin, bucketize by binary search, floor
division and Python remainder on integers...). They are compiled by tilec's own frontend like any other
@triton.jit function: a kernel's `triton_helpers.max2(x, 1)` is read as a call of the helper `_th_max2`.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnsupportedSyntaxError
from .literal import FoldError, LiteralEvaluator

HELPERS_MODULE = "torch._inductor.runtime.triton_helpers"
HEURISTICS_MODULE = "torch._inductor.runtime.triton_heuristics"
HELPER_PREFIX = "_th_"
KINDS = ("pointwise", "reduction", "persistent_reduction", "template", "foreach", "user_autotune")
BLOCK_PARAMS = ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK", "R1_BLOCK")

# Inductor's runtime helpers, tilec's version. Each name here is what a kernel calls as triton_helpers.<name>;
# inside this text the helpers call each other by their plain names (renamed with HELPER_PREFIX when read).
HELPERS_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def promote_to_tensor(x):
    # adding a one-element tensor turns a scalar into a tensor and keeps a tensor as it is
    return x + tl.zeros((1,), tl.int1)


@triton.jit
def is_floating(x):
    return promote_to_tensor(x).dtype.is_floating()


@triton.jit
def div_floor_integer(a, b):
    # integer division rounding toward minus infinity (Python's //); `//` truncates toward zero
    q = a // b
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def remainder_integer(a, b):
    # Python's %: the result takes the sign of the divisor
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def maximum(a, b):
    # the larger value; a NaN operand wins (x != x only for NaN, never for integers)
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def minimum(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def max2(a, dim: tl.constexpr):
    return tl.reduce(a, dim, maximum)


@triton.jit
def min2(a, dim: tl.constexpr):
    return tl.reduce(a, dim, minimum)


@triton.jit
def _prod_combine(a, b):
    return a * b


@triton.jit
def prod(input, axis: tl.constexpr):
    return tl.reduce(input, axis, _prod_combine)


@triton.jit
def _any_combine(a, b):
    return a | b


@triton.jit
def any(a, dim: tl.constexpr):
    return tl.reduce(a, dim, _any_combine)


@triton.jit
def maximum_with_index(a_value, a_index, b_value, b_index):
    # the larger value and its index; NaN is the largest; on a tie, the smaller index
    a_nan = a_value != a_value
    b_nan = b_value != b_value
    take_a = (a_value > b_value) | (a_nan & ~b_nan)
    same = (a_value == b_value) | (a_nan & b_nan)
    take_a = take_a | (same & (a_index < b_index))
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)


@triton.jit
def minimum_with_index(a_value, a_index, b_value, b_index):
    a_nan = a_value != a_value
    b_nan = b_value != b_value
    take_a = (a_value < b_value) | (a_nan & ~b_nan)
    same = (a_value == b_value) | (a_nan & b_nan)
    take_a = take_a | (same & (a_index < b_index))
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)


@triton.jit
def max_with_index(value, index, dim: tl.constexpr):
    return tl.reduce((value, index), dim, maximum_with_index)


@triton.jit
def min_with_index(value, index, dim: tl.constexpr):
    return tl.reduce((value, index), dim, minimum_with_index)


@triton.jit
def exp(x, use_fast_math: tl.constexpr):
    if use_fast_math:
        return tl.math.exp(x)
    else:
        return tl.extra.libdevice.exp(x)


@triton.jit
def online_softmax_reduce(lhs_max, lhs_sum, dim: tl.constexpr, use_fast_math: tl.constexpr):
    # (running maxima, sums of exp(x - running max)) -> (max, sum of exp(x - max)) along dim
    out_max = max2(lhs_max, dim)
    kept = tl.expand_dims(out_max, dim)
    shift = tl.where(kept == float("-inf"), 0, lhs_max - kept)
    return out_max, tl.sum(lhs_sum * exp(shift, use_fast_math), dim)


@triton.jit
def online_softmax_combine(lhs_max, lhs_sum, rhs_max, use_fast_math: tl.constexpr):
    # fold one new value (rhs, whose own sum is 1) into a running (max, sum)
    out_max = maximum(lhs_max, rhs_max)
    all_inf = out_max == float("-inf")
    lhs_scale = tl.where(all_inf, 1.0, exp(lhs_max - out_max, use_fast_math))
    rhs_scale = tl.where(all_inf, 1.0, exp(rhs_max - out_max, use_fast_math))
    return out_max, lhs_sum * lhs_scale + rhs_scale


@triton.jit
def welford_reduce(value, mean, m2, weight, first_iteration):
    # one more sample per lane into (mean, sum of squared deviations, count)
    if first_iteration:
        new_weight = tl.full(weight.shape, 1, weight.dtype)
        new_mean = value
        new_m2 = tl.zeros_like(m2)
    else:
        delta = value - mean
        new_weight = weight + 1
        new_mean = mean + delta / new_weight
        new_m2 = m2 + delta * (value - new_mean)
    return new_mean, new_m2, new_weight


@triton.jit
def welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    # two partial (mean, M2, count) summaries into one (Chan et al.); empty partials stay neutral
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_share = tl.where(new_weight == 0.0, 0.0, weight_2 / new_weight)
    return mean_1 + delta * w2_share, m2_1 + m2_2 + delta * delta * weight_1 * w2_share, new_weight


@triton.jit
def welford(mean, m2, weight, dim: tl.constexpr):
    return tl.reduce((mean, m2, weight), dim, welford_combine)


@triton.jit
def device_assert_then(cond, msg, r):
    tl.device_assert(cond, msg)
    return r


@triton.jit
def bucketize_binary_search(values, boundaries_ptr, BOUNDARIES_SIZE: tl.constexpr,
                            BOUNDARIES_UNDERLYING_NUMEL: tl.constexpr, BOUNDARIES_STRIDE: tl.constexpr,
                            boundary_indices, indexing_dtype: tl.constexpr, right: tl.constexpr,
                            sorter_ptr: tl.constexpr, SORTER_STRIDE: tl.constexpr, sorter_indices):
    # for each value, the number of boundaries below it (right=False: strictly below; right=True: at or
    # below), by binary search over BOUNDARIES_SIZE sorted boundaries (through `sorter` when given)
    low = tl.zeros(values.shape, dtype=indexing_dtype)
    high = tl.full(values.shape, BOUNDARIES_SIZE, dtype=indexing_dtype)
    span = BOUNDARIES_SIZE + 1
    while span > 1:
        mid = (low + high) // 2
        valid = ((mid * BOUNDARIES_STRIDE + boundary_indices) < BOUNDARIES_UNDERLYING_NUMEL) & (mid < BOUNDARIES_SIZE)
        if sorter_ptr is None:
            pos = mid
        else:
            pos = tl.load(sorter_ptr + sorter_indices + SORTER_STRIDE * mid, mask=valid, other=0)
        bound = tl.load(boundaries_ptr + boundary_indices + BOUNDARIES_STRIDE * pos, mask=valid, other=0)
        if right:
            above = values >= bound
        else:
            above = values > bound
        low = tl.where(above & valid, mid + 1, low)
        high = tl.where(above, high, mid)
        span = (span + 1) // 2
    return low
"""

HELPERS_VERSION = hashlib.sha256(HELPERS_SOURCE.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class InductorSpec:
    """What an Inductor decorator says, as data: the kind of kernel, the size hints, the signature and
    constants of triton_meta, Inductor's metadata (grid type, kernel name...) and any configs it lists."""

    kind: str
    size_hints: dict[str, int] = field(default_factory=dict)
    reduction_hint: str | None = None
    tile_hint: str | None = None
    signature: dict[str, str] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)
    divisible_by_16: tuple[str, ...] = ()
    inductor_meta: dict[str, Any] = field(default_factory=dict)
    configs: list[dict] = field(default_factory=list)  # listed ones: template, foreach, user_autotune

    @property
    def grid_type(self) -> str:
        return str(self.inductor_meta.get("grid_type") or "Grid1D")

    @property
    def extra_launcher_args(self) -> list[str]:
        return [str(a) for a in self.inductor_meta.get("extra_launcher_args") or ()]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "size_hints": dict(self.size_hints), "reduction_hint": self.reduction_hint,
                "grid_type": self.grid_type, "extra_launcher_args": self.extra_launcher_args,
                "signature": dict(self.signature)}  # fmt: skip


# ---- decorators as data ------------------------------------------------------------------------


def _data_call(name: str, args: list, kwargs: dict) -> Any:
    """Calls an Inductor decorator may hold, as data: DeviceProperties(...) -> a dict, set() -> a set,
    triton.Config(...) -> a config dict."""
    last = name.rsplit(".", 1)[-1]
    if last == "DeviceProperties" and not args:
        return dict(kwargs)
    if last == "set" and len(args) <= 1 and not kwargs:
        return set(args[0]) if args else set()
    if name == "triton.Config" or last == "Config":
        kw = args[0] if args else kwargs.pop("kwargs", {})
        return {
            "kwargs": dict(kw),
            "num_warps": kwargs.get("num_warps"),
            "num_stages": kwargs.get("num_stages"),
        }
    return NotImplemented


def _hint_value(name: str) -> Any:
    """`ReductionHint.INNER`, `TileHint.SQUARE`... -> "INNER", "SQUARE"."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[-2] in ("ReductionHint", "TileHint", "AutotuneHint"):
        return parts[-1]
    return NotImplemented


def read_decorator(d: ast.expr, kind: str, dotted, info) -> InductorSpec:
    """One `@triton_heuristics.<kind>(...)` decorator, read with a literal evaluator (nothing is run)."""
    if kind not in KINDS:
        raise info.error(d, f"Inductor's @triton_heuristics.{kind} kernels are not supported (supported: "
                         f"{', '.join(KINDS)})", UnsupportedSyntaxError)  # fmt: skip
    if not isinstance(d, ast.Call):
        raise info.error(d, f"@triton_heuristics.{kind} must be called with its data")

    def name_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name) and node.id in ("set", "__file__"):
            return node.id
        return dotted(node) or _plain(node)

    ev = LiteralEvaluator({"__file__": None, "True": True, "False": False, "None": None}, _data_call, name_of,
                          _hint_value)  # fmt: skip
    d = _SetsAsCalls().visit(_copy(d))
    data: dict[str, Any] = {}
    try:
        for k in d.keywords:
            if k.arg is None:
                raise info.error(
                    k.value, "**kwargs in an Inductor decorator is not supported", UnsupportedSyntaxError
                )
            data[k.arg] = ev.eval(k.value)
        positional = {"pointwise": ("size_hints", "triton_meta"), "reduction": ("size_hints", "reduction_hint"),
                      "persistent_reduction": ("size_hints", "reduction_hint"),
                      "template": ("num_stages", "num_warps", "triton_meta"), "foreach": ("triton_meta",),
                      "user_autotune": ("configs", "triton_meta")}[kind]  # fmt: skip
        for name, node in zip(positional, d.args, strict=False):
            data.setdefault(name, ev.eval(node))
    except FoldError as exc:
        raise info.error(d, f"cannot read the @triton_heuristics.{kind} data: {exc}") from None
    return _spec(kind, data, d, info)


def _spec(kind: str, data: dict, d: ast.expr, info) -> InductorSpec:
    meta = data.get("triton_meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("signature"), dict):
        raise info.error(d, f"@triton_heuristics.{kind} needs triton_meta={{'signature': {{...}}, ...}}")
    sig_items = list(meta["signature"].items())
    signature = {str(n): str(t) for n, t in sig_items if t != "constexpr"}
    names = [str(n) for n, _ in sig_items]
    divisible: list[str] = []
    for cfg in meta.get("configs") or []:
        for key, attrs in cfg.items() if isinstance(cfg, dict) else ():
            idx = key[0] if isinstance(key, tuple) and key else key
            if (
                isinstance(idx, int)
                and 0 <= idx < len(names)
                and ["tt.divisibility", 16] in list(attrs or [])
            ):
                divisible.append(names[idx])
    size_hints = data.get("size_hints") or {}
    if isinstance(size_hints, (list, tuple)):  # older Inductor: a list, x first... innermost last
        size_hints = dict(zip(("x", "r0_") if kind in ("reduction", "persistent_reduction") else ("x", "y", "z"),
                              size_hints, strict=False))  # fmt: skip
    if not isinstance(size_hints, dict) or not all(isinstance(v, int) for v in size_hints.values()):
        raise info.error(d, "size_hints must be a dict of ints")
    inductor_meta = data.get("inductor_meta") or {}
    configs: list[dict] = []
    if kind == "template":
        configs = [{"kwargs": {}, "num_warps": data.get("num_warps"), "num_stages": data.get("num_stages")}]
    elif kind == "foreach":
        configs = [{"kwargs": {}, "num_warps": data.get("num_warps") or 8, "num_stages": 1}]
    elif kind == "user_autotune":
        for c in data.get("configs") or []:
            if not isinstance(c, dict):
                raise info.error(d, "user_autotune configs must be dicts or triton.Config(...)")
            kw = c.get(
                "kwargs", {k: v for k, v in c.items() if k not in ("num_warps", "num_stages", "num_ctas")}
            )
            configs.append(
                {"kwargs": dict(kw), "num_warps": c.get("num_warps"), "num_stages": c.get("num_stages")}
            )
    return InductorSpec(
        kind=kind,
        size_hints={str(k): int(v) for k, v in size_hints.items()},
        reduction_hint=data.get("reduction_hint") if isinstance(data.get("reduction_hint"), str) else None,
        tile_hint=data.get("tile_hint") if isinstance(data.get("tile_hint"), str) else None,
        signature=signature,
        constants={str(k): v for k, v in (meta.get("constants") or {}).items()},
        divisible_by_16=tuple(dict.fromkeys(divisible)),
        inductor_meta=dict(inductor_meta) if isinstance(inductor_meta, dict) else {},
        configs=configs,
    )


class _SetsAsCalls(ast.NodeTransformer):
    """`{a, b}` -> `set([a, b])`, which the data evaluator reads (it has no set literals)."""

    def visit_Set(self, node: ast.Set) -> ast.AST:
        self.generic_visit(node)
        call = ast.Call(func=ast.Name(id="set", ctx=ast.Load()), args=[ast.List(elts=node.elts, ctx=ast.Load())],
                        keywords=[])  # fmt: skip
        return ast.copy_location(call, node)


def _copy(node: ast.expr) -> ast.expr:
    import copy

    return copy.deepcopy(node)


def _plain(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


# ---- the helpers as @triton.jit functions ---------------------------------------------------------


def _helper_defs() -> dict[str, ast.FunctionDef]:
    tree = ast.parse(HELPERS_SOURCE)
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    renamer = _Renamer({name: HELPER_PREFIX + name for name in defs})
    out = {}
    for name, fn in defs.items():
        fn = renamer.visit(fn)
        fn.name = HELPER_PREFIX + name
        out[fn.name] = fn
    return out


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.names:
            return ast.copy_location(ast.Name(id=self.names[node.id], ctx=node.ctx), node)
        return node


class _HelperCalls(ast.NodeTransformer):
    """`triton_helpers.<name>` (through the module's import aliases) -> the Name of tilec's helper."""

    def __init__(self, dotted, known: dict[str, ast.FunctionDef]):
        self.dotted = dotted
        self.known = known
        self.unknown: list[ast.Attribute] = []

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        name = self.dotted(node)
        if (
            name is not None
            and name.startswith(HELPERS_MODULE + ".")
            and name.count(".") == HELPERS_MODULE.count(".") + 1
        ):
            short = name.rsplit(".", 1)[1]
            if short in ("libdevice", "math"):
                return node
            target = HELPER_PREFIX + short
            if target not in self.known:
                self.unknown.append(node)
                return node
            return ast.copy_location(ast.Name(id=target, ctx=ast.Load()), node)
        return self.generic_visit(node)


def install_helpers(mod, info) -> None:
    """Make `triton_helpers.<name>` calls in the module's jit functions calls of tilec's helpers (added to
    the module's jit functions). A helper tilec does not have is a located error."""
    if mod.aliases.setdefault("tl", "triton.language") != "triton.language":
        raise info.error(None, "Inductor's helpers need `tl` to name triton.language in this module")
    helpers = _helper_defs()
    for name in helpers:
        if name in mod.jit_functions:
            raise info.error(
                mod.jit_functions[name], f"'{name}' is a name tilec reserves for Inductor's helpers"
            )
    rewriter = _HelperCalls(mod.dotted, helpers)
    for name, fn in list(mod.jit_functions.items()):
        mod.jit_functions[name] = rewriter.visit(fn)
    if rewriter.unknown:
        node = rewriter.unknown[0]
        known = ", ".join(
            sorted(n[len(HELPER_PREFIX) :] for n in helpers if not n[len(HELPER_PREFIX) :].startswith("_"))
        )
        raise info.error(node, f"triton_helpers.{node.attr} is not one of the Inductor helpers tilec has ({known})",
                         UnsupportedSyntaxError)  # fmt: skip
    mod.jit_functions.update(helpers)


# ---- the launch grid -------------------------------------------------------------------------------


def _cdiv(a: int, b: int | None) -> int:
    return a if not b else -(-a // b)


def launch_grid(spec: InductorSpec, kwargs: dict[str, Any], values: dict[str, Any]) -> tuple[int, int, int]:
    """The grid Inductor's launcher uses for a config (`kwargs`: XBLOCK...) and the launch's values by
    parameter name (the numels, and the extra launcher arguments of a fixed grid)."""
    gt = spec.grid_type

    def numel(name: str) -> int:
        if name in values:
            return int(values[name])
        raise ValueError(f"the {gt} grid needs '{name}', which this launch does not give")

    if gt == "Grid1D":
        return _cdiv(numel("xnumel"), kwargs.get("XBLOCK")), 1, 1
    if gt == "Grid2D":
        return _cdiv(numel("xnumel"), kwargs.get("XBLOCK")), _cdiv(numel("ynumel"), kwargs.get("YBLOCK")), 1
    if gt == "Grid3D":
        return (_cdiv(numel("xnumel"), kwargs.get("XBLOCK")), _cdiv(numel("ynumel"), kwargs.get("YBLOCK")),
                _cdiv(numel("znumel"), kwargs.get("ZBLOCK")))  # fmt: skip
    if gt == "FixedGrid":
        fixed = list(spec.inductor_meta.get("fixed_grid") or ())
        if len(fixed) != 3:
            raise ValueError("a FixedGrid kernel needs three fixed_grid entries")
        return tuple(int(values[g]) if isinstance(g, str) and g in values else _int(g) for g in fixed)  # type: ignore[return-value]
    if gt == "SplitScanGrid":
        return _cdiv(numel("r0_numel"), kwargs.get("R0_BLOCK")), numel("xnumel"), 1
    raise ValueError(f"Inductor grid type {gt!r} is not supported by tilec")


def _int(v: Any) -> int:
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    raise ValueError(f"grid entry {v!r} is an expression tilec does not evaluate")

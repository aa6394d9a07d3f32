"""The config space of a tune and what prunes it.

A config is a plain dict `{"kwargs": {...}, "num_warps": w, "num_stages": s}` (the service's normalised
form). Before compiling, a config the target cannot launch (threads per block) is pruned; after the
cuda backend has planned shared memory, one that needs more than the arch gives a block; after ptxas,
one whose registers cannot be resident or that spills while another config does not.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..artifact import parse_target

MAX_THREADS_PER_BLOCK = 1024
REGISTERS_PER_SM = 65536
# the most shared memory one block may use (opt-in), by compute capability; 48 KiB below sm_70
SHARED_PER_BLOCK = {70: 98304, 72: 98304, 75: 65536, 80: 166912, 86: 101376, 87: 166912, 89: 101376,
                    90: 232448, 100: 232448, 101: 232448, 120: 101376}  # fmt: skip


def normalise(kwargs: Mapping[str, Any], num_warps: int | None = None, num_stages: int | None = None) -> dict:
    return {"kwargs": dict(sorted(kwargs.items())), "num_warps": num_warps or 4, "num_stages": num_stages or 3}


def config_hash(config: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def from_list(configs: Iterable[Any]) -> list[dict]:
    """Configs given as objects with kwargs/num_warps/num_stages attributes or as dicts; duplicates dropped."""
    out, seen = [], set()
    for c in configs:
        get = c.get if isinstance(c, Mapping) else lambda k, c=c: getattr(c, k, None)
        config = normalise(get("kwargs") or {}, get("num_warps"), get("num_stages"))
        h = config_hash(config)
        if h not in seen:
            seen.add(h)
            out.append(config)
    return out


def from_grid(kwargs: Mapping[str, Sequence[Any]], num_warps: Sequence[int] = (4,), num_stages: Sequence[int] = (3,),
              limit: int = 4096) -> list[dict]:
    """Every combination of the values per parameter; ValueError past `limit` configs."""
    names = sorted(kwargs)
    count = len(num_warps) * len(num_stages)
    for n in names:
        count *= len(kwargs[n])
    if count > limit:
        raise ValueError(f"the config grid has {count} combinations; the limit is {limit}")
    combos = itertools.product(*(kwargs[n] for n in names), num_warps, num_stages)
    return from_list({"kwargs": dict(zip(names, c[:-2], strict=True)), "num_warps": c[-2], "num_stages": c[-1]}
                     for c in combos)


def prune_before_compile(config: Mapping[str, Any], target: str) -> str | None:
    """Why the target cannot run this config at all (None: it may)."""
    kind, _ = parse_target(target)
    if kind != "cuda":
        return None
    warps = config["num_warps"]
    if warps * 32 > MAX_THREADS_PER_BLOCK:
        return f"{warps} warps are {warps * 32} threads per block; the most is {MAX_THREADS_PER_BLOCK}"
    if warps & (warps - 1):
        return f"num_warps must be a power of two, not {warps}"
    return None


def shared_limit(target: str) -> int | None:
    kind, sm = parse_target(target)
    if kind != "cuda" or sm is None:
        return None
    return SHARED_PER_BLOCK.get(sm, SHARED_PER_BLOCK[max(k for k in SHARED_PER_BLOCK if k <= sm)] if sm >= 70 else 49152)


def prune_shared(metadata: Mapping[str, Any], target: str) -> str | None:
    """Shared memory the backend planned against the arch's per-block limit (known before LLVM and ptxas)."""
    limit = shared_limit(target)
    need = int(metadata.get("shared_bytes") or 0)
    if limit is not None and need > limit:
        return f"needs {need} bytes of shared memory per block; {target} gives at most {limit}"
    return None


def prune_after_compile(metadata: Mapping[str, Any]) -> str | None:
    """Registers past what one block may hold (the launch would fail)."""
    regs = int(metadata.get("registers") or 0)
    threads = int(metadata.get("threads_per_block") or 0)
    if regs and threads and regs * threads > REGISTERS_PER_SM:
        return f"{regs} registers x {threads} threads exceed the {REGISTERS_PER_SM} registers of an SM"
    return None


def spills(metadata: Mapping[str, Any]) -> int:
    return int(metadata.get("spill_stores") or 0) + int(metadata.get("spill_loads") or 0)


# ---- Inductor's kernels --------------------------------------------------------------------------


def _pow2_at_least(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def _capped(block: int, size: int) -> int:
    """A block no larger than the power of two that covers `size` (at least 1)."""
    return max(1, min(block, _pow2_at_least(size)))


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def inductor_configs(kind: str, size_hints: Mapping[str, int], block_params: Sequence[str],
                     reduction_hint: str | None = None, tile_hint: str | None = None,
                     listed: Sequence[Mapping[str, Any]] = ()) -> list[dict]:  # fmt: skip
    """tilec's own config space for a kernel Inductor generated, from the decorator's data: the kind
    (pointwise, reduction, persistent_reduction, template, foreach, user_autotune), the size hints
    ({'x': 8192, 'r0_': 1024}, powers of two), the block parameters the kernel takes (XBLOCK, YBLOCK,
    ZBLOCK, R0_BLOCK) and Inductor's reduction/tile hint. The first config is the default (what a compile
    without a chosen config uses); the rest are what a tune also times.

    Modelled on what Inductor's heuristics do, not a copy of them: pointwise kernels take up to 1024
    elements per block (2D tiles 32x32 / 64x64 / 16x256 for tiled ones); looped reductions take one row
    and a long R0_BLOCK for inner reductions, a wide XBLOCK and a short R0_BLOCK for outer ones, and both
    when the hint says nothing; a persistent reduction holds its whole row (R0_BLOCK is fixed in its body),
    so only XBLOCK varies, up to 4096 elements per block. Warps grow with the block, one per 256 elements,
    between 1 and 8 (at least 2 for a looped reduction). A template or a user-autotuned kernel
    keeps the configs it lists. ValueError for a block parameter this space does not assign."""
    if kind in ("template", "foreach", "user_autotune"):
        return from_list(listed) if listed else [normalise({}, 4, 1)]
    unknown = [p for p in block_params if p not in ("XBLOCK", "YBLOCK", "ZBLOCK", "R0_BLOCK")]
    if unknown:
        raise ValueError(f"no tilec config space for block parameters {unknown}")
    x, y, z = (int(size_hints.get(k, 1)) for k in ("x", "y", "z"))
    r = int(size_hints.get("r0_", size_hints.get("r", 1)))
    configs: list[dict] = []

    def add(warps_per: int, lo: int = 1, **blocks: int) -> None:
        kwargs = {k: v for k, v in blocks.items() if k in block_params}
        elements = 1
        for v in blocks.values():
            elements *= v
        configs.append(normalise(kwargs, _clamp(elements // warps_per, lo, 8), 1))

    if kind == "pointwise":
        if "ZBLOCK" in block_params:
            for zb, yb, xb in ((8, 8, 8), (4, 16, 16), (16, 4, 16)):
                add(256, ZBLOCK=_capped(zb, z), YBLOCK=_capped(yb, y), XBLOCK=_capped(xb, x))
        elif "YBLOCK" in block_params:
            tiles = ((32, 32), (64, 64)) if tile_hint == "SQUARE" else ((32, 32), (64, 64), (16, 256))
            for yb, xb in tiles:
                add(256, YBLOCK=_capped(yb, y), XBLOCK=_capped(xb, x))
        else:
            for xb in (1024, 256):
                add(256, XBLOCK=_capped(xb, x))
    elif kind == "reduction":
        inner = [(1, 2048), (8, 512)]
        outer = [(64, 8), (8, 512)] if reduction_hint != "OUTER_TINY" else [(128, 2), (64, 8)]
        pairs = {"INNER": inner, "OUTER": outer, "OUTER_TINY": outer}.get(reduction_hint or "", inner + outer)
        for xb, rb in pairs:
            add(256, 2, XBLOCK=_capped(xb, x), R0_BLOCK=_capped(rb, r))
    elif kind == "persistent_reduction":
        rb = _pow2_at_least(r)
        choices = (1, 8, 32, 128) if reduction_hint in (None, "INNER", "DEFAULT") else (128, 32, 8, 1)
        fits = [xb for xb in choices if xb == 1 or xb * rb <= 4096]
        for xb in fits[:3]:
            add(256, 1, XBLOCK=_capped(xb, x), R0_BLOCK=rb)
    else:
        raise ValueError(f"no tilec config space for Inductor's {kind!r} kernels")
    return from_list(configs)

"""tl.rand, tl.randn, tl.randint (and their 4x forms) as integer IR: the Philox-4x32 counter-based generator
(Salmon et al., SC'11), keyed by the seed and counting with the offsets, so a value depends only on
(seed, offset) as in Triton. Uniform floats take 31 bits; normals come from Box-Muller on two words.
"""

from __future__ import annotations

import ast
from typing import Any

from ..ir.types import ScalarType
from .library import LIB, cx_int, tensor
from .semantic import Semantic, Tensor, describe

U32, U64, I32, I64, F32 = ScalarType("u32"), ScalarType("u64"), ScalarType("i32"), ScalarType("i64"), ScalarType("f32")
MUL_A, MUL_B = 0xD2511F53, 0xCD9E8D57  # round multipliers
WEYL_A, WEYL_B = 0x9E3779B9, 0xBB67AE85  # key increments (golden ratio, sqrt(3) - 1)
DEFAULT_ROUNDS = 10
UNIFORM_SCALE = 4.6566127342e-10  # about 2**-31
UNIFORM_SCALE_64 = 1.0842020432385337e-19  # about 2**-63


def _bin(sem: Semantic, op: ast.operator, a: Any, b: Any) -> Tensor:
    return sem.binop(op, a, b)


def _mulhi_lo(sem: Semantic, m: int, x: Tensor) -> tuple[Tensor, Tensor]:
    """(high, low) 32-bit halves of the 64-bit product m * x for a u32 tile x."""
    wide = _bin(sem, ast.Mult(), sem.cast(x, U64), m)
    hi = sem.cast(_bin(sem, ast.RShift(), wide, 32), U32)
    return hi, sem.cast(wide, U32)


def _counter(sem: Semantic, offset: Any) -> Tensor:
    off = tensor(sem, offset, "the offset of tl.rand/tl.randint")
    if not isinstance(off.elem, ScalarType) or not off.elem.is_int:
        raise sem.error(f"random offsets must be integers, got {describe(off)}")
    if off.elem.bits > 32:
        raise sem.error(f"random offsets must be 32-bit integers, got {describe(off)} (cast them with .to(tl.int32))")
    if off.elem.bits < 32:
        off = sem.cast(off, I32 if off.elem.is_signed or off.elem.is_bool else U32)
    return sem.bitcast(off, U32) if off.elem != U32 else off


def _key(sem: Semantic, seed: Any) -> tuple[Tensor, Tensor]:
    s = tensor(sem, seed, "the seed of tl.rand/tl.randint")
    if s.shape or not isinstance(s.elem, ScalarType) or not s.elem.is_int:
        raise sem.error(f"the seed must be an integer scalar, got {describe(s)}")
    wide = sem.cast(s, U64)
    return sem.cast(wide, U32), sem.cast(_bin(sem, ast.RShift(), wide, 32), U32)


def philox4x32(sem: Semantic, seed: Any, offset: Any, n_rounds: Any = DEFAULT_ROUNDS,
               more: tuple[Any, Any, Any] = (0, 0, 0)) -> tuple[Tensor, ...]:  # fmt: skip
    """Philox-4x32 of counter (offset, *more) under key `seed`; `more` are counter words 1..3 (ints or
    integer tiles, broadcast with the offset)."""
    rounds = cx_int(sem, n_rounds, "n_rounds")
    if not 1 <= rounds <= 64:
        raise sem.error(f"n_rounds must be between 1 and 64, got {rounds}")
    c0, c1, c2, c3 = (_counter(sem, c) for c in (offset, *more))
    c0, c1, c2, c3 = sem.broadcast_all(c0, c1, c2, c3)
    k0, k1 = _key(sem, seed)
    for _ in range(rounds):
        hi_a, lo_a = _mulhi_lo(sem, MUL_A, c0)
        hi_b, lo_b = _mulhi_lo(sem, MUL_B, c2)
        c0, c1, c2, c3 = (_bin(sem, ast.BitXor(), _bin(sem, ast.BitXor(), hi_b, c1), k0), lo_b,
                          _bin(sem, ast.BitXor(), _bin(sem, ast.BitXor(), hi_a, c3), k1), lo_a)
        k0, k1 = _bin(sem, ast.Add(), k0, WEYL_A), _bin(sem, ast.Add(), k1, WEYL_B)
    return c0, c1, c2, c3


def to_uniform(sem: Semantic, bits: Tensor) -> Tensor:
    """u32 random bits -> f32 in [0, 1): fold the sign into 31 bits and scale."""
    s = sem.bitcast(bits, I32)
    folded = sem.where(sem.compare(ast.Lt(), s, 0), _bin(sem, ast.Sub(), sem.unary(ast.USub(), s), 1), s)
    return _bin(sem, ast.Mult(), folded, UNIFORM_SCALE)


def _normal_pair(sem: Semantic, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Box-Muller: two uniform words -> two standard normals."""
    return _pair_uniform_to_normal(sem, to_uniform(sem, a), to_uniform(sem, b))


def _pair_uniform_to_normal(sem: Semantic, u1: Any, u2: Any) -> tuple[Tensor, Tensor]:
    """tl.pair_uniform_to_normal: Box-Muller on two uniform floats (the first kept at 1e-7 or more)."""
    u1 = sem.minmax(True, tensor(sem, u1, "tl.pair_uniform_to_normal"), 1.0e-7)
    theta = _bin(sem, ast.Mult(), tensor(sem, u2, "tl.pair_uniform_to_normal"), 6.283185307179586)
    r = LIB["sqrt"](sem, _bin(sem, ast.Mult(), LIB["log"](sem, u1), -2.0))
    return _bin(sem, ast.Mult(), r, LIB["cos"](sem, theta)), _bin(sem, ast.Mult(), r, LIB["sin"](sem, theta))


def _randint(sem: Semantic, seed: Any, offset: Any, n_rounds: Any = DEFAULT_ROUNDS) -> Tensor:
    return philox4x32(sem, seed, offset, n_rounds)[0]


def _randint4x(sem: Semantic, seed: Any, offset: Any, n_rounds: Any = DEFAULT_ROUNDS) -> tuple[Tensor, ...]:
    return philox4x32(sem, seed, offset, n_rounds)


def _rand(sem: Semantic, seed: Any, offset: Any, n_rounds: Any = DEFAULT_ROUNDS) -> Tensor:
    return to_uniform(sem, _randint(sem, seed, offset, n_rounds))


def _rand4x(sem: Semantic, seed: Any, offset: Any, n_rounds: Any = DEFAULT_ROUNDS) -> tuple[Tensor, ...]:
    return tuple(to_uniform(sem, w) for w in philox4x32(sem, seed, offset, n_rounds))


def _randn(sem: Semantic, seed: Any, offset: Any, n_rounds: Any = DEFAULT_ROUNDS) -> Tensor:
    w = philox4x32(sem, seed, offset, n_rounds)
    return _normal_pair(sem, w[0], w[1])[0]


def _randn4x(sem: Semantic, seed: Any, offset: Any, n_rounds: Any = DEFAULT_ROUNDS) -> tuple[Tensor, ...]:
    w = philox4x32(sem, seed, offset, n_rounds)
    return (*_normal_pair(sem, w[0], w[1]), *_normal_pair(sem, w[2], w[3]))


def _philox(sem: Semantic, seed: Any, c0: Any, c1: Any = 0, c2: Any = 0, c3: Any = 0,
            n_rounds: Any = DEFAULT_ROUNDS) -> tuple[Tensor, ...]:
    return philox4x32(sem, seed, c0, n_rounds, (c1, c2, c3))


def _uint_to_uniform_float(sem: Semantic, x: Any) -> Tensor:
    """32-bit words as to_uniform; 64-bit words folded into 63 bits and scaled by about 2**-63, as Triton."""
    t = tensor(sem, x, "tl.uint_to_uniform_float")
    if t.elem in (U64, I64):
        s = sem.bitcast(t, I64) if t.elem == U64 else t
        folded = sem.where(sem.compare(ast.Lt(), s, 0), _bin(sem, ast.Sub(), sem.unary(ast.USub(), s), 1), s)
        return _bin(sem, ast.Mult(), folded, UNIFORM_SCALE_64)
    if t.elem not in (U32, I32):
        raise sem.error(f"tl.uint_to_uniform_float takes 32- or 64-bit integers, got {describe(t)}")
    return to_uniform(sem, sem.bitcast(t, U32) if t.elem == I32 else t)


LIB.update({"randint": _randint, "randint4x": _randint4x, "rand": _rand, "rand4x": _rand4x, "randn": _randn,
            "randn4x": _randn4x, "philox": _philox, "uint_to_uniform_float": _uint_to_uniform_float,
            "pair_uniform_to_normal": _pair_uniform_to_normal})

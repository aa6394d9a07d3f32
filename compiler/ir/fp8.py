"""The two fp8 formats of the tile IR (Triton's fp8e4nv and fp8e5) and their exact numerics on NumPy.

f8e4nv is e4m3 "fn" (bias 7, no infinities, NaN only at 0x7f/0xff, max 448); f8e5 is e5m2 (IEEE-like,
bias 15, max 57344). Converting to fp8 rounds to nearest even and saturates: a finite value or an
infinity beyond the largest finite value becomes that value with its sign (what PTX's
`cvt.rn.satfinite` does, which Triton uses on sm_89+); NaN becomes the canonical NaN 0x7f. A constant of an fp8 type rounds the same way, except that an
infinity stays one in f8e5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class Fp8Format:
    exp_bits: int
    man_bits: int
    bias: int
    max_finite: float
    has_inf: bool

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def last_finite_code(self) -> int:
        """The code of the largest finite value (positive codes grow with their values)."""
        return 0x7E if not self.has_inf else 0x7B


NAN_CODE = 0x7F
FORMATS = {
    "f8e4nv": Fp8Format(exp_bits=4, man_bits=3, bias=7, max_finite=448.0, has_inf=False),
    "f8e5": Fp8Format(exp_bits=5, man_bits=2, bias=15, max_finite=57344.0, has_inf=True),
}


def decode_code(code: int, fmt: Fp8Format) -> float:
    """The value of one fp8 bit pattern."""
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> fmt.man_bits) & ((1 << fmt.exp_bits) - 1), code & ((1 << fmt.man_bits) - 1)
    top = (1 << fmt.exp_bits) - 1
    if fmt.has_inf and e == top:
        return sign * float("inf") if m == 0 else float("nan")
    if not fmt.has_inf and (code & 0x7F) == 0x7F:
        return float("nan")
    if e == 0:
        return sign * m * 2.0 ** (1 - fmt.bias - fmt.man_bits)
    return sign * (1 + m / (1 << fmt.man_bits)) * 2.0 ** (e - fmt.bias)


def round_to(x: np.ndarray, name: str, *, keep_inf: bool = False) -> np.ndarray:
    """float values rounded (nearest even, saturating) to fp8 `name`, as float32; NaN stays NaN.

    `keep_inf` keeps infinities where the format has them (a value already of the type: constants, loads).
    """
    import numpy as np

    fmt = FORMATS[name]
    x = np.asarray(x, np.float64)
    a = np.minimum(np.abs(np.nan_to_num(x, nan=0.0, posinf=np.inf, neginf=-np.inf)), fmt.max_finite)
    _, exp = np.frexp(np.maximum(a, fmt.min_normal))  # a = f * 2^exp with f in [0.5, 1)
    quantum = np.ldexp(1.0, exp - 1 - fmt.man_bits)
    r = np.rint(a / quantum) * quantum  # exact scaling by a power of two; rint ties to even
    out = np.copysign(np.minimum(r, fmt.max_finite), x)
    if keep_inf and fmt.has_inf:
        out = np.where(np.isinf(x), x, out)
    return np.where(np.isnan(x), np.nan, out).astype(np.float32)


def _positive_table(name: str) -> np.ndarray:
    import numpy as np

    fmt = FORMATS[name]
    return np.array([decode_code(c, fmt) for c in range(fmt.last_finite_code + 1)], np.float64)


def to_bits(x: np.ndarray, name: str) -> np.ndarray:
    """fp8 values (already representable, held as floats) -> their bit patterns (uint8)."""
    import numpy as np

    x = np.asarray(x, np.float64)
    code = np.searchsorted(_positive_table(name), np.abs(x)).astype(np.uint8)
    code = np.where(np.signbit(x), code | np.uint8(0x80), code)
    return np.where(np.isnan(x), np.uint8(NAN_CODE), code).astype(np.uint8)


def from_bits(bits: np.ndarray, name: str) -> np.ndarray:
    """fp8 bit patterns (any integer dtype, low 8 bits used) -> float32 values."""
    import numpy as np

    fmt = FORMATS[name]
    table = np.array([decode_code(c, fmt) for c in range(256)], np.float32)
    return table[np.asarray(bits).astype(np.uint8)]

"""Helpers for interpreter tests: build small kernels from IR text, check that they round-trip, run them."""

from __future__ import annotations

import numpy as np

from tilec.compiler.interp import run_kernel
from tilec.compiler.ir import parse_module, print_module, verify_module
from tilec.compiler.ir.types import ScalarType

NP_NAMES = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "uint16": "u16",
    "uint32": "u32", "uint64": "u64", "float16": "f16", "float32": "f32", "float64": "f64",
}  # fmt: skip


def parse_checked(text: str):
    """Parse and verify `text`, and check print(parse(print(m))) == print(m)."""
    m = parse_module(text)
    verify_module(m)
    printed = print_module(m)
    assert print_module(parse_module(printed)) == printed
    return m


def run(text: str, args: list, grid=(1,), name: str | None = None) -> None:
    run_kernel(parse_checked(text), name, args, grid)


def kernel(params: str, body: str) -> str:
    lines = "\n".join("    " + ln.strip() for ln in body.strip().splitlines())
    return f"module {{\n  kernel @k({params}) {{\n{lines}\n    return\n  }}\n}}\n"


def storage(arr: np.ndarray, elem: str) -> np.ndarray:
    return arr.astype(ScalarType(elem).np_dtype) if elem != "bf16" else arr


def elementwise(op: str, ins: list[tuple[str, np.ndarray]], out: str, attrs: str = "") -> np.ndarray:
    """Run `%r = op %a0, %a1 ... attrs : tile<N x out>` on 1-D inputs (N a power of two)."""
    n = len(ins[0][1])
    assert n & (n - 1) == 0, "tile lengths are powers of two"
    params = [f"%x{i}: ptr<{e}>" for i, (e, _) in enumerate(ins)] + [f"%o: ptr<{out}>"]
    body = [f"%r = make_range {{end = {n}, start = 0}} : tile<{n}xi32>"]
    for i, (e, _) in enumerate(ins):
        body += [
            f"%p{i} = splat %x{i} : tile<{n}xptr<{e}>>",
            f"%q{i} = addptr %p{i}, %r : tile<{n}xptr<{e}>>",
            f"%a{i} = load %q{i} : tile<{n}x{e}>",
        ]
    operands = ", ".join(f"%a{i}" for i in range(len(ins)))
    body += [
        f"%v = {op} {operands}{attrs} : tile<{n}x{out}>",
        f"%po = splat %o : tile<{n}xptr<{out}>>",
        f"%qo = addptr %po, %r : tile<{n}xptr<{out}>>",
        "store %qo, %v",
    ]
    result = np.zeros(n, np.uint16 if out == "bf16" else ScalarType(out).np_dtype)
    if out == "i1":
        result = np.zeros(n, np.bool_)
    run(kernel(", ".join(params), "\n".join(body)), [a for _, a in ins] + [result])
    return result


def bf16_bits(values) -> np.ndarray:
    """float values (exactly representable in bf16) as bf16 bit patterns."""
    return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


ALL_BF16 = bf16_values(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16))


def nearest_bf16(x: np.ndarray) -> np.ndarray:
    """Reference rounding of float64 values to bf16 bits by search over every finite bf16 (ties to even)."""
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    with np.errstate(invalid="ignore"):  # the signalling NaN patterns
        vals = ALL_BF16.astype(np.float64)
    finite = np.isfinite(vals) & ~((vals == 0) & (bits == 0x8000))
    order = np.argsort(vals[finite], kind="stable")
    sv, sb = vals[finite][order], bits[finite][order]
    out = np.empty(len(x), np.uint16)
    for i, v in enumerate(np.asarray(x, np.float64)):
        j = int(np.searchsorted(sv, v))
        cands = [k for k in (j - 1, j) if 0 <= k < len(sv)]
        best = min(cands, key=lambda k: (abs(sv[k] - v), int(sb[k]) & 1))
        out[i] = sb[best]
    return out

"""A catalogue of tile-IR kernels that together use every op of compiler.ir.OPS, most of them over every
dtype they take, each with inputs on which the op is defined (no division by zero, no shift past the
width, no float->int cast out of range) so the cuda target and the reference interpreter must agree.

tests/cuda/test_every_op.py compiles them all to cubins; tests/cuda/test_gpu_every_op.py runs them on a
GPU against the interpreter. The snippets of tests/ir/test_op_coverage.py are part of the catalogue.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.ir.test_op_coverage import SNIPPETS
from tilec.compiler.ir.ops import ATOMIC_KINDS, MATH_UNARY, REDUCE_KINDS, SCAN_KINDS
from tilec.compiler.ir.types import ScalarType

INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
FLOATS = ("f16", "bf16", "f32", "f64")
N = 128  # elements of the 1-D tiles of the dtype matrix


@dataclass(frozen=True)
class OpKernel:
    text: str  # tile IR with one kernel @k
    make_args: Callable[[], list]  # NumPy arrays (np.uint16 bits for bf16) and scalars, in parameter order
    grid: tuple[int, ...] = (1,)
    num_warps: int = 4
    rtol: float = 0.0
    atol: float = 0.0
    compare: tuple[int, ...] | None = None  # the arguments whose result is defined on a GPU (None: all)


def kernel(params: list[tuple[str, str]], body: list[str]) -> str:
    sig = ", ".join(f"%{n}: ptr<{e}>" for n, e in params)
    lines = "\n".join("    " + ln for text in body for ln in text.strip().splitlines())
    return f"module {{\n  kernel @k({sig}) {{\n{lines}\n    return\n  }}\n}}\n"


def ptrs(name: str, ptr: str, e: str, shape: tuple[int, ...], strides: tuple[int, ...] | None = None) -> str:
    """IR lines making %<name>, the pointer tile %ptr + offsets of `shape` (row-major, or `strides`)."""
    strides = strides or tuple(int(np.prod(shape[d + 1 :])) for d in range(len(shape)))
    full = f"tile<{'x'.join(map(str, shape))}xi32>"
    out, terms = [], []
    for d, (n, s) in enumerate(zip(shape, strides, strict=True)):
        out.append(f"%{name}_r{d} = make_range {{end = {n}, start = 0}} : tile<{n}xi32>")
        cur, have = f"%{name}_r{d}", [n]
        for ax in range(len(shape)):
            if ax != d:
                have.insert(ax, 1)
                out.append(
                    f"%{name}_e{d}_{ax} = expand_dims {cur} {{axis = {ax}}} : tile<{'x'.join(map(str, have))}xi32>"
                )
                cur = f"%{name}_e{d}_{ax}"
        t = f"tile<{'x'.join(map(str, have))}xi32>"
        out += [f"%{name}_s{d} = constant {{value = {s}}} : {t}", f"%{name}_m{d} = mul {cur}, %{name}_s{d} : {t}",
                f"%{name}_b{d} = broadcast %{name}_m{d} : {full}"]  # fmt: skip
        terms.append(f"%{name}_b{d}")
    acc = terms[0]
    for i, t in enumerate(terms[1:]):
        out.append(f"%{name}_o{i} = add {acc}, {t} : {full}")
        acc = f"%{name}_o{i}"
    pt = f"tile<{'x'.join(map(str, shape))}xptr<{e}>>"
    out += [f"%{name}_p = splat %{ptr} : {pt}", f"%{name} = addptr %{name}_p, {acc} : {pt}"]
    return "\n".join(out)


def tile(shape: tuple[int, ...], e: str) -> str:
    return f"tile<{'x'.join(map(str, shape))}x{e}>"


# ---- inputs ----------------------------------------------------------------------------------------


def _rng() -> np.random.Generator:
    return np.random.default_rng(7)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)


def array(e: str, n: int, lo: float, hi: float, rng: np.random.Generator | None = None) -> np.ndarray:
    """n values of IR dtype `e` drawn from [lo, hi) (integers: [lo, hi) too); bf16 as its bits."""
    rng = rng or _rng()
    t = ScalarType(e)
    if t.is_float:
        x = rng.uniform(lo, hi, n)
        return bf16_bits(x) if e == "bf16" else x.astype(t.np_dtype)
    if e == "i1":
        return rng.integers(0, 2, n).astype(bool)
    return rng.integers(int(lo), int(hi), n).astype(t.np_dtype)


def zeros(e: str, n: int) -> np.ndarray:
    return np.zeros(n, np.uint16 if e == "bf16" else ScalarType(e).np_dtype)


def _tol(e: str) -> tuple[float, float]:
    return {"f16": (2e-3, 1e-3), "bf16": (1e-2, 1e-2), "f32": (2e-6, 1e-6), "f64": (1e-12, 1e-12)}.get(
        e, (0.0, 0.0)
    )


# ---- the dtype matrix ------------------------------------------------------------------------------

INT_BINARY = ("add", "sub", "mul", "div", "rem", "maximum", "minimum", "and", "or", "xor", "shl", "shr")
FLOAT_BINARY = ("add", "sub", "mul", "div", "rem", "maximum", "minimum", "pow", "atan2")


def elementwise(e: str) -> OpKernel:
    """Every binary op, cmp predicate, unary op, fma and select on one dtype, each stored to its own output."""
    is_f = e in FLOATS
    names = [*(FLOAT_BINARY if is_f else INT_BINARY), "neg", "abs", *(MATH_UNARY if is_f else ()), "select"]
    names += ["fma"] if is_f else []
    t, bt = tile((N,), e), tile((N,), "i1")
    body = [
        ptrs("pa", "a", e, (N,)),
        ptrs("pb", "b", e, (N,)),
        f"%va = load %pa : {t}",
        f"%vb = load %pb : {t}",
    ]
    params = [("a", e), ("b", e)]
    for i, op in enumerate(names):
        if op in ("neg", "abs") or op in MATH_UNARY:
            body.append(f"%z{i} = {op} %va : {t}")
        elif op == "fma":
            body.append(f"%z{i} = fma %va, %vb, %va : {t}")
        elif op == "select":
            body += [f'%c{i} = cmp %va, %vb {{pred = "lt"}} : {bt}', f"%z{i} = select %c{i}, %va, %vb : {t}"]
        else:
            body.append(f"%z{i} = {op} %va, %vb : {t}")
        params.append((f"o{i}", e))
        body += [ptrs(f"po{i}", f"o{i}", e, (N,)), f"store %po{i}, %z{i}"]
    preds = ("eq", "ne", "lt", "le", "gt", "ge")
    for j, pred in enumerate(preds):
        params.append((f"m{j}", "i1"))
        body += [f'%q{j} = cmp %va, %vb {{pred = "{pred}"}} : {bt}', ptrs(f"pm{j}", f"m{j}", "i1", (N,)),
                 f"store %pm{j}, %q{j}"]  # fmt: skip
    if is_f:
        lo_a, hi_a, lo_b, hi_b = 0.25, 2.0, -2.0, 2.0
    elif e.startswith("u"):
        lo_a, hi_a, lo_b, hi_b = 0, 120, 1, 8
    else:
        lo_a, hi_a, lo_b, hi_b = -100, 100, 1, 8
    rng = _rng()
    a, b = array(e, N, lo_a, hi_a, rng), array(e, N, lo_b, hi_b, rng)
    b[::5] = a[::5] if is_f else 7  # equal lanes for the predicates (7 is a valid divisor and shift)
    if not is_f:
        a[::5] = 7
    outs = [zeros(e, N) for _ in names] + [zeros("i1", N) for _ in preds]
    rtol, atol = _tol(e)
    return OpKernel(kernel(params, body), lambda: [a.copy(), b.copy(), *[o.copy() for o in outs]],
                    rtol=rtol * (50 if e in ("f16", "bf16") else 4), atol=atol)  # fmt: skip


def casts(e: str) -> OpKernel:
    """`cast` from `e` to every scalar type and `bitcast` to the same-width types."""
    targets = [*INTS, *FLOATS, "i1"]
    t = tile((N,), e)
    body = [ptrs("pa", "a", e, (N,)), f"%va = load %pa : {t}"]
    params = [("a", e)]
    for i, d in enumerate(targets):
        params.append((f"o{i}", d))
        body += [
            f"%z{i} = cast %va : {tile((N,), d)}",
            ptrs(f"po{i}", f"o{i}", d, (N,)),
            f"store %po{i}, %z{i}",
        ]
    same = [d for d in (*INTS, *FLOATS) if d != e and ScalarType(d).bits == ScalarType(e).bits]
    for j, d in enumerate(same):
        params.append((f"w{j}", d))
        body += [
            f"%y{j} = bitcast %va : {tile((N,), d)}",
            ptrs(f"pw{j}", f"w{j}", d, (N,)),
            f"store %pw{j}, %y{j}",
        ]
    vals = array(e, N, 0, 100)
    if e in FLOATS:
        vals[::4] = vals[::4] * 0 if e != "bf16" else 0  # zeros for the i1 cast
    outs = [zeros(d, N) for d in targets] + [zeros(d, N) for d in same]
    return OpKernel(
        kernel(params, body), lambda: [vals.copy(), *[o.copy() for o in outs]], rtol=1e-2, atol=1e-2
    )


def reductions(e: str, shape: tuple[int, int] = (8, 32), num_warps: int = 4) -> OpKernel:
    """Every reduce kind along both axes of a 2-D tile and every scan kind along its rows."""
    kinds = [k for k in REDUCE_KINDS if e in INTS or k not in ("and", "or", "xor")]
    m, n = shape
    t = tile(shape, e)
    body = [ptrs("pa", "a", e, shape), f"%va = load %pa : {t}"]
    params = [("a", e)]
    outs = []
    for i, k in enumerate(kinds):
        rt = "i32" if k.startswith("arg") else e
        for axis in (0, 1):
            left = (n,) if axis == 0 else (m,)
            params.append((f"r{i}_{axis}", rt))
            body += [f'%z{i}_{axis} = reduce %va {{axis = {axis}, kind = "{k}"}} : {tile(left, rt)}',
                     ptrs(f"pr{i}_{axis}", f"r{i}_{axis}", rt, left), f"store %pr{i}_{axis}, %z{i}_{axis}"]  # fmt: skip
            outs.append(zeros(rt, left[0]))
    for j, k in enumerate(SCAN_KINDS):
        for rev in (False, True):
            name = f"s{j}{'r' if rev else ''}"
            params.append((name, e))
            attrs = f'axis = 1, kind = "{k}"' + (", reverse = true" if rev else "")
            body += [
                f"%{name}v = scan %va {{{attrs}}} : {t}",
                ptrs(f"p{name}", name, e, shape),
                f"store %p{name}, %{name}v",
            ]
            outs.append(zeros(e, m * n))
    if e in FLOATS:
        vals = array(e, m * n, 0.9, 1.1)
    elif e.startswith("u"):
        vals = array(e, m * n, 0, 4)
    else:
        vals = array(e, m * n, -3, 4)
    rtol, atol = _tol(e)
    return OpKernel(kernel(params, body), lambda: [vals.copy(), *[o.copy() for o in outs]], num_warps=num_warps,
                    rtol=rtol * 64, atol=atol * 64)  # fmt: skip


def atomics(e: str) -> OpKernel:
    """Every atomic_rmw kind the dtype takes and atomic_cas, on distinct addresses (a defined result)."""
    kinds = [k for k in ATOMIC_KINDS if e not in FLOATS or k not in ("and", "or", "xor")]
    t = tile((N,), e)
    body = [ptrs("pa", "a", e, (N,)), f"%va = load %pa : {t}"]
    params = [("a", e)]
    for i, k in enumerate(kinds):
        params += [(f"d{i}", e), (f"o{i}", e)]
        body += [ptrs(f"pd{i}", f"d{i}", e, (N,)), f'%z{i} = atomic_rmw %pd{i}, %va {{kind = "{k}"}} : {t}',
                 ptrs(f"po{i}", f"o{i}", e, (N,)), f"store %po{i}, %z{i}"]  # fmt: skip
    params += [("dc", e), ("oc", e)]
    body += [ptrs("pdc", "dc", e, (N,)), "%old = load %pdc : " + t, f"%cas = atomic_cas %pdc, %va, %old : {t}",
             ptrs("poc", "oc", e, (N,)), "store %poc, %cas"]  # fmt: skip
    lo, hi = (0.5, 4.0) if e in FLOATS else (0, 60)
    rng = _rng()
    vals = array(e, N, lo, hi, rng)
    dests = [array(e, N, lo, hi, rng) for _ in range(len(kinds) + 1)]
    dests[-1][::2] = vals[::2]  # cas succeeds on even lanes
    return OpKernel(
        kernel(params, body), lambda: [vals.copy(), *[x for d in dests for x in (d.copy(), zeros(e, N))]]
    )


# ---- tiles that change shape -----------------------------------------------------------------------


def reshape_kernel(e: str, src: tuple, dst: tuple, src_strides: tuple | None = None, num_warps: int = 4,
                   then: str = "") -> OpKernel:  # fmt: skip
    """Load a tile of `src` (row-major or `src_strides`), reshape it to `dst`, optionally transform it, and
    store it row-major."""
    n = int(np.prod(src))
    body = [ptrs("pa", "a", e, src, src_strides), f"%va = load %pa : {tile(src, e)}",
            f"%vr = reshape %va : {tile(dst, e)}"]  # fmt: skip
    out_shape, res = dst, "%vr"
    if then == "trans":
        order = list(range(len(dst)))[::-1]
        out_shape = tuple(dst[i] for i in order)
        body.append(f"%vt = trans %vr {{order = {order}}} : {tile(out_shape, e)}")
        body.append(f"%vb = reshape %vt : {tile((n,), e)}")
        out_shape, res = (n,), "%vb"
    elif then == "reduce":
        out_shape = dst[:1] + dst[2:]
        body.append(f'%vs = reduce %vr {{axis = 1, kind = "max"}} : {tile(out_shape, e)}')
        body.append(f"%vf = reshape %vs : {tile((int(np.prod(out_shape)),), e)}")
        out_shape, res = (int(np.prod(out_shape)),), "%vf"
    body += [ptrs("po", "o", e, out_shape), f"store %po, {res}"]
    vals = array(e, n, -50, 50)
    m = int(np.prod(out_shape))
    return OpKernel(
        kernel([("a", e), ("o", e)], body), lambda: [vals.copy(), zeros(e, m)], num_warps=num_warps
    )


def reshape_of_range(num_warps: int) -> OpKernel:
    """reshape of a lazy value (make_range): computed straight in the layout the store asks for."""
    body = ["%r = make_range {end = 64, start = 0} : tile<64xi32>", "%t = reshape %r : tile<4x16xi32>",
            ptrs("po", "o", "i32", (4, 16), (1, 4)), "store %po, %t"]  # fmt: skip
    return OpKernel(kernel([("o", "i32")], body), lambda: [np.zeros(64, np.int32)], num_warps=num_warps)


def reshape_in_loop() -> OpKernel:
    """A loop-carried 8x8 tile updated with reshapes of a loaded 64-vector each iteration, then a dot."""
    body = [ptrs("pa", "a", "f32", (64,)), ptrs("pb", "b", "f32", (8, 8), (1, 8)),
            "%z = constant {value = 0.0} : tile<8x8xf32>", "%lo = constant {value = 0} : i32",
            "%hi = constant {value = 3} : i32", "%st = constant {value = 1} : i32",
            "%acc = for %lo, %hi, %st, %z : tile<8x8xf32> {", "^(%i: i32, %c: tile<8x8xf32>):",
            "  %v = load %pa : tile<64xf32>", "  %w = reshape %v : tile<8x8xf32>", "  %bt = load %pb : tile<8x8xf32>",
            "  %d = dot %w, %bt, %c : tile<8x8xf32>", "  %ipf = cast %i : f32", "  %s = splat %ipf : tile<8x8xf32>",
            "  %n = add %d, %s : tile<8x8xf32>", "  yield %n", "}", ptrs("po", "o", "f32", (8, 8)),
            "store %po, %acc"]  # fmt: skip
    rng = _rng()
    a, b = array("f32", 64, -1, 1, rng), array("f32", 64, -1, 1, rng)
    return OpKernel(kernel([("a", "f32"), ("b", "f32"), ("o", "f32")], body),
                    lambda: [a.copy(), b.copy(), np.zeros(64, np.float32)], rtol=1e-5, atol=1e-5)  # fmt: skip


def reshape_to_mma() -> OpKernel:
    """A 256-vector reshaped to 16x16 f16 operands of a tensor-core dot (sm >= 80), result reshaped back."""
    body = [ptrs("pa", "a", "f16", (256,)), "%va = load %pa : tile<256xf16>", "%ma = reshape %va : tile<16x16xf16>",
            "%mt = trans %ma {order = [1, 0]} : tile<16x16xf16>", "%z = constant {value = 0.0} : tile<16x16xf32>",
            "%d = dot %ma, %mt, %z : tile<16x16xf32>", "%f = reshape %d : tile<256xf32>",
            ptrs("po", "o", "f32", (256,)), "store %po, %f"]  # fmt: skip
    a = array("f16", 256, -1, 1)
    return OpKernel(kernel([("a", "f16"), ("o", "f32")], body), lambda: [a.copy(), np.zeros(256, np.float32)],
                    rtol=1e-3, atol=1e-3)  # fmt: skip


def reshape_pointers_masks_branches() -> dict[str, OpKernel]:
    """Reshapes of pointer tiles, of i1 masks, of splats, and inside the branches of an `if`."""
    masked = [ptrs("pa", "a", "f32", (4, 16)), "%pr = reshape %pa : tile<64xptr<f32>>",
              "%r = make_range {end = 64, start = 0} : tile<64xi32>", "%c = constant {value = 50} : tile<64xi32>",
              '%m = cmp %r, %c {pred = "lt"} : tile<64xi1>', "%m2 = reshape %m : tile<8x8xi1>",
              "%m3 = reshape %m2 : tile<64xi1>", "%v = load %pr, %m3 : tile<64xf32>", "%s = constant {value = 2.0} : f32",
              "%sp = splat %s : tile<8x8xf32>", "%sr = reshape %sp : tile<64xf32>", "%w = mul %v, %sr : tile<64xf32>",
              ptrs("po", "o", "f32", (64,)), "store %po, %w, %m3"]  # fmt: skip
    branches = [ptrs("pa", "a", "f32", (64,)), "%v = load %pa : tile<64xf32>", "%pid = program_id {axis = 0} : i32",
                "%z = constant {value = 0} : i32", '%c = cmp %pid, %z {pred = "eq"} : i1',
                "%res = if %c : tile<8x8xf32> {", "  %x = reshape %v : tile<8x8xf32>",
                "  %t = trans %x {order = [1, 0]} : tile<8x8xf32>", "  yield %t", "} {",
                "  %y = reshape %v : tile<8x8xf32>", "  yield %y", "}", ptrs("po", "o", "f32", (8, 8)), "store %po, %res"]  # fmt: skip
    a = array("f32", 64, -1, 1)
    params = [("a", "f32"), ("o", "f32")]
    return {
        "reshape-pointers-masks": OpKernel(
            kernel(params, masked), lambda: [a.copy(), np.zeros(64, np.float32)]
        ),
        "reshape-in-branches": OpKernel(
            kernel(params, branches), lambda: [a.copy(), np.zeros(64, np.float32)]
        ),
    }


def shape_kernels() -> dict[str, OpKernel]:
    out: dict[str, OpKernel] = {}
    for e in ("f32", "f16", "bf16", "i8", "i64", "u16", "f64"):
        out[f"reshape-flat-{e}"] = reshape_kernel(e, (4, 8), (32,))
        out[f"reshape-colmajor-{e}"] = reshape_kernel(e, (8, 16), (4, 32), src_strides=(1, 8))
    for nw in (1, 4, 8):
        out[f"reshape-3d-w{nw}"] = reshape_kernel("f32", (64,), (4, 2, 8), num_warps=nw, then="reduce")
        out[f"reshape-trans-w{nw}"] = reshape_kernel("i32", (2, 4, 8), (8, 8), num_warps=nw, then="trans")
        out[f"reshape-range-w{nw}"] = reshape_of_range(nw)
        out[f"reshape-big-w{nw}"] = reshape_kernel(
            "f32", (32, 64), (64, 2, 16), (1, 32), num_warps=nw, then="reduce"
        )
    out["reshape-sort-pairs"] = reshape_kernel("f32", (16,), (8, 2, 1), then="reduce")
    out["reshape-unit-dims"] = reshape_kernel("i32", (1, 64), (64, 1), then="trans")
    out["reshape-in-loop-dot"] = reshape_in_loop()
    out["reshape-to-mma"] = reshape_to_mma()
    out.update(reshape_pointers_masks_branches())
    return out


def catalogue() -> dict[str, OpKernel]:
    """Every kernel of the catalogue by name."""
    out: dict[str, OpKernel] = {}
    for name, (text, make_args, _) in SNIPPETS.items():
        racy = name.startswith("atomics")  # programs race for the counter: only its final value is defined
        grid = (4,) if racy else (1,)
        out[f"snippet-{name}"] = OpKernel(text, make_args, grid, rtol=1e-5, compare=(0,) if racy else None)
    for e in (*INTS, *FLOATS):
        out[f"elementwise-{e}"] = elementwise(e)
        out[f"casts-{e}"] = casts(e)
        out[f"reductions-{e}"] = reductions(e)
    out["reductions-f32-w8"] = reductions("f32", (64, 32), 8)
    out["reductions-i32-w1"] = reductions("i32", (4, 16), 1)
    for e in (*INTS, *FLOATS, "i1"):
        out[f"atomics-{e}"] = atomics(e)
    out.update(shape_kernels())
    return out

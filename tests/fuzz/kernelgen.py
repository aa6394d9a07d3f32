"""Random Triton-language kernels, written as users write them, for differential testing against Triton.

`programs()` is a hypothesis strategy of `Program`s: one kernel (and up to two `@triton.jit` helpers with
early returns) over float32 and int32 tiles, with nested runtime and compile-time ifs, early returns, for
loops with runtime and constexpr bounds, while loops, `tl.static_range`, loads with and without `other`,
integer `//` and `%` of negative values, narrowing and float-to-int casts, shifts, comparisons and
min/max with NaN, masked reductions, `tl.where`, `tl.cumsum` and integer atomics from every program.

Every value written to memory is tagged with how it may be compared (see `Slot`): integers, comparisons
and selects bit for bit; floats bit for bit when only correctly rounded IEEE operations made them (+ - *
min max where, casts: each rounds once, the same way everywhere), within a tolerance when a reduction or
scan (which may add in another order) or a division made them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

try:
    from hypothesis import strategies as st
except ImportError:  # a GPU machine may lack it: bench/fuzz_vs_triton.py draws with `random` there
    st = None

BLOCK = 16
PROGRAMS = 3
N_VALID = PROGRAMS * BLOCK - 5  # the last program has masked-off lanes
SLOTS = 6  # tile stores per kind
SCALAR_SLOTS = 4
ATOMIC_SLOTS = 8
# each atomic kind has its own slots: kinds mixed on one address would make the result depend on the order
# of the programs, which the cpu target does not fix
ATOMIC_BASE = {"atomic_add": 0, "atomic_max": 2, "atomic_min": 4, "atomic_or": 6, "atomic_xor": 7}
HEADER = "import triton\nimport triton.language as tl\n\n\n"
PARAMS = "xf_ptr, yf_ptr, xi_ptr, yi_ptr, of_ptr, oi_ptr, os_ptr, oa_ptr, n, s"


@dataclass
class Program:
    source: str
    constexprs: dict
    float_tol: dict[int, bool]  # float tile slot -> True when it needs a tolerance (reduction/scan/division)
    categories: set[str] = field(default_factory=set)
    loop_return: bool = (
        False  # a return inside a runtime loop: Triton's interpreter runs it, its compiler refuses
    )

    def inputs(self, seed: int) -> list:
        """The kernel's runtime arguments in parameter order (NumPy arrays and Python ints)."""
        r = np.random.default_rng(seed)
        total = PROGRAMS * BLOCK
        xf = (r.standard_normal(total) * 8).astype(np.float32)
        yf = (r.standard_normal(total) * 8).astype(np.float32)
        for arr in (xf, yf):  # NaN, infinities and signed zeros at a few places
            idx = r.choice(total, 4, replace=False)
            arr[idx] = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
        xi = r.integers(-300, 300, total).astype(np.int32)
        yi = r.integers(-40, 40, total).astype(np.int32)
        xi[r.choice(total, 2, replace=False)] = [2**31 - 1, -(2**31)]
        of = np.full(SLOTS * total, -7.0, np.float32)
        oi = np.full(SLOTS * total, -7, np.int32)
        os_ = np.full(SCALAR_SLOTS * PROGRAMS, -7, np.int32)
        oa = np.zeros(ATOMIC_SLOTS, np.int32)
        return [xf, yf, xi, yi, of, oi, os_, oa, N_VALID, int(r.integers(-5, 6))]


OUTPUTS = {4: "of", 5: "oi", 6: "os", 7: "oa"}


class _Gen:
    """Draws one kernel. Variables are typed: `ft` float32 tiles, `it` int32 tiles, `sc` int32 scalars;
    new names are made only at the top level of the kernel, so every name is defined on every path."""

    def __init__(self, draw: _Draw, loop_returns: bool, bf16: bool):
        self.draw = draw
        self.loop_returns = loop_returns
        self.bf16 = bf16
        self.ft: dict[str, bool] = {"a": False, "b": False}  # name -> needs a tolerance
        self.it = ["i", "j"]
        self.sc = ["pid", "s", "k"]
        self.f_slot = 0
        self.i_slot = 0
        self.s_slot = 0
        self.float_tol: dict[int, bool] = {}
        self.cats: set[str] = set()
        self.helpers: list[str] = []
        self.helper_defs: list[str] = []
        self.loop_return = False
        self.n = 0

    def pick(self, xs):
        return self.draw.pick(list(xs))

    def coin(self, p: float = 0.5) -> bool:
        return self.draw.int(0, 99) < p * 100

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    # ---- expressions
    def iexpr(self, depth: int = 2) -> str:
        """An int32 tile expression."""
        if depth == 0 or self.coin(0.3):
            return self.pick(self.it + ["offs"])
        kind = self.pick(
            [
                "bin",
                "bin",
                "divmod",
                "shift",
                "cast",
                "where",
                "minmax",
                "cmp",
                "scalar",
                "cumsum",
                "ftoi",
                "helper",
                "narrow",
                "narrow",
                "unsigned",
                "mixed",
                "abs",
                "ftoi8",
                "tile2d",
            ]
        )
        a = self.iexpr(depth - 1)
        if kind == "bin":
            return f"({a} {self.pick(['+', '-', '*', '&', '|', '^'])} {self.iexpr(depth - 1)})"
        if kind == "divmod":
            self.cats.add("int-divmod")
            op = self.pick(["//", "%"])
            d = self.pick(
                [
                    f"(({self.iexpr(0)} & 7) + 1)",
                    f"(-(({self.iexpr(0)} & 7) + 2))",
                    "3",
                    "-5",
                    "(s % 3 + 4)",
                    "2",
                    "8",
                    "-4",
                    "16",
                ]
            )
            return f"({a} {op} {d})"
        if kind == "shift":
            self.cats.add("shift")
            return f"({a} {self.pick(['<<', '>>'])} ({self.iexpr(0)} & 7))"
        if kind in ("narrow", "unsigned", "mixed", "abs", "ftoi8", "tile2d"):
            return self.iexpr_more(kind, a)
        if kind == "cast":
            self.cats.add("cast-int")
            t = self.pick(["tl.int8", "tl.uint8", "tl.int16", "tl.uint16", "tl.int64", "tl.uint32"])
            return f"{a}.to({t}).to(tl.int32)"
        if kind == "where":
            self.cats.add("where")
            return f"tl.where({self.bexpr()}, {a}, {self.iexpr(depth - 1)})"
        if kind == "minmax":
            if self.coin(0.3):  # the high half of an unsigned product
                return f"tl.umulhi({a}.to(tl.uint32), {self.iexpr(depth - 1)}.to(tl.uint32)).to(tl.int32)"
            if self.coin(0.3):  # a select under a scalar condition
                return f"tl.where({self.cond()}, {a}, {self.iexpr(depth - 1)})"
            return f"tl.{self.pick(['minimum', 'maximum'])}({a}, {self.iexpr(depth - 1)})"
        if kind == "cmp":
            return f"({self.bexpr()}).to(tl.int32)"
        if kind == "scalar":
            return f"({a} {self.pick(['+', '-', '*'])} {self.sexpr(1)})"
        if kind == "cumsum":
            self.cats.add("cumsum")
            return f"tl.cumsum({a}, 0)"
        if kind == "ftoi":
            self.cats.add("cast-float")
            f = self.fexpr(1, exact=True)
            # float -> int is undefined for NaN and out-of-range values in LLVM: keep it defined
            return f"tl.where({f} == {f}, tl.minimum(tl.maximum({f}, -1.0e9), 1.0e9), 0.0).to(tl.int32)"
        if self.helpers:
            self.cats.add("helper")
            h = self.pick(self.helpers)
            return f"{h}({a}, {self.sexpr(0)}, {self.pick(['True', 'False'])})"
        return a

    def iexpr_more(self, kind: str, a: str) -> str:
        """The int32 tile expressions over other integer types, casts from floats and 2-D views."""
        if kind == "narrow":  # arithmetic in another integer type, which wraps there, then widened back
            self.cats.add("int-types")
            t = self.pick(["tl.int8", "tl.uint8", "tl.int16", "tl.uint16", "tl.int64", "tl.uint32"])
            op = self.pick(["+", "-", "*", "//", "%", ">>", "<<", "min", "max", "<"])
            b = self.iexpr(0)
            if op in ("//", "%"):
                b = f"(({b} & 7) + 1)"
            elif op in (">>", "<<"):
                b = f"({b} & 7)"
            if op in ("min", "max"):
                e = f"tl.{op}imum({a}.to({t}), {b}.to({t}))"
            elif op == "<":
                return f"({a}.to({t}) < {b}.to({t})).to(tl.int32)"
            else:
                e = f"({a}.to({t}) {op} {b}.to({t}))"
            return f"{e}.to(tl.int32)"
        if kind == "unsigned":  # a uint32 view compared and divided: negative values are large
            self.cats.add("int-types")
            op = self.pick(["//", "%", ">>", "<"])
            b = self.iexpr(0)
            rhs = f"(({b} & 7) + 1).to(tl.uint32)" if op != ">>" else f"({b} & 7).to(tl.uint32)"
            return f"({a}.to(tl.uint32) {op} {rhs}).to(tl.int32)"
        if kind == "mixed":  # operands of different integer types: Triton's promotion picks the result type
            self.cats.add("int-types")
            t = self.pick(["tl.uint32", "tl.uint8", "tl.int8", "tl.int16", "tl.uint16"])
            op = self.pick(["+", "*", "<", ">=", "==", "max"])
            b = self.iexpr(0)
            if op == "max":
                return f"tl.maximum({a}.to({t}), {b}).to(tl.int32)"
            return f"({a}.to({t}) {op} {b}).to(tl.int32)"
        if (
            kind == "tile2d"
        ):  # the tile as 4 x 4 (masked-off lanes zeroed): reduce or scan a row or column, or
            # transpose, and back to 16 lanes
            self.cats.add("tile-2d")
            m = f"tl.reshape(tl.where(mask, {a}, 0), (4, 4))"
            how = self.pick(["trans", "row", "col", "scan"])
            if how == "trans":
                return f"tl.reshape(tl.trans({m}), (16,))"
            narrow = self.pick(["tl.int8", "tl.uint8", "tl.int16", "tl.uint16"]) if self.coin(0.4) else None
            if how == "scan" and narrow:  # a narrow scan widens by its sign (u8 -> u32): a division shows which
                self.cats.add("narrow-reduce")
                s = f"tl.cumsum({m}.to({narrow}), axis={self.pick([0, 1])})"
                return f"tl.reshape((({s} - 300) // 7).to(tl.int32), (16,))"
            if how == "scan":
                return f"tl.reshape(tl.cumsum({m}, axis={self.pick([0, 1])}), (16,))"
            idx = "[:, None]" if how == "row" else "[None, :]"
            if narrow:  # max/min of a narrow type are i32 in Triton, a sum i32 or u32: no wrap at the edge
                self.cats.add("narrow-reduce")
                r = f"(tl.{self.pick(['max', 'min', 'sum'])}({m}.to({narrow}), axis={1 if how == 'row' else 0}) + 200)"
                return f"tl.reshape(tl.broadcast_to({r}{idx}, (4, 4)), (16,)).to(tl.int32)"
            fn = self.pick(["sum", "max", "min", "xor_sum"])
            r = f"tl.{fn}({m}, axis={1 if how == 'row' else 0})"
            return f"tl.reshape(tl.broadcast_to({r}{idx}, (4, 4)), (16,))"
        if kind == "abs":
            return f"tl.abs({a})"
        if kind == "ftoi8":  # float to a narrow integer, in range: truncation toward zero
            self.cats.add("cast-float")
            f = self.fexpr(1, exact=True)
            t = self.pick(["tl.int8", "tl.uint8", "tl.int16"])
            lo = "0.0" if t == "tl.uint8" else "-100.0"
            return f"tl.where({f} == {f}, tl.minimum(tl.maximum({f}, {lo}), 100.0), 0.0).to({t}).to(tl.int32)"
        raise AssertionError(kind)

    def bexpr(self) -> str:
        """An i1 tile: comparisons of ints, or of floats made exactly (NaN compares false but for !=)."""
        if self.coin(0.4):
            self.cats.add("nan-compare")
            fs = [f for f, tol in self.ft.items() if not tol]
            return f"({self.pick(fs)} {self.pick(['<', '<=', '==', '!=', '>', '>='])} {self.fexpr(1, exact=True)})"
        c = f"({self.iexpr(1)} {self.pick(['<', '<=', '==', '!=', '>', '>='])} {self.iexpr(1)})"
        if self.coin(0.2):
            return f"({c} {self.pick(['&', '|', '^'])} ({self.iexpr(0)} > {self.iexpr(0)}))"
        if self.coin(0.1):
            return f"(~{c})"
        return c

    def fexpr(self, depth: int = 2, exact: bool = False) -> str:
        return self._fexpr(depth, exact)[0]

    def _fexpr(self, depth: int, exact: bool) -> tuple[str, bool]:
        """A float32 tile expression and whether it needs a tolerance."""
        names = [f for f, tol in self.ft.items() if not (exact and tol)]
        if depth == 0 or self.coin(0.3):
            f = self.pick(names)
            return f, self.ft[f]
        kinds = ["bin", "bin", "minmax", "where", "neg", "f16", "bf16", "itof", "fmodfloor", "f16mul", "f16reduce"]
        if not exact:
            kinds += ["div", "cumsum", "sqrt", "freduce", "idiv", "math"]
        kind = self.pick(kinds)
        a, ta = self._fexpr(depth - 1, exact)
        if kind == "bin":
            b, tb = self._fexpr(depth - 1, exact)
            op = self.pick(["+", "-", "*"] if not (ta or tb) else ["+", "-"])
            return f"({a} {op} {b})", ta or tb
        if kind == "minmax":
            self.cats.add("nan-minmax")
            b, tb = self._fexpr(depth - 1, exact)
            return f"tl.{self.pick(['minimum', 'maximum'])}({a}, {b})", ta or tb
        if kind == "where":
            self.cats.add("where")
            b, tb = self._fexpr(depth - 1, exact)
            return f"tl.where({self.bexpr()}, {a}, {b})", ta or tb
        if kind == "f16":
            return a, ta
        if kind == "bf16" and not ta and self.bf16:
            self.cats.add("cast-float")
            return f"{a}.to(tl.bfloat16).to(tl.float32)", False
        if kind == "bf16":
            return a, ta
        if kind == "fmodfloor":  # % of floats: C's fmod in Triton (the sign of the dividend), not Python's
            self.cats.add("float-mod")
            return f"({a} % {self.pick(['3.0', '-2.5', 'b'])})", True
        if kind == "f16mul" and not ta:  # a product of two halves is exact in f32: one rounding to half
            self.cats.add("cast-float")
            b = self.fexpr(0, exact=True)
            return f"({a}.to(tl.float16) * {b}.to(tl.float16)).to(tl.float32)", False
        if kind == "f16reduce" and not ta:  # tl.max/tl.min of halves is f32 in Triton: the step after it shows
            self.cats.add("narrow-reduce")
            fn, neutral = self.pick([("max", '-float("inf")'), ("min", 'float("inf")')])
            return f"({a} + (tl.{fn}(tl.where(mask, {a}, {neutral}).to(tl.float16), 0) + 0.0001))", False
        if kind in ("f16mul", "fmodfloor", "f16reduce"):
            return a, ta
        if kind == "freduce":  # a masked float reduction broadcast back over the tile
            self.cats.add("masked-reduce")
            fn, neutral = self.pick([("sum", "0.0"), ("max", "-1.0e38"), ("min", "1.0e38")])
            return f"({a} + tl.{fn}(tl.where(mask, {a}, {neutral}), 0))", True
        if kind == "idiv":  # true division of integers gives float32
            return f"({self.iexpr(1)} / (({self.iexpr(0)} & 7) + 1))", True
        if kind == "math":
            self.cats.add("math")
            return f"tl.{self.pick(['exp', 'log', 'sin', 'cos', 'abs', 'floor', 'ceil'])}({a} * 0.125)", True
        if kind == "neg":
            return f"(-{a})", ta
        if kind == "f16" and not ta:  # a value within a tolerance may round to another half
            self.cats.add("cast-float")
            return f"{a}.to(tl.float16).to(tl.float32)", ta
        if kind == "itof":
            return f"{self.iexpr(1)}.to(tl.float32)", False
        if kind == "div":
            self.cats.add("float-div")
            return f"({a} / {self.pick(['3.0', '-0.5', 'b'])})", True
        if kind == "sqrt":
            return f"tl.sqrt(tl.abs({a}))", True
        self.cats.add("cumsum")
        return f"tl.cumsum({a}, 0)", True

    def sexpr(self, depth: int = 1) -> str:
        """An int32 scalar expression."""
        if depth == 0 or self.coin(0.4):
            return self.pick(self.sc + ["C", "3", "-2"])
        kind = self.pick(["bin", "divmod", "reduce", "reduce"])
        a = self.sexpr(depth - 1)
        if kind == "bin":
            return f"({a} {self.pick(['+', '-', '*'])} {self.sexpr(depth - 1)})"
        if kind == "divmod":
            self.cats.add("int-divmod")
            return f"({a} {self.pick(['//', '%'])} {self.pick(['3', '-4', '(s % 3 - 4)', '2', '8', '-16'])})"
        self.cats.add("masked-reduce")
        fn, neutral = self.pick(
            [
                ("sum", "0"),
                ("max", "-1000000"),
                ("min", "1000000"),
                ("argmax", "-1000000"),
                ("argmin", "1000000"),
            ]
        )
        if fn.startswith("arg"):  # ties: the first index
            self.cats.add("argminmax")
            return f"tl.{fn}(tl.where(mask, {self.iexpr(1)} & 7, {neutral}), 0).to(tl.int32)"
        return f"tl.{fn}(tl.where(mask, {self.iexpr(1)}, {neutral}), 0)"

    def cond(self) -> str:
        """A runtime scalar condition."""
        return f"{self.sexpr(1)} {self.pick(['<', '>', '==', '!=', '>='])} {self.sexpr(1)}"

    # ---- statements
    def stmts(self, depth: int, top: bool, in_loop: bool, count: int) -> list[str]:
        out: list[str] = []
        for _ in range(count):
            out.extend(self.stmt(depth, top, in_loop))
        return out

    def stmt(self, depth: int, top: bool, in_loop: bool) -> list[str]:
        kinds = ["assign_i", "assign_f", "assign_s", "store_i", "store_f", "store_s", "atomic", "ifexp"]
        if depth > 0:
            kinds += ["rif", "rif", "cif", "for", "static", "while", "ret"]
        kind = self.pick(kinds)
        if kind == "assign_i":
            name = self.fresh("v") if top and self.coin(0.5) else self.pick(self.it)
            line = f"{name} = {self.iexpr()}"
            if name not in self.it:
                self.it.append(name)
            return [line]
        if kind == "assign_f":
            name = self.fresh("f") if top and self.coin(0.5) else self.pick(list(self.ft))
            e, tol = self._fexpr(2, exact=False)
            if name in self.ft and self.ft[name] != tol:  # a name keeps its tag on every path
                e, tol = self.fexpr(2, exact=True), False
                if self.ft[name]:
                    e = f"({e} + 0.0)"
                    tol = True
            self.ft[name] = self.ft.get(name, False) or tol
            return [f"{name} = {e}"]
        if kind == "assign_s":
            name = "k" if not top or self.coin(0.5) else self.fresh("t")
            line = f"{name} = {self.sexpr(2)}"
            if name not in self.sc:
                self.sc.append(name)
            return [line]
        if kind == "store_i":
            self.i_slot = (self.i_slot + 1) % SLOTS
            return [
                f"tl.store(oi_ptr + {self.i_slot} * {PROGRAMS * BLOCK} + offs, {self.iexpr()}, mask=mask)"
            ]
        if kind == "store_f":
            self.f_slot = (self.f_slot + 1) % SLOTS
            e, tol = self._fexpr(2, exact=False)
            self.float_tol[self.f_slot] = self.float_tol.get(self.f_slot, False) or tol
            return [f"tl.store(of_ptr + {self.f_slot} * {PROGRAMS * BLOCK} + offs, {e}, mask=mask)"]
        if kind == "store_s":
            self.s_slot = (self.s_slot + 1) % SCALAR_SLOTS
            return [f"tl.store(os_ptr + pid * {SCALAR_SLOTS} + {self.s_slot}, {self.sexpr(2)})"]
        if kind == "atomic":
            self.cats.add("atomic")
            fn = self.pick(list(ATOMIC_BASE))
            base = ATOMIC_BASE[fn]
            width = 2 if fn in ("atomic_add", "atomic_max", "atomic_min") else 1
            if self.coin(0.5):
                return [
                    f"tl.{fn}(oa_ptr + {base} + ({self.iexpr(0)} & {width - 1}), {self.iexpr(1)}, mask=mask)"
                ]
            return [f"tl.{fn}(oa_ptr + {base}, {self.sexpr(1)})"]
        if kind == "ifexp":  # a conditional expression: only the arm taken runs (a load, an atomic)
            self.cats.add("ifexp")
            if self.coin(0.5):
                name = self.pick(self.it)
                load = f"tl.load(xi_ptr + offs + {self.sexpr(0)} * 0, mask=mask, other=5)"
                return [f"{name} = {load} if {self.cond()} else {self.iexpr(1)}"]
            return [f"k = (tl.atomic_add(oa_ptr + 1, 1) * 0 + k) if {self.cond()} else {self.sexpr(1)}"]
        if kind == "ret":
            if in_loop and not self.loop_returns:
                return ["pass"]
            self.cats.add("early-return")
            self.loop_return |= in_loop
            return [
                f"if {self.cond()}:",
                *self.indent(self.stmts(0, False, in_loop, self.pick([0, 1]))),
                "    return",
            ]
        if kind == "rif":
            self.cats.add("runtime-if")
            body = self.stmts(depth - 1, False, in_loop, self.pick([1, 2, 3]))
            lines = [f"if {self.cond()}:", *self.indent(body)]
            if self.coin(0.5):
                lines += ["else:", *self.indent(self.stmts(depth - 1, False, in_loop, self.pick([1, 2])))]
            return lines
        if kind == "cif":
            self.cats.add("constexpr-if")
            test = self.pick(["F", "not F", "C > 2", "C == 1"])
            body = self.stmts(depth - 1, False, in_loop, self.pick([1, 2, 3]))
            lines = [f"if {test}:", *self.indent(body)]
            if self.coin(0.4):
                lines += ["else:", *self.indent(self.stmts(depth - 1, False, in_loop, 1))]
            return lines
        if kind == "static":
            self.cats.add("static-range")
            var = self.fresh("u")
            self.sc.append(var)
            body = self.stmts(depth - 1, False, in_loop, self.pick([1, 2, 3]))
            self.sc.remove(var)
            return [
                f"for {var} in tl.static_range({self.pick(['C', '2', '0', '1, 4, 2'])}):",
                *self.indent(body),
            ]
        if kind == "for":
            self.cats.add("runtime-loop")
            var = self.fresh("r")
            lo, hi = self.pick(
                [("0", "C"), ("0", "(s % 3 + 1)"), ("pid", "3"), ("s", "2"), ("0", "(pid + 1)")]
            )
            # Triton's interpreter iterates a runtime range with Python ints, so `r // -4` floors there and
            # truncates on a GPU (an i32 induction variable; tilec too): the kernels use the variable as a tensor
            use = f"({var} + pid * 0)"
            self.sc.append(use)
            body = self.stmts(depth - 1, False, True, self.pick([1, 2, 3]))
            self.sc.remove(use)
            rng = self.pick(["range", "tl.range"])
            return [f"for {var} in {rng}({lo}, {hi}):", *self.indent(body)]
        self.cats.add("runtime-loop")
        var = self.fresh("w")
        body = self.stmts(depth - 1, False, True, self.pick([1, 2]))
        return [
            f"{var} = 0",
            f"while {var} < {self.pick(['2', '(pid % 3)', 'C'])}:",
            f"    {var} += 1",
            *self.indent(body),
        ]

    @staticmethod
    def indent(lines: list[str]) -> list[str]:
        return ["    " + ln for ln in lines] or ["    pass"]

    # ---- helpers
    def helper(self, idx: int) -> None:
        """A helper over an int tile `v` and a scalar `q` with early returns under runtime and compile-time ifs;
        its returns are its own."""
        name = f"_helper{idx}"
        body = [f"w = v {self.pick(['+', '*', '-'])} q"]
        for _ in range(self.pick([1, 2, 3])):
            cond = f"q {self.pick(['<', '>', '=='])} {self.pick(['0', '1', '-2'])}"
            r = f"return w {self.pick(['+', '-', '^'])} {self.pick(['1', 'q', 'v'])}"
            shape = self.pick(["flat", "cif", "static"])
            if shape == "flat":
                body += [f"if {cond}:", f"    {r}"]
            elif shape == "cif":
                body += [
                    "if FLAG:",
                    f"    if {cond}:",
                    f"        {r}",
                    f"    w = w {self.pick(['+', '*'])} 2",
                ]
            else:
                body += [
                    "for t in tl.static_range(2):",
                    f"    if {cond} + t:",
                    f"        {r}",
                    "    w = w + t",
                ]
        body.append(f"return w {self.pick(['*', '+'])} 3")
        self.helper_defs.append(
            "@triton.jit\n"
            + f"def {name}(v, q, FLAG: tl.constexpr):\n"
            + "\n".join("    " + ln for ln in body)
            + "\n"
        )
        self.helpers.append(name)


class _Draw:
    """Choices drawn from hypothesis (shrinkable) or from a seeded `random.Random`."""

    def __init__(self, hypothesis_draw=None, rng: random.Random | None = None):
        self.hd, self.rng = hypothesis_draw, rng

    def pick(self, xs: list):
        return self.hd(st.sampled_from(xs)) if self.hd is not None else self.rng.choice(xs)

    def int(self, lo: int, hi: int) -> int:
        return self.hd(st.integers(lo, hi)) if self.hd is not None else self.rng.randint(lo, hi)


def random_program(rng: random.Random, loop_returns: bool = True, bf16: bool = False) -> Program:
    """The same kernels as `programs()`, drawn from `rng` (reproducible from a seed, no hypothesis needed)."""
    return build_program(_Draw(rng=rng), loop_returns, bf16)


if st is not None:

    @st.composite
    def programs(draw, loop_returns: bool = True, bf16: bool = False) -> Program:
        """A hypothesis strategy of random kernels (see `build_program`)."""
        return build_program(_Draw(hypothesis_draw=draw), loop_returns, bf16)


def build_program(draw: _Draw, loop_returns: bool = True, bf16: bool = False) -> Program:
    """`loop_returns`: may return from inside runtime loops (Triton's interpreter runs that, its compiler
    refuses it). `bf16`: may round float32 to bfloat16, which Triton's interpreter truncates where Triton on a
    GPU (and tilec) rounds to nearest even: on only where the oracle is Triton on a GPU."""
    g = _Gen(draw, loop_returns, bf16)
    for i in range(draw.int(0, 2)):
        g.helper(i)
    other_a = draw.pick(["0.0", "-1.5", "-1.0e30"])
    lines = [
        "pid = tl.program_id(0)",
        "offs = pid * BLOCK + tl.arange(0, BLOCK)",
        "mask = offs < n",
        f"a = tl.load(xf_ptr + offs, mask=mask, other={other_a})",
        "b = tl.load(yf_ptr + offs, mask=mask)"
        if draw.pick([False, True])
        else "b = tl.load(yf_ptr + offs, mask=mask, other=1.0)",
        f"i = tl.load(xi_ptr + offs, mask=mask, other={draw.pick(['0', '-3'])})",
        "j = tl.load(yi_ptr + offs, mask=mask)"
        if draw.pick([False, True])
        else "j = tl.load(yi_ptr + (offs + s + n) % n, mask=mask, other=0)",
        "k = pid + s",
    ]
    lines += g.stmts(3, True, False, draw.int(2, 6))
    # every kernel ends writing what it holds, so a wrong value anywhere shows
    lines += [
        f"tl.store(oi_ptr + {SLOTS - 1} * {PROGRAMS * BLOCK} + offs, {' + '.join(g.it)}, mask=mask)",
        f"tl.store(os_ptr + pid * {SCALAR_SLOTS} + {SCALAR_SLOTS - 1}, {' + '.join(g.sc)})",
    ]
    exact = [f for f, tol in g.ft.items() if not tol]
    tol = [f for f, t in g.ft.items() if t]
    lines.append(
        f"tl.store(of_ptr + {SLOTS - 1} * {PROGRAMS * BLOCK} + offs, {' + '.join(exact + tol)}, mask=mask)"
    )
    g.float_tol[SLOTS - 1] = g.float_tol.get(SLOTS - 1, False) or bool(tol)
    kernel = (
        f"@triton.jit\ndef kernel({PARAMS}, BLOCK: tl.constexpr, C: tl.constexpr, F: tl.constexpr):\n"
        + "\n".join("    " + ln for ln in lines)
        + "\n"
    )
    source = HEADER + "\n\n".join([*g.helper_defs, kernel])
    constexprs = {"BLOCK": BLOCK, "C": draw.int(0, 3), "F": draw.pick([False, True])}
    return Program(source, constexprs, g.float_tol, g.cats, g.loop_return)

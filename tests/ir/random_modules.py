"""Random well-typed tile IR modules, for property tests: the IR round trip, and passes against the
reference interpreter (run the module before and after a pass on `kernel_args` and compare buffers).

`modules()` draws a verified Module with one kernel `@k(%p0: ptr<E0>, ..., %n: i32)` and helper
functions. Every load/store/atomic is in bounds of a BUF-element buffer (offsets `& (BUF-1)`) or
masked to [0, BUF); every loop ends. Run it with `run_kernel(m, "k", kernel_args(m, rng), GRID)`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
from hypothesis import strategies as st

from tilec.compiler.ir import Builder, Function, Module, Param, Region, Value, verify_module
from tilec.compiler.ir.core import Block
from tilec.compiler.ir.ops import MATH_UNARY, REDUCE_KINDS, SCAN_KINDS
from tilec.compiler.ir.types import (
    PointerType,
    ScalarType,
    TileType,
    Type,
    elem_type,
    f16,
    f32,
    i1,
    i32,
    i64,
    make_type,
    shape_of,
    u32,
    with_elem,
)

BUF = 64
GRID = (2,)
bf16 = ScalarType("bf16")
ELEMS = (i1, i32, i64, u32, f16, bf16, f32)
SHAPES = ((), (4,), (8,), (1, 4), (2, 4), (2, 1), (4, 2), (2, 2))
BITCAST_PARTNERS = {"i32": (u32, f32), "u32": (i32, f32), "f32": (i32, u32), "f16": (bf16,), "bf16": (f16,)}
STATEMENTS = (
    "binary", "binary", "unary", "fma", "cmp", "select", "cast", "bitcast", "shape", "reduce", "scan", "dot",
    "load", "load", "store", "atomic", "cas", "for", "if", "while", "call", "reduce_with", "scan_with",
)  # fmt: skip
COMBINER_STATEMENTS = ("binary", "binary", "cmp_select", "cast", "if")


class _Gen:
    def __init__(self, draw: Callable, max_stmts: int):
        self.draw = draw
        self.budget = max_stmts
        self.b = Builder()
        self.frames: list[list[Value]] = []
        self.ptrs: list[Value] = []
        self.n: Value | None = None
        self.helpers: list[Function] = []
        self.depth = 0
        self.memory = True  # helpers get no memory ops
        self.names = itertools.count()

    # ---- the pool of values in scope
    def add(self, v: Value) -> Value:
        self.frames[-1].append(v)
        return v

    def pick(self, t: Type) -> Value:
        vs = [v for f in self.frames for v in f if v.type == t]
        if vs and self.draw(st.integers(0, 3)):
            return self.draw(st.sampled_from(vs))
        return self.make(t)

    def any_value(self, pred: Callable[[Type], bool] = lambda t: True) -> Value:
        vs = [
            v
            for f in self.frames
            for v in f
            if pred(v.type) and not isinstance(elem_type(v.type), PointerType)
        ]
        if vs and self.draw(st.booleans()):
            return self.draw(st.sampled_from(vs))
        while True:
            t = self.rand_type()
            if pred(t):
                return self.pick(t)

    def rand_type(self, elems=ELEMS, shapes=SHAPES) -> Type:
        return make_type(self.draw(st.sampled_from(shapes)), self.draw(st.sampled_from(elems)))

    def make(self, t: Type) -> Value:
        """A new value of type `t` from leaf ops (constants, splats, ranges, params)."""
        e, shape = elem_type(t), shape_of(t)
        if not shape:
            if e == i32 and self.n is not None and self.draw(st.integers(0, 3)) == 0:
                return self.draw(
                    st.sampled_from([self.n, self.add(self.b.op1("program_id", [], i32, axis=0))])
                )
            return self.add(self.b.constant(self.const_value(e), t))
        how = self.draw(st.sampled_from(["splat", "constant", "range"]))
        if how == "range" and e == i32 and len(shape) == 1:
            return self.add(self.b.make_range(0, shape[0]))
        if how == "constant":
            return self.add(self.b.constant(self.const_value(e), t))
        return self.add(self.b.splat(self.pick(e), shape))

    def const_value(self, e: ScalarType) -> int | float:
        if e.is_bool:
            return self.draw(st.integers(0, 1))
        if e.is_float:
            return self.draw(
                st.one_of(st.integers(-4, 4).map(float), st.floats(width=32 if e.bits >= 32 else 16))
            )
        lo, hi = (0, 2**e.bits - 1) if e.is_unsigned else (-(2 ** (e.bits - 1)), 2 ** (e.bits - 1) - 1)
        return self.draw(st.one_of(st.integers(-3, 8), st.integers(lo, hi)))

    # ---- statements
    def statements(self, count: int) -> None:
        for _ in range(count):
            if self.budget <= 0:
                return
            self.budget -= 1
            kind = self.draw(st.sampled_from(STATEMENTS))
            if kind in ("load", "store", "atomic", "cas") and not self.memory:
                kind = "binary"
            if kind in ("for", "if", "while", "call") and self.depth >= 2:
                kind = "unary"
            getattr(self, "s_" + kind)()

    def s_binary(self) -> None:
        t = self.rand_type()
        e = elem_type(t)
        if e.is_float:
            names = ["add", "sub", "mul", "div", "rem", "maximum", "minimum", "pow", "atan2"]
        else:
            names = [
                "add",
                "sub",
                "mul",
                "div",
                "rem",
                "and",
                "or",
                "xor",
                "shl",
                "shr",
                "maximum",
                "minimum",
            ]
        name = self.draw(st.sampled_from(names))
        attrs = (
            {"propagate_nan": self.draw(st.booleans())}
            if name in ("maximum", "minimum") and self.draw(st.booleans())
            else {}
        )
        self.add(self.b.binary(name, self.pick(t), self.pick(t), **attrs))

    def s_unary(self) -> None:
        t = self.rand_type()
        names = [*MATH_UNARY, "neg", "abs"] if elem_type(t).is_float else ["neg", "abs"]
        self.add(self.b.unary(self.draw(st.sampled_from(names)), self.pick(t)))

    def s_fma(self) -> None:
        t = self.rand_type(elems=(f16, bf16, f32))
        self.add(self.b.op1("fma", [self.pick(t), self.pick(t), self.pick(t)], t))

    def s_cmp(self) -> None:
        t = self.rand_type()
        pred = self.draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]))
        self.add(self.b.cmp(pred, self.pick(t), self.pick(t)))

    def s_select(self) -> None:
        t = self.rand_type()
        cshape = self.draw(st.sampled_from([(), shape_of(t)]))
        self.add(self.b.select(self.pick(make_type(cshape, i1)), self.pick(t), self.pick(t)))

    def s_cast(self) -> None:
        x = self.any_value()
        self.add(self.b.cast(x, self.draw(st.sampled_from(ELEMS))))

    def s_bitcast(self) -> None:
        x = self.any_value(lambda t: elem_type(t).name in BITCAST_PARTNERS)
        dst = self.draw(st.sampled_from(BITCAST_PARTNERS[elem_type(x.type).name]))
        self.add(self.b.op1("bitcast", [x], with_elem(x.type, dst)))

    def s_shape(self) -> None:
        x = self.any_value(lambda t: isinstance(t, TileType) and t.rank <= 2)
        s = shape_of(x.type)
        how = self.draw(st.sampled_from(["expand_dims", "broadcast", "reshape", "trans"]))
        if how == "expand_dims":
            self.add(self.b.expand_dims(x, self.draw(st.integers(0, len(s)))))
        elif how == "broadcast":
            if 1 not in s:
                x = self.add(self.b.expand_dims(x, self.draw(st.integers(0, len(s)))))
                s = shape_of(x.type)
            target = tuple(self.draw(st.sampled_from([1, 2, 4])) if d == 1 else d for d in s)
            self.add(self.b.broadcast(x, target))
        elif how == "reshape":
            shapes = [t for t in _factorings(int(np.prod(s))) if t != s]
            self.add(self.b.reshape(x, self.draw(st.sampled_from(shapes))))
        else:
            order = list(self.draw(st.permutations(range(len(s)))))
            t = TileType(tuple(s[i] for i in order), elem_type(x.type))
            self.add(self.b.op1("trans", [x], t, order=order))

    def s_reduce(self) -> None:
        x = self.any_value(lambda t: isinstance(t, TileType))
        e = elem_type(x.type)
        kinds = [k for k in REDUCE_KINDS if not (e.is_float and k in ("and", "or", "xor"))]
        kind, axis = self.draw(st.sampled_from(kinds)), self.draw(st.integers(0, x.type.rank - 1))
        s = list(x.type.shape)
        del s[axis]
        rt = make_type(tuple(s), i32 if kind.startswith("arg") else e)
        attrs = {"propagate_nan": True} if kind in ("max", "min") and self.draw(st.booleans()) else {}
        self.add(self.b.op1("reduce", [x], rt, kind=kind, axis=axis, **attrs))

    def s_scan(self) -> None:
        x = self.any_value(lambda t: isinstance(t, TileType))
        attrs = {"reverse": True} if self.draw(st.booleans()) else {}
        kind, axis = self.draw(st.sampled_from(SCAN_KINDS)), self.draw(st.integers(0, x.type.rank - 1))
        self.add(self.b.op1("scan", [x], x.type, kind=kind, axis=axis, **attrs))

    def s_reduce_with(self, name: str = "reduce_with") -> None:
        x = self.any_value(lambda t: isinstance(t, TileType))
        shape = x.type.shape
        others = [
            self.pick(TileType(shape, self.draw(st.sampled_from(ELEMS))))
            for _ in range(self.draw(st.integers(0, 1)))
        ]
        operands = [x, *others]
        elems = [elem_type(v.type) for v in operands]
        axis = self.draw(st.integers(0, len(shape) - 1))
        attrs: dict = {"axis": axis}
        if name == "scan_with":
            types = [v.type for v in operands]
            if self.draw(st.booleans()):
                attrs["reverse"] = True
        else:
            rest = tuple(d for i, d in enumerate(shape) if i != axis)
            types = [make_type(rest, e) for e in elems]
        op = self.b.create(name, operands, types, attrs, [self.combiner(elems)])
        for r in op.results:
            self.add(r)

    def s_scan_with(self) -> None:
        self.s_reduce_with("scan_with")

    def combiner(self, elems: list) -> Region:
        """Straight-line scalar code over (lhs..., rhs...) yielding one element per operand."""
        block = Block([*elems, *elems])
        saved = self.b.block, self.b.index
        self.b.block, self.b.index = block, None
        self.frames.append(list(block.args))
        self.combiner_ops(elems, self.draw(st.integers(0, 4)))
        self.b.create("yield", [self.pick(e) for e in elems], [])
        self.frames.pop()
        self.b.block, self.b.index = saved
        return Region(block)

    def combiner_ops(self, elems: list, count: int) -> None:
        for _ in range(count):
            e = self.draw(st.sampled_from(elems))
            kind = self.draw(st.sampled_from(COMBINER_STATEMENTS))
            if kind == "binary":
                names = ["add", "sub", "mul", "maximum", "minimum"] + (
                    [] if e.is_float else ["and", "or", "xor"]
                )
                self.add(self.b.binary(self.draw(st.sampled_from(names)), self.pick(e), self.pick(e)))
            elif kind == "cmp_select":
                pred = self.draw(st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]))
                c = self.add(self.b.cmp(pred, self.pick(e), self.pick(e)))
                self.add(self.b.select(c, self.pick(e), self.pick(e)))
            elif kind == "cast":
                self.add(self.b.cast(self.pick(self.draw(st.sampled_from(elems))), e))
            else:  # an if whose branches compute one element each
                c = self.add(self.b.cmp("lt", self.pick(e), self.pick(e)))
                branches = []
                for _ in range(2):
                    blk = Block()
                    with self.b.at_end(blk):
                        self.frames.append([])
                        self.combiner_ops([e], self.draw(st.integers(0, 1)))
                        self.b.create("yield", [self.pick(e)], [])
                        self.frames.pop()
                    branches.append(Region(blk))
                self.add(self.b.create("if", [c], [e], regions=branches).results[0])

    def s_dot(self) -> None:
        e = self.draw(st.sampled_from([f16, bf16, f32]))
        a, b = self.pick(TileType((2, 4), e)), self.pick(TileType((4, 2), e))
        acc = self.pick(TileType((2, 2), f32))
        attrs = {"input_precision": "tf32"} if e == f32 and self.draw(st.booleans()) else {}
        self.add(self.b.op1("dot", [a, b, acc], acc.type, **attrs))

    # ---- memory: offsets are masked to [0, BUF) or wrapped into it with `& (BUF - 1)`
    def address(self, shape: tuple[int, ...], masked: bool) -> tuple[Value, Value | None, ScalarType]:
        p = self.draw(st.sampled_from(self.ptrs))
        off = self.pick(make_type(shape, i32))
        mask = None
        if masked:
            lo = self.b.cmp("ge", off, self.b.constant(0, off.type))
            hi = self.b.cmp("lt", off, self.b.constant(BUF, off.type))
            mask = self.b.binary("and", lo, hi)
        else:
            off = self.b.binary("and", off, self.b.constant(BUF - 1, off.type))
        base = self.b.splat(p, shape) if shape else p
        return self.b.op1("addptr", [base, off], base.type), mask, p.type.pointee

    def s_load(self) -> None:
        shape = self.draw(st.sampled_from(SHAPES))
        masked = self.draw(st.booleans())
        ptr, mask, e = self.address(shape, masked)
        operands = [ptr] if mask is None else [ptr, mask]
        if mask is not None and self.draw(st.booleans()):
            operands.append(self.pick(make_type(shape, e)))
        self.add(self.b.op1("load", operands, make_type(shape, e)))

    def s_store(self) -> None:
        shape = self.draw(st.sampled_from(SHAPES))
        ptr, mask, e = self.address(shape, self.draw(st.booleans()))
        self.b.create(
            "store", [ptr, self.pick(make_type(shape, e))] + ([mask] if mask is not None else []), []
        )

    def s_atomic(self) -> None:
        shape = self.draw(st.sampled_from(SHAPES))
        ptr, mask, e = self.address(shape, self.draw(st.booleans()))
        if e.is_bool or (e.is_float and e != f32):
            return self.s_store()
        kinds = ["add", "max", "min", "xchg"] + ([] if e.is_float else ["and", "or", "xor"])
        val = self.pick(make_type(shape, e))
        operands = [ptr, val] + ([mask] if mask is not None else [])
        self.add(self.b.op1("atomic_rmw", operands, val.type, kind=self.draw(st.sampled_from(kinds))))

    def s_cas(self) -> None:
        shape = self.draw(st.sampled_from(SHAPES))
        ptr, _, e = self.address(shape, masked=False)
        t = make_type(shape, e)
        self.add(self.b.op1("atomic_cas", [ptr, self.pick(t), self.pick(t)], t))

    # ---- regions
    def region(self, arg_types: list[Type], yield_types: list[Type], term: str = "yield") -> Region:
        block = Block(arg_types)
        saved = self.b.block, self.b.index
        self.b.block, self.b.index = block, None
        self.frames.append(list(block.args))
        self.depth += 1
        self.statements(self.draw(st.integers(0, 3)))
        self.b.create(term, [self.pick(t) for t in yield_types], [])
        self.depth -= 1
        self.frames.pop()
        self.b.block, self.b.index = saved
        return Region(block)

    def carried_types(self) -> list[Type]:
        return [self.rand_type() for _ in range(self.draw(st.integers(0, 2)))]

    def s_for(self) -> None:
        ty = self.draw(st.sampled_from([i32, i64]))
        down = self.draw(st.booleans())
        lb = self.b.constant(3 if down else self.draw(st.integers(0, 2)), ty)
        if not down and ty == i32 and self.n is not None and self.draw(st.booleans()):
            ub = self.b.binary("minimum", self.n, self.b.constant(3, ty))  # a runtime bound
        else:
            ub = self.b.constant(self.draw(st.integers(-1, 0) if down else st.integers(0, 4)), ty)
        step = self.b.constant(self.draw(st.integers(-2, -1) if down else st.integers(1, 2)), ty)
        types = self.carried_types()
        inits = [self.pick(t) for t in types]
        body = self.region([ty, *types], types)
        op = self.b.create("for", [lb, ub, step, *inits], types, regions=[body])
        for r in op.results:
            self.add(r)

    def s_if(self) -> None:
        cond = self.pick(i1)
        types = self.carried_types()
        op = self.b.create("if", [cond], types, regions=[self.region([], types), self.region([], types)])
        for r in op.results:
            self.add(r)

    def s_while(self) -> None:
        """A counted while: the carried counter starts at 0 and the after-region adds 1 (up to 3 trips)."""
        types = self.carried_types()
        inits = [self.b.constant(0, i32)] + [self.pick(t) for t in types]
        limit = self.b.constant(self.draw(st.integers(0, 3)), i32)
        before = Block([i32, *types])
        with self.b.at_end(before):
            more = self.b.cmp("lt", before.args[0], limit)
            self.b.create("condition", [more, *before.args], [])
        after = Block([i32, *types])
        saved = self.b.block, self.b.index
        self.b.block, self.b.index = after, None
        self.frames.append(list(after.args[1:]))
        self.depth += 1
        self.statements(self.draw(st.integers(0, 3)))
        nxt = self.b.binary("add", after.args[0], self.b.constant(1, i32))
        self.b.create("yield", [nxt] + [self.pick(t) for t in types], [])
        self.depth -= 1
        self.frames.pop()
        self.b.block, self.b.index = saved
        op = self.b.create("while", inits, [i32, *types], regions=[Region(before), Region(after)])
        for r in op.results[1:]:
            self.add(r)

    def s_call(self) -> None:
        if not self.helpers or self.draw(st.booleans()):
            self.helpers.append(self.helper(f"h{next(self.names)}"))
        f = self.draw(st.sampled_from(self.helpers))
        op = self.b.create("call", [self.pick(p.type) for p in f.params], f.result_types, {"callee": f.name})
        for r in op.results:
            self.add(r)

    def helper(self, name: str) -> Function:
        params = [Param(f"a{i}", self.rand_type()) for i in range(self.draw(st.integers(0, 3)))]
        results = [self.rand_type() for _ in range(self.draw(st.integers(1, 2)))]
        f = Function(name, params, results)
        saved = (self.b.block, self.b.index, self.frames, self.memory, self.n, self.depth)
        self.b.block, self.b.index, self.frames, self.memory, self.n = (
            f.body.block,
            None,
            [list(f.args)],
            False,
            None,
        )
        self.depth += 1
        self.statements(self.draw(st.integers(0, 3)))
        self.b.create("return", [self.pick(t) for t in results], [])
        self.b.block, self.b.index, self.frames, self.memory, self.n, self.depth = saved
        return f

    # ---- the kernel
    def kernel(self) -> Module:
        elems = self.draw(st.lists(st.sampled_from(ELEMS), min_size=1, max_size=3, unique=True))
        params = [Param(f"p{i}", PointerType(e)) for i, e in enumerate(elems)] + [Param("n", i32)]
        f = Function("k", params, [], kernel=True)
        self.ptrs, self.n = f.args[:-1], f.args[-1]
        self.b.block, self.frames = f.body.block, [[self.n]]
        self.statements(self.budget)
        self.budget = 2**30
        self.final_stores()
        self.b.create("return", [], [])
        return Module([*self.helpers, f])

    def final_stores(self) -> None:
        """Store a tile into each buffer at [pid*8, pid*8+8): every kernel has an observable effect."""
        pid = self.b.op1("program_id", [], i32, axis=0)
        offs = self.b.binary(
            "add",
            self.b.make_range(0, 8),
            self.b.splat(self.b.binary("mul", pid, self.b.constant(8, i32)), (8,)),
        )
        for p in self.ptrs:
            val = self.pick(TileType((8,), p.type.pointee))
            self.b.create(
                "store",
                [self.b.op1("addptr", [self.b.splat(p, (8,)), offs], TileType((8,), p.type)), val],
                [],
            )


def _factorings(n: int) -> list[tuple[int, ...]]:
    out = []
    for rank in (1, 2, 3):
        for dims in itertools.product([1, 2, 4, 8], repeat=rank):
            if int(np.prod(dims)) == n:
                out.append(dims)
    return out


@st.composite
def modules(draw, max_stmts: int = 12) -> Module:
    """A strategy of verified modules (see the module docstring)."""
    m = _Gen(draw, max_stmts).kernel()
    verify_module(m)
    return m


def kernel_args(module: Module, rng: np.random.Generator) -> list:
    """Random arguments for `@k`: a BUF-element array per pointer parameter, and %n in [0, BUF]."""
    f = module.get("k")
    assert f is not None
    args: list = []
    for p in f.params:
        if not isinstance(p.type, PointerType):
            args.append(int(rng.integers(0, BUF + 1)))
            continue
        e = p.type.pointee
        if e.is_bool:
            args.append(rng.integers(0, 2, BUF).astype(np.bool_))
        elif e.name == "bf16":
            args.append((rng.standard_normal(BUF).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))
        elif e.is_float:
            args.append((rng.standard_normal(BUF) * 4).astype(e.np_dtype))
        else:
            info = np.iinfo(e.np_dtype)
            small = rng.integers(-8, 9, BUF) if e.is_signed else rng.integers(0, 17, BUF)
            wide = rng.integers(info.min, info.max, BUF, dtype=e.np_dtype, endpoint=True)
            args.append(np.where(rng.random(BUF) < 0.7, small, wide).astype(e.np_dtype))
    return args

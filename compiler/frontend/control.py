"""The statement half of the AST visitor: assignments, constexpr-if (pruned), runtime if/for/while
lowered to IR regions with iter args and yields, static_range unrolling, returns and early returns.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from ..errors import BudgetExceededError, CompileError, UnsupportedSyntaxError
from ..ir import Block, Operation, Region
from ..ir.types import ScalarType, Type, elem_type, i1, make_type, shape_of
from .codegen import Builtin, ExprGen, QualName, is_numberlike, wrap_internal
from .library import device_assert
from .reader import is_constexpr_annotation
from .semantic import Aggregate, Tensor, describe, is_const, is_number
from .types import int_promote, literal_type, promote_weak

_UNSUPPORTED_STMTS = {
    "Break": "break is not supported in tile kernels (put the exit test in a while condition)",
    "Continue": "continue is not supported in tile kernels (guard the rest of the body with an if)",
    "With": "`with` statements are not supported in kernels", "AsyncWith": "`async with` is not supported",
    "Try": "try/except is not supported in kernels", "TryStar": "try/except* is not supported in kernels",
    "Raise": "raise is not supported in kernels (use tl.device_assert)",
    "FunctionDef": "nested function definitions are not supported (define helpers at module level with @triton.jit)",
    "AsyncFunctionDef": "async functions are not supported", "ClassDef": "classes are not supported in kernels",
    "Import": "imports inside kernels are not supported", "ImportFrom": "imports inside kernels are not supported",
    "Global": "global is not supported in kernels", "Nonlocal": "nonlocal is not supported in kernels",
    "Delete": "del is not supported in kernels", "Match": "match statements are not supported in kernels",
    "AsyncFor": "async for is not supported",
}


def assigned_names(stmts: list[ast.stmt]) -> list[str]:
    """Names stored anywhere in `stmts`, in first-seen order."""
    seen: dict[str, None] = {}
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                seen.setdefault(n.id, None)
    return list(seen)


def contains_return(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


class StmtGen(ExprGen):
    """Visits a function body. `tail_ok` says the current block runs to the function's end, so a bare
    `return` may end it (early returns under a runtime if become if/else over the rest of the body)."""

    def __init__(self, ctx, scope: dict[str, Any]):
        super().__init__(ctx, scope)
        self.returned = False
        self.return_value: Any = None
        self.cf_depth = 0
        self.tail_ok = True
        self.frame_done: str | None = None  # in the body of a runtime loop that returns: its hidden done flag
        self.frames = 0

    # ---- blocks and dispatch
    def block(self, stmts: list[ast.stmt]) -> None:
        """Run `stmts` as a work list. A compile-time construct (a constexpr if, an unrolled loop) splices its
        statements in front of the rest rather than visiting them in a nested call, so a runtime if with an
        early return anywhere inside sees the whole rest of the body as its continuation (issue 21: a return
        under a constexpr if used to end the function for every program)."""
        work: list[Any] = list(stmts)
        work.reverse()  # popped from the end
        while work and not self.returned:
            s = work.pop()
            if isinstance(s, _Bind):
                self.bind(s.target, s.value)
                continue
            if isinstance(s, ast.If):
                self.located(s, self.stmt_If, s, work)
                continue
            if isinstance(s, ast.For):
                unrolled = self.located(s, self.stmt_For, s, work)
                if unrolled is not None:
                    work.extend(reversed(unrolled))
                continue
            if isinstance(s, ast.While):
                self.located(s, self.stmt_While, s, work)
                continue
            self.stmt(s)

    def stmt(self, node: ast.stmt) -> None:
        name = type(node).__name__
        if name in _UNSUPPORTED_STMTS:
            self.ctx.at(node)
            raise self.error(_UNSUPPORTED_STMTS[name], UnsupportedSyntaxError)
        method = getattr(self, "stmt_" + name, None)
        if method is None:
            self.ctx.at(node)
            raise self.error(f"{name} statements are not supported in kernels", UnsupportedSyntaxError)
        self.located(node, method, node)

    def located(self, node: ast.AST, fn, *args: Any) -> Any:
        saved = self.ctx.node
        self.ctx.at(node)
        try:
            return fn(*args)
        except CompileError:
            raise
        except Exception as exc:  # noqa: BLE001 - located at the innermost statement
            raise wrap_internal(self.ctx, node, exc) from None
        finally:
            self.ctx.node = saved
            if saved is not None:  # an op made after a nested statement (an if, a for) is located at its own
                self.ctx.at(saved)

    # ---- simple statements
    def stmt_Pass(self, node: ast.Pass) -> None:
        return None

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring or a string used as a comment
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.as_assigned(self.expr(node.value))
        for t in node.targets:
            self.bind(t, value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None:
            return
        value = self.expr(node.value)
        if not is_constexpr_annotation(node.annotation, self.ctx.mod):
            value = self.as_assigned(value)
        self.bind(node.target, value)

    def as_assigned(self, value: Any) -> Any:
        """What a name holds after `name = value`: as in Triton, a Python number becomes a scalar tensor of its
        literal type (i32, i64, f32, i1), so later arithmetic on the name is the tensor's (`t = 3; t // -4` is
        0, C's division, not Python's -1); only `name: tl.constexpr = value` keeps a compile-time number."""
        if is_number(value):
            return self.sem.to_tensor(value)
        if isinstance(value, tuple):
            return tuple(self.sem.to_tensor(v) if is_number(v) else v for v in value)
        return value

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error("only names can be updated with an augmented assignment (use tl.store for memory)",
                             UnsupportedSyntaxError)
        cur = self.lookup_name(node.target.id)
        self.scope[node.target.id] = self.as_assigned(self.sem.binop(node.op, cur, self.expr(node.value)))

    def bind(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.scope[target.id] = value
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (tuple, list)) or len(value) != len(target.elts):
                n = len(value) if isinstance(value, (tuple, list)) else 1
                raise self.error(f"cannot unpack {n} value(s) into {len(target.elts)} names")
            for t, v in zip(target.elts, value, strict=False):
                self.bind(t, v)
            return
        raise self.error("only names can be assigned in kernels (use tl.store to write memory)",
                         UnsupportedSyntaxError)

    def stmt_Assert(self, node: ast.Assert) -> None:
        msg = self.expr(node.msg) if node.msg is not None else ""
        device_assert(self.sem, self.expr(node.test), msg if is_const(msg) else "")

    def stmt_Return(self, node: ast.Return) -> None:
        if self.frame_done is not None:  # leave the loop: set its done flag and end this path of the iteration
            if node.value is not None:
                raise self.error("a return with a value inside a runtime loop is not supported (carry the value "
                                 "out of the loop and return it after)", UnsupportedSyntaxError)
            self.scope[self.frame_done] = True
            self.returned = True
            return
        if self.cf_depth > 0 and not self.tail_ok:
            raise self.error("return inside a loop is not supported (guard the rest of the body with an if)",
                             UnsupportedSyntaxError)
        self.return_value = self.expr(node.value) if node.value is not None else None
        self.returned = True

    # ---- if
    def stmt_If(self, node: ast.If, work: list) -> None:
        """`work` is the rest of the body, reversed (the work list of `block`): a constexpr if puts its chosen
        branch in front of it; a runtime if with a return takes all of it into both of its branches."""
        cond = self.sem.to_bool(self.expr(node.test))
        if is_const(cond):
            work.extend(reversed(node.body if cond else node.orelse))
            return
        if cond.shape:
            raise self.error(f"an if condition must be a scalar, got a tile of shape {list(cond.shape)} "
                             "(use tl.where for tiles)")
        if contains_return(node.body) or contains_return(node.orelse):
            if not self.tail_ok:
                self.ctx.at(next(n for s in node.body + node.orelse for n in ast.walk(s) if isinstance(n, ast.Return)))
                raise self.error("return inside a loop is not supported (guard the rest of the body with an if)",
                                 UnsupportedSyntaxError)
            rest = work[::-1]
            work.clear()
            if self.frame_done is not None:  # in a returning loop's body: the rest is the rest of this iteration
                self.runtime_if(cond, node.body + rest, node.orelse + rest, tail=True)
            else:
                self.tail_if(cond, node.body + rest, node.orelse + rest)
            return
        self.runtime_if(cond, node.body, node.orelse)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        """`a if c else b` under a runtime scalar `c` evaluates only the arm taken, as Python and Triton do (an
        if op yielding the value); before, both arms ran and tl.where picked, so a load or an atomic in the arm
        not taken still happened. A tile condition stays an elementwise select."""
        c = self.sem.to_bool(self.expr(node.test))
        if is_const(c):
            return self.expr(node.body) if c else self.expr(node.orelse)
        if c.shape:
            return self.sem.where(c, self.expr(node.body), self.expr(node.orelse))
        then_blk, else_blk = Block(), Block()
        with self.b.at_end(then_blk):
            a = self.expr(node.body)
        with self.b.at_end(else_blk):
            b = self.expr(node.orelse)
        if not (is_numberlike(a) and is_numberlike(b)):
            raise self.error(f"the arms of a conditional expression under a runtime condition must be tensors or "
                             f"numbers, not {describe(a)} / {describe(b)}")
        t = self.merge_type("the conditional expression", a, b)
        return self.close_if(c, (then_blk, [a]), (else_blk, [b]), [t])[0]

    def branch(self, stmts: list[ast.stmt], before: dict, tail: bool) -> tuple[Block, dict, Any]:
        """Build one branch in a new block; returns the block, its final scope and what it returned."""
        blk = Block()
        saved = (self.scope, self.returned, self.tail_ok, self.return_value)
        self.scope, self.tail_ok, self.return_value = dict(before), tail, None
        self.cf_depth += 1
        try:
            with self.b.at_end(blk):
                self.block(stmts)
            return blk, self.scope, self.return_value
        finally:
            self.cf_depth -= 1
            self.scope, self.returned, self.tail_ok, self.return_value = saved

    def runtime_if(self, cond: Tensor, body: list, orelse: list, tail: bool = False) -> None:
        before = dict(self.scope)
        then_blk, then_scope, _ = self.branch(body, before, tail)
        else_blk, else_scope, _ = self.branch(orelse, before, tail)
        merged: list[tuple[Slot, Type]] = []
        after = dict(before)
        for name in [n for n in then_scope if n in else_scope]:
            a, b = then_scope[name], else_scope[name]
            if a is before.get(name, _MISSING) and b is before.get(name, _MISSING):
                continue
            if _same_const(a, b):
                after[name] = a
                continue
            if isinstance(a, Aggregate) or isinstance(b, Aggregate):
                self.check_aggregates(name, a, b, "the branches of a runtime if")
                after[name] = a
                for i, (x, y) in enumerate(zip(a.leaves(), b.leaves(), strict=True)):
                    if x is not y and not _same_const(x, y):
                        merged.append(((name, i), self.merge_type(name, x, y)))
                continue
            if not (is_numberlike(a) and is_numberlike(b)):
                raise self.error(f"'{name}' holds compile-time values that differ between the branches of a runtime "
                                 f"if ({describe(a)} / {describe(b)})")
            merged.append(((name, None), self.merge_type(name, a, b)))
        results = self.close_if(cond, (then_blk, [_get(then_scope, s) for s, _ in merged]),
                                (else_blk, [_get(else_scope, s) for s, _ in merged]), [t for _, t in merged])
        self.scope = _put(after, [s for s, _ in merged], results)

    def check_aggregates(self, name: str, a: Any, b: Any, where: str) -> None:
        if not (isinstance(a, Aggregate) and isinstance(b, Aggregate) and a.static_key() == b.static_key()):
            raise self.error(f"'{name}' must hold the same kind of block pointer across {where} "
                             f"({describe(a)} / {describe(b)})")

    def tail_if(self, cond: Tensor, body: list, orelse: list) -> None:
        """An if whose branches both run to the end of the function (an early return): the if yields the
        returned values, which become the function's."""
        before = dict(self.scope)
        then_blk, _, then_ret = self.branch(body, before, True)
        else_blk, _, else_ret = self.branch(orelse, before, True)
        shapes = {_ret_structure(r) for r in (then_ret, else_ret)}
        if len(shapes) > 1:
            raise self.error("the branches of this if return different numbers of values "
                             f"({describe(then_ret)} / {describe(else_ret)})")
        a_vals, b_vals = _ret_items(then_ret), _ret_items(else_ret)
        types = []
        for i, (a, b) in enumerate(zip(a_vals, b_vals, strict=True)):
            if not (is_numberlike(a) and is_numberlike(b)):
                raise self.error(f"functions can return tensors and numbers, not {describe(a)} / {describe(b)}")
            types.append(self.merge_type(f"returned value {i}", a, b))
        results = self.close_if(cond, (then_blk, a_vals), (else_blk, b_vals), types)
        self.return_value = tuple(results) if isinstance(then_ret, tuple) else (results[0] if results else None)
        self.returned = True

    def close_if(self, cond: Tensor, then: tuple[Block, list], orelse: tuple[Block, list], types: list[Type]) -> list:
        """Terminate both branch blocks with yields of `types` and insert the if op; returns its results."""
        for blk, vals in (then, orelse):
            with self.b.at_end(blk):
                self.b.create("yield", [self.coerce(v, t).value for v, t in zip(vals, types, strict=True)], [])
        op = self.b.insert(Operation("if", [cond.value], list(types), regions=[Region(then[0]), Region(orelse[0])]))
        return [Tensor(r) for r in op.results]

    # ---- type merging for yields
    def merge_type(self, name: str, a: Any, b: Any) -> Type:
        if isinstance(a, Tensor) and isinstance(b, Tensor):
            if a.type == b.type:
                return a.type
            if a.elem != b.elem:
                raise self.error(f"'{name}' changes type: {describe(a)} vs {describe(b)} (cast one with .to())")
            return make_type(self.sem.broadcast_shape(a.shape, b.shape), a.elem)
        if isinstance(a, Tensor) or isinstance(b, Tensor):
            t, w = (a, b) if isinstance(a, Tensor) else (b, a)
            if isinstance(t.elem, ScalarType) and promote_weak(t.elem, w) == t.elem:
                return t.type
            raise self.error(f"'{name}' changes type: {describe(a)} vs {describe(b)}")
        ta, tb = literal_type(a), literal_type(b)
        if ta is None or tb is None:
            raise self.error(f"'{name}': integer constant does not fit in 64 bits")
        if ta.is_float or tb.is_float:
            return ScalarType("f32")
        return int_promote(ta, tb)

    def coerce(self, x: Any, t: Type) -> Tensor:
        if not isinstance(x, Tensor):
            return self.sem.const(x, elem_type(t), shape_of(t))
        if x.elem != elem_type(t):
            x = self.sem.cast(x, elem_type(t))
        return self.sem.broadcast_to(x, shape_of(t))

    # ---- loops
    def stmt_For(self, node: ast.For, work: list | None = None) -> list | None:
        """A runtime loop is built here; an unrolled one (static_range, a constant tuple) returns its statements
        for `block` to run in place of the loop."""
        node = without_continue(node)
        if node.orelse:
            raise self.error("for/else is not supported", UnsupportedSyntaxError)
        it = node.iter
        if isinstance(it, ast.Call):
            fn = self.expr(it.func)
            args, kwargs = self.call_args(it)
            if fn == Builtin("range") or fn == QualName("triton.language.range"):
                bounds = self.range_args(args, kwargs, static=False)
                if work is not None and contains_return(node.body):
                    return self.returning_loop(node, work, bounds)
                stages = kwargs.get("num_stages")  # tl.range's request to pipeline the loop (gpu-prefetch)
                return self.runtime_for(node, *bounds, stages=stages if type(stages) is int else None)
            if fn == QualName("triton.language.static_range"):
                return self.unroll(node, range(*self.range_args(args, kwargs, static=True)))
            seq = None
        else:
            seq = self.expr(it)
        if isinstance(seq, (tuple, list)):
            return self.unroll(node, list(seq))
        raise self.error("for loops iterate over range(...), tl.range(...), tl.static_range(...) or a constant tuple",
                         UnsupportedSyntaxError)

    def range_args(self, args: list, kwargs: dict, static: bool) -> tuple:
        extra = set(kwargs) - {"num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten",
                               "warp_specialize", "step", "arg1", "arg2", "arg3"}
        if extra or not 1 <= len(args) <= 3:
            raise self.error("range takes (stop), (start, stop) or (start, stop, step)")
        if "step" in kwargs:
            args = [*args, kwargs["step"]] if len(args) == 2 else args
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        for v in (start, stop, step):
            if isinstance(v, Tensor) and (v.shape or not (isinstance(v.elem, ScalarType) and v.elem.is_int)):
                raise self.error(f"loop bounds must be integer scalars, got {describe(v)}")
            if not isinstance(v, Tensor) and (isinstance(v, bool) or not isinstance(v, int)):
                raise self.error(f"loop bounds must be integers, got {describe(v)}")
            if static and isinstance(v, Tensor):
                raise self.error("tl.static_range bounds must be compile-time constants")
        if is_const(step) and step == 0:
            raise self.error("range step must not be zero")
        return start, stop, step

    def unroll(self, node: ast.For, seq: Any) -> list:
        n = len(seq)
        budget = self.ctx.budgets.max_unroll
        if n > budget or self.ctx.unrolled + n > budget:
            raise self.error(f"unrolling {n} iterations is over the budget of {budget} unrolled iterations",
                             BudgetExceededError)
        self.ctx.unrolled += n
        out: list = []
        for v in seq:
            out.append(_Bind(node.target, v))
            out.extend(node.body)
        return out

    def carried_slots(self, body: list[ast.stmt], exclude: str | None) -> list[Slot]:
        """The loop-carried values: (name, None) for a tensor or number, (name, i) for leaf i of an aggregate
        such as a block pointer (carried as its base pointer and offset/shape/stride scalars)."""
        out: list[Slot] = []
        for n in assigned_names(body):
            if n == exclude or n not in self.scope:
                continue
            v = self.scope[n]
            if isinstance(v, Aggregate):
                out.extend((n, i) for i in range(len(v.leaves())))
            elif is_numberlike(v):
                out.append((n, None))
        return out

    def check_unchanged(self, body_scope: dict, names: list[str], carried: list[Slot]) -> None:
        carried_names = {n for n, _ in carried}
        for n in names:
            if n in carried_names or n not in self.scope:
                continue
            if not _same_value(body_scope.get(n), self.scope[n]):
                raise self.error(f"'{n}' holds a compile-time value ({describe(self.scope[n])}) and cannot be "
                                 "reassigned inside a runtime loop")

    def loop_types(self, carried: list[Slot], forced: dict[Slot, Type]) -> list[Type]:
        types = []
        for s in carried:
            v = _get(self.scope, s)
            types.append(forced.get(s) or (v.type if isinstance(v, Tensor) else self.sem.materialize(v, s[0]).type))
        return types

    def body_yields(self, carried: list[Slot], types: list[Type], body_scope: dict, forced: dict, drop: list,
                    entry: list[Tensor]) -> bool:
        """Compare what the body leaves in each carried slot with its type; plan a retry if needed. A slot the
        body passes through unchanged (`entry` holds the block arguments) is dropped: it keeps its value."""
        ok = True
        for s, t, arg in zip(carried, types, entry, strict=True):
            n = s[0]
            whole, init_whole = body_scope.get(n), self.scope[n]
            if isinstance(init_whole, Aggregate):
                self.check_aggregates(n, init_whole, whole, "the iterations of a loop")
            elif not is_numberlike(whole):
                raise self.error(f"'{n}' is reassigned in the loop to {describe(whole)}, which cannot be carried")
            y, init = _get(body_scope, s), _get(self.scope, s)
            if _same_const(y, init) or y is arg:
                drop.append(s)
                ok = False
                continue
            start = init if not isinstance(init, Tensor) else _stand_in(t)
            want = self.merge_type(n, start, y)
            if want != t:
                forced[s] = want
                ok = False
        return ok

    def runtime_for(self, node: ast.For, start: Any, stop: Any, step: Any, stages: int | None = None) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.error("the target of a runtime loop must be a name", UnsupportedSyntaxError)
        bounds = [self.sem.to_tensor(v) for v in (start, stop, step)]
        bt = bounds[0].elem
        for b in bounds[1:]:
            bt = int_promote(bt, b.elem)
        if bt.is_bool:
            bt = ScalarType("i32")
        bounds = [self.sem.cast(b, bt) for b in bounds]
        target = node.target.id
        carried = self.carried_slots(node.body, target)
        forced: dict[Slot, Type] = {}
        for _attempt in range(6):
            types = self.loop_types(carried, forced)
            inits = [self.coerce(_get(self.scope, s), t) for s, t in zip(carried, types, strict=False)]
            blk = Block([bt, *types])
            entry = [Tensor(a) for a in blk.args[1:]]
            body_scope = _put(self.scope, carried, entry)
            body_scope[target] = Tensor(blk.args[0])
            blk, out = self.loop_body(blk, node.body, body_scope)
            self.check_unchanged(out, assigned_names(node.body), carried + [(target, None)])
            drop: list[Slot] = []
            if not self.body_yields(carried, types, out, forced, drop, entry):
                carried = [s for s in carried if s not in drop]
                continue
            with self.b.at_end(blk):
                self.b.create("yield", [self.coerce(_get(out, s), t).value for s, t in zip(carried, types, strict=False)],
                              [])
            operands = [b.value for b in bounds] + [v.value for v in inits]
            attrs = {"num_stages": stages} if stages is not None and stages >= 2 else None
            op = self.b.insert(Operation("for", operands, types, attrs, regions=[Region(blk)]))
            self.scope = _put(self.scope, carried, [Tensor(r) for r in op.results])
            return
        raise self.error("cannot settle the types of the loop-carried variables")

    def loop_body(self, blk: Block, body: list[ast.stmt], scope: dict) -> tuple[Block, dict]:
        saved = (self.scope, self.tail_ok)
        self.scope, self.tail_ok = scope, False
        self.cf_depth += 1
        try:
            with self.b.at_end(blk):
                self.block(body)
            return blk, self.scope
        finally:
            self.cf_depth -= 1
            self.scope, self.tail_ok = saved

    # ---- loops whose body returns
    def returning_loop(self, node: ast.For | ast.While, work: list, bounds: tuple | None) -> None:
        """A runtime for/while whose body returns (Python semantics, as Triton's interpreter runs it; Triton's
        compiler refuses it): a while loop carrying a hidden done flag (and, for a for loop, its induction
        variable). A return in the body sets the flag and ends that path of the iteration; the loop stops
        when the flag is set; after it, `if done: return` takes the rest of the body as its continuation."""
        k = self.frames
        done, iv, stop, step = f"$done{k}", f"$iv{k}", f"$stop{k}", f"$step{k}"
        self.scope[done] = False
        target = None
        forced: dict[Slot, Type] = {(done, None): i1}
        carried: list[Slot] = [(done, None)]
        if bounds is not None:
            if not isinstance(node.target, ast.Name):
                raise self.error("the target of a runtime loop must be a name", UnsupportedSyntaxError)
            target = node.target.id
            tensors = [self.sem.to_tensor(v) for v in bounds]
            bt = tensors[0].elem
            for b in tensors[1:]:
                bt = int_promote(bt, b.elem)
            bt = ScalarType("i32") if bt.is_bool else bt
            self.scope[iv] = self.sem.cast(tensors[0], bt)
            self.scope[stop] = self.sem.cast(tensors[1], bt)
            self.scope[step] = bounds[2] if is_const(bounds[2]) else self.sem.cast(tensors[2], bt)
            forced[(iv, None)] = bt
            carried.append((iv, None))
        carried += self.carried_slots(node.body, target)
        for _attempt in range(6):
            types = self.loop_types(carried, forced)
            inits = [self.coerce(_get(self.scope, s), t) for s, t in zip(carried, types, strict=False)]
            before = Block(list(types))
            cond_scope = _put(self.scope, carried, [Tensor(a) for a in before.args])
            with self.b.at_end(before):
                c = self.frame_condition(node, cond_scope, done, iv, stop, step)
                self.b.create("condition", [c.value, *before.args], [])
            after = Block(list(types))
            entry = [Tensor(a) for a in after.args]
            body_scope = _put(self.scope, carried, entry)
            if target is not None:
                body_scope[target] = body_scope[iv]
            after, out = self.frame_body(after, node.body, body_scope, done)
            if target is not None:
                with self.b.at_end(after):
                    out[iv] = self.sem.binop(ast.Add(), body_scope[iv], self.scope[step])
            self.check_unchanged(out, assigned_names(node.body), carried + [(target or "", None)])
            drop: list[Slot] = []
            if not self.body_yields(carried, types, out, forced, drop, entry):
                carried = [s for s in carried if s not in drop]
                continue
            self.close_while(carried, types, inits, before, after, out)
            work.append(_synth("if D:\n    return", node, D=done))
            return
        raise self.error("cannot settle the types of the loop-carried variables")

    def close_while(self, carried: list[Slot], types: list[Type], inits: list, before: Block, after: Block,
                    out: dict) -> None:
        """The loop's yield of its carried values, the `while` op itself, and the scope after it."""
        with self.b.at_end(after):
            self.b.create("yield", [self.coerce(_get(out, s), t).value for s, t in zip(carried, types, strict=False)],
                          [])
        op = self.b.insert(Operation("while", [v.value for v in inits], types, regions=[Region(before),
                                                                                        Region(after)]))
        self.scope = _put(self.scope, carried, [Tensor(r) for r in op.results])

    def frame_condition(self, node: ast.For | ast.While, scope: dict, done: str, iv: str, stop: str,
                        step: str) -> Tensor:
        """The returning loop's condition: not done, and (for) the induction variable within range / (while) the
        loop's own test, evaluated only while not done (it may have side effects, e.g. an atomic)."""
        saved = self.scope
        self.scope = scope
        try:
            if isinstance(node, ast.For):
                s = scope[step]
                test = "I < S" if is_const(s) and s > 0 else "I > S" if is_const(s) else \
                    "(T > 0 and I < S) or (T < 0 and I > S)"
                c = self.expr(_synth(f"not D and ({test})", node, D=done, I=iv, S=stop, T=step))
                return self.sem.to_tensor(self.sem.to_bool(c))
            d = scope[done]
            if is_const(d):
                return self.while_test(node) if not d else self.sem.to_tensor(False)
            then_blk, else_blk = Block(), Block()
            with self.b.at_end(then_blk):
                c = self.while_test(node)
            not_done = self.sem.to_tensor(self.expr(_synth("not D", node, D=done)))
            return self.close_if(not_done, (then_blk, [c]), (else_blk, [False]), [i1])[0]
        finally:
            self.scope = saved

    def while_test(self, node: ast.While) -> Tensor:
        c = self.sem.to_tensor(self.sem.to_bool(self.expr(node.test)))
        if c.shape or c.elem != i1:
            raise self.error(f"a while condition must be a scalar, got {describe(c)}")
        return c

    def frame_body(self, blk: Block, body: list[ast.stmt], scope: dict, done: str) -> tuple[Block, dict]:
        saved = (self.scope, self.tail_ok, self.returned, self.frame_done)
        self.scope, self.tail_ok, self.returned, self.frame_done = scope, True, False, done
        self.cf_depth += 1
        self.frames += 1
        try:
            with self.b.at_end(blk):
                self.block(body)
            return blk, self.scope
        finally:
            self.cf_depth -= 1
            self.frames -= 1
            self.scope, self.tail_ok, self.returned, self.frame_done = saved

    def stmt_While(self, node: ast.While, work: list | None = None) -> None:
        node = without_continue(node)
        if node.orelse:
            raise self.error("while/else is not supported", UnsupportedSyntaxError)
        if work is not None and contains_return(node.body):
            return self.returning_loop(node, work, None)
        carried = self.carried_slots(node.body, None)
        forced: dict[Slot, Type] = {}
        for _attempt in range(6):
            types = self.loop_types(carried, forced)
            inits = [self.coerce(_get(self.scope, s), t) for s, t in zip(carried, types, strict=False)]
            before = Block(list(types))
            cond_scope = _put(self.scope, carried, [Tensor(a) for a in before.args])
            saved = self.scope
            self.scope = cond_scope
            try:
                with self.b.at_end(before):
                    c = self.sem.to_tensor(self.sem.to_bool(self.expr(node.test)))
                    if c.shape or c.elem != i1:
                        raise self.error(f"a while condition must be a scalar, got {describe(c)}")
                    self.b.create("condition", [c.value, *before.args], [])
            finally:
                self.scope = saved
            after = Block(list(types))
            entry = [Tensor(a) for a in after.args]
            body_scope = _put(self.scope, carried, entry)
            after, out = self.loop_body(after, node.body, body_scope)
            self.check_unchanged(out, assigned_names(node.body), carried)
            drop: list[Slot] = []
            if not self.body_yields(carried, types, out, forced, drop, entry):
                carried = [s for s in carried if s not in drop]
                continue
            self.close_while(carried, types, inits, before, after, out)
            return
        raise self.error("cannot settle the types of the loop-carried variables")


class _Bind:
    """A work-list item of an unrolled loop: bind the loop target to this iteration's value."""

    __slots__ = ("target", "value")

    def __init__(self, target: ast.expr, value: Any):
        self.target, self.value = target, value


Slot = tuple[str, "int | None"]


def _synth(text: str, at: ast.AST, **names: str) -> Any:
    """A statement or expression made by the compiler (names may be hidden ones such as `$done0`), located at `at`."""
    tree = ast.parse(text).body[0]
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in names:
            n.id = names[n.id]
    if isinstance(tree, ast.Expr):
        tree = tree.value
    for n in ast.walk(tree):
        ast.copy_location(n, at)
        n.end_lineno, n.end_col_offset = getattr(at, "end_lineno", None), getattr(at, "end_col_offset", None)
    return tree  # a carried value: a name, or leaf i of the aggregate a name holds


def _get(scope: dict, slot: Slot) -> Any:
    name, i = slot
    v = scope.get(name)
    if i is None:
        return v
    return v.leaves()[i] if isinstance(v, Aggregate) else None


def _put(scope: dict, slots: list[Slot], values: list[Any]) -> dict:
    """A copy of `scope` with each slot set to its value (aggregates rebuilt around their new leaves)."""
    out = dict(scope)
    leaves: dict[str, list] = {}
    for (name, i), v in zip(slots, values, strict=True):
        if i is None:
            out[name] = v
            continue
        leaves.setdefault(name, out[name].leaves())[i] = v
    for name, ls in leaves.items():
        out[name] = out[name].with_leaves(ls)
    return out


def _same_value(a: Any, b: Any) -> bool:
    if a is b or _same_const(a, b):
        return True
    if isinstance(a, Aggregate) and isinstance(b, Aggregate) and a.static_key() == b.static_key():
        return all(_same_value(x, y) for x, y in zip(a.leaves(), b.leaves(), strict=True))
    return False


class _Missing:
    pass


_MISSING = _Missing()


def _ret_structure(ret: Any) -> Any:
    if ret is None:
        return None
    return len(ret) if isinstance(ret, (tuple, list)) else "one"


def _ret_items(ret: Any) -> list:
    if ret is None:
        return []
    return list(ret) if isinstance(ret, (tuple, list)) else [ret]


def _same_const(a: Any, b: Any) -> bool:
    return is_const(a) and is_const(b) and type(a) is type(b) and a == b


def _stand_in(t: Type) -> Tensor:
    """A Tensor of type `t` for merge_type, which only reads types."""
    from ..ir import Value

    return Tensor(Value(t, None, 0))


def without_continue(loop: ast.For | ast.While) -> ast.For | ast.While:
    """The loop with `continue` (of this loop, not of loops inside it) turned into ifs: the statements after
    an `if` that may continue move into both of its branches, and a `continue` drops what follows it. Each
    path through the body stays the path Python takes; the rest is copied once per such `if`."""
    if not any(_continues(s) for s in loop.body):
        return loop
    new = copy.copy(loop)
    new.body = _drop_continue(loop.body) or [ast.copy_location(ast.Pass(), loop)]
    return new


def _drop_continue(stmts: list[ast.stmt]) -> list[ast.stmt]:
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Continue):
            return stmts[:i]
        if isinstance(s, ast.If) and _continues(s):
            rest = stmts[i + 1:]
            branch = copy.copy(s)
            branch.body = _drop_continue(s.body + rest) or [ast.copy_location(ast.Pass(), s)]
            branch.orelse = _drop_continue(s.orelse + rest)
            return [*stmts[:i], branch]
    return stmts


def _continues(node: ast.AST) -> bool:
    """Whether `node` holds a `continue` of the loop around it (loops inside it keep their own)."""
    if isinstance(node, ast.Continue):
        return True
    if isinstance(node, (ast.For, ast.While, ast.AsyncFor, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return False
    return any(_continues(c) for c in ast.iter_child_nodes(node))

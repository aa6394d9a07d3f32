"""`sort` and `gather` rewritten into plain IR ops (reshape, select, cmp, sum reductions), for a target that
has no lowering of its own for them (the cpu target; cuda lowers both directly).

sort becomes the same bitonic network the op is defined by (the interpreter's `sort`): at each step the
axis is viewed as [blocks, 2, j], its two halves are picked out by a select and a sum over the size-2
axis in the elements' bit pattern (exact, so NaN payloads and -0.0 survive) and put back in order.
gather becomes a one-hot compare over the source axis and a sum, |index| x |source axis| elements of work:
refused past GATHER_ONEHOT_MAX elements.
"""

from __future__ import annotations

from ..errors import BudgetExceededError
from ..ir.builder import Builder
from ..ir.core import Block, Function, Module, Operation, Value, replace_all_uses
from ..ir.types import ScalarType, TileType, make_type

GATHER_ONEHOT_MAX = 1 << 16  # elements of the one-hot (index x source axis) tile a gather expands to
_BITS = {8: "i8", 16: "i16", 32: "i32", 64: "i64"}
_I32 = ScalarType("i32")


def expand_sort_gather(module: Module) -> None:
    """Rewrite every sort and gather in `module` in place."""
    for f in module.functions:
        _function(f)


def _function(f: Function) -> None:
    blocks: list[Block] = []
    for op in f.walk():
        for region in op.regions:
            blocks.append(region.block)
    blocks.append(f.body.block)
    for block in blocks:
        i = 0
        while i < len(block.ops):
            op = block.ops[i]
            if op.name not in ("sort", "gather"):
                i += 1
                continue
            b = Builder(block, i)
            b.loc = op.loc
            new = _Expand(b, op).run()
            block.ops.remove(op)
            replace_all_uses(f.body.block, op.results[0], new)
            i = b.index


class _Expand:
    def __init__(self, b: Builder, op: Operation) -> None:
        self.b, self.op = b, op

    def run(self) -> Value:
        op = self.op
        if op.name == "sort":
            return self._sort(op.operands[0], op.attrs["axis"], bool(op.attrs.get("descending", False)))
        return self._gather(*op.operands, op.attrs["axis"])

    # ---- helpers ---------------------------------------------------------------------------------

    def const(self, value: int, elem: ScalarType, shape: tuple[int, ...]) -> Value:
        return self.b.constant(value, make_type(shape, elem))

    def to_bits(self, v: Value) -> Value:
        e = v.type.elem
        if e.is_bool:
            return self.b.cast(v, ScalarType("i8"))
        if e.is_float:
            return self.b.op1("bitcast", [v], make_type(v.type.shape, ScalarType(_BITS[e.bits])))
        return v

    def from_bits(self, v: Value, e: ScalarType) -> Value:
        if e.is_bool:
            return self.b.cast(v, e)
        if e.is_float:
            return self.b.op1("bitcast", [v], make_type(v.type.shape, e))
        return v

    def along(self, n: int, axis: int, shape: tuple[int, ...]) -> Value:
        """arange(0, n) along `axis`, broadcast to `shape`."""
        r = self.b.make_range(0, n)
        for i in range(len(shape)):
            if i != axis:
                r = self.b.expand_dims(r, i)
        return self.b.broadcast(r, shape) if r.type.shape != shape else r

    def pick(self, bits: Value, axis: int, k: int) -> Value:
        """Element k of `axis` (a bit-domain tile), kept as a size-1 axis."""
        shape = bits.type.shape
        hit = self.b.cmp("eq", self.along(shape[axis], axis, shape), self.const(k, _I32, shape))
        kept = self.b.select(hit, bits, self.const(0, bits.type.elem, shape))
        out = list(shape)
        del out[axis]
        summed = self.b.op1("reduce", [kept], make_type(tuple(out), bits.type.elem), kind="sum", axis=axis)
        return self.b.expand_dims(summed, axis)

    def combine(self, first: Value, second: Value, axis: int) -> Value:
        """Two tiles with a size-1 `axis` -> one with a size-2 `axis`: first at 0, second at 1."""
        shape = tuple(2 if i == axis else d for i, d in enumerate(first.type.shape))
        at0 = self.b.cmp("eq", self.along(2, axis, shape), self.const(0, _I32, shape))
        return self.b.select(at0, self.b.broadcast(first, shape), self.b.broadcast(second, shape))

    # ---- sort ------------------------------------------------------------------------------------

    def _sort(self, t: Value, d: int, descending: bool) -> Value:
        b = self.b
        shape, e = t.type.shape, t.type.elem
        n = shape[d]
        pre, post = shape[:d], shape[d + 1 :]
        for stage in range(1, n.bit_length()):
            size = 1 << stage
            for sub in range(stage - 1, -1, -1):
                j = 1 << sub
                blocks = n // (2 * j)
                view = b.reshape(self.to_bits(t), (*pre, blocks, 2, j, *post))
                lo, hi = (self.from_bits(self.pick(view, d + 1, k), e) for k in (0, 1))
                gt, lt = b.cmp("gt", lo, hi), b.cmp("lt", lo, hi)
                if size == n:  # the last stage merges the whole axis in one direction
                    swap = lt if descending else gt
                else:  # earlier stages sort alternate runs of `size` up and down
                    hs = lo.type.shape
                    bit = b.binary("and", self.along(blocks, d, hs), self.const(size // (2 * j), _I32, hs))
                    up = b.cmp("eq", bit, self.const(0, _I32, hs))
                    swap = b.select(up, lt, gt) if descending else b.select(up, gt, lt)
                first, second = b.select(swap, hi, lo), b.select(swap, lo, hi)
                t = b.reshape(self.combine(first, second, d + 1), shape)
        return t

    # ---- gather ----------------------------------------------------------------------------------

    def _gather(self, src: Value, idx: Value, a: int) -> Value:
        b = self.b
        ishape, n = idx.type.shape, src.type.shape[a]
        onehot = ishape[: a + 1] + (n,) + ishape[a + 1 :]
        numel = 1
        for x in onehot:
            numel *= x
        if numel > GATHER_ONEHOT_MAX:
            loc = self.op.loc
            where = {"filename": loc.file, "line": loc.line, "col": loc.col} if loc else {}
            raise BudgetExceededError(f"cpu: gather builds a one-hot tile of {numel} elements ({list(ishape)} indices x "
                               f"{n} sources), over its budget of {GATHER_ONEHOT_MAX}: gather from memory with "
                               "tl.load(ptr + index) instead", **where)  # fmt: skip
        bits = b.broadcast(b.expand_dims(self.to_bits(src), a), onehot)
        rng = self.along(n, a + 1, onehot)
        if idx.type.elem != _I32:
            rng = b.cast(rng, idx.type.elem)
        hit = b.cmp("eq", b.broadcast(b.expand_dims(idx, a + 1), onehot), rng)
        picked = b.select(hit, bits, self.const(0, bits.type.elem, onehot))
        out = b.op1("reduce", [picked], TileType(ishape, bits.type.elem), kind="sum", axis=a + 1)
        return self.from_bits(out, src.type.elem)

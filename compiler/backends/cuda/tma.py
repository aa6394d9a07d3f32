"""TMA (cp.async.bulk.tensor) on sm_90 for host tensor descriptors and block pointers: a pipelined loop's
ring load whose pointers are a box (the frontend's `desc_box`: a host descriptor's, compiler/frontend/
hostdesc.py, or a block pointer's, blockptr.py) is copied by the tensor memory accelerator instead of
cp.async, completion tracked by one mbarrier per stage.

Which loads: on sm >= 90, a 2-D load planned into a swizzled ring of a wgmma operand (gpu.ring_swizzle) that
is stored along the tensor's innermost dimension (gpu.ring_contig = 1) with at most 256 rows, whose tensor
the specialisation proves TMA can take: base 16-byte aligned and the leading stride divisible by 16
elements (the `divisibility` hints the launcher derives from the arguments, so a launch whose arguments
break them gets another build). A host descriptor's tensor is the descriptor passed at launch. A block
pointer's is taken from the launch's own arguments, so its base must be a pointer parameter as it is and
each extent and stride a parameter (seen through an integer widening) or a constant; the innermost stride
must be 1 (a constant, or a parameter the `equal_to_1` hint binds). The metadata names, per map, which
parameter or constant gives each. A block pointer over a computed base (`Q + off_hz * stride_h`), extents
or strides, or with padding_option="nan", stays on the pointer path, as do loads outside such loops,
stores and device-side tl.make_tensor_descriptor whose parts are not parameters: their tensor has no
host-encoded map, and a device-side encode (tensormap.replace) would cost a global-memory round trip per
tensor that the pointer path does not pay. A block pointer's semantics hold: TMA zero-fills what lies
outside the tensor, which is what boundary_check asks on its dimensions, and the other dimensions are in
bounds by the user's word. One difference remains at launch: TMA cannot encode an empty extent (or a zero
or negative stride), so such a launch of a build that took TMA is refused (runtime/tma.py ArgumentError)
where the pointer path would have read zeros.

The ring's tile layout is already the TMA's: blocks of `sw` bytes along the contiguous dimension, each
holding every row at `sw` bytes, 16-byte chunks XOR-permuted by address bits 7.. (swizzle.py), so one copy
of box {sw / elem bytes, rows} with CU_TENSOR_MAP_SWIZZLE_<sw>B fills one block. Each such box gets its
own kernel parameter: a 128-byte CUtensorMap passed by value (`.param .align 64 .b8 [128]`, a
grid-constant byval parameter) after the IR's parameters, described in the launch metadata under "tma"
(the base's IR parameter, box, swizzle, element type; a block pointer's also where its shape and
strides come from) for the launcher to encode
(runtime/tma.py, cuTensorMapEncodeTiled). Coordinates are the box's start (innermost first); TMA zero-fills
what lies outside the tensor, as the pointer path's mask does.

Protocol per loop: thread 0 initialises S mbarriers (arrive count 1) before the prologue; issuing stage s,
thread 0 arms barrier s with arrive.expect_tx(bytes of the stage's boxes) and issues the copies; every
thread of iteration i waits on barrier i % S with parity (i / S) & 1 before the block barrier that already
orders the ring; after the loop thread 0 invalidates the barriers (the loop may run again).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import llvmlite.ir as ir

from ...ir.core import Function, Operation, Value
from ...ir.types import TileType, elem_type, shape_of
from . import ops
from .layouts import WgmmaSpec

MAX_BOX = 256  # TMA box dimension limit
DTYPES = {"f16": "fp16", "bf16": "bf16", "f32": "fp32", "i8": "i8", "u8": "u8"}
PARAM_PREFIX = "tilec.tmap."
_RANK = re.compile(r"\[([^\]]*)\]")


Source = tuple[str, int]  # ("param", IR parameter index) or ("value", a constant)


@dataclass(frozen=True)
class TmaBox:
    """One tensor map: the tensor whose base is IR parameter `param` read in boxes of `box` (innermost
    first) with swizzle `swizzle` bytes. A host descriptor's map comes from the descriptor passed at launch;
    a block pointer's from the launch's own arguments: `shape` and `strides` (outermost first) say which
    parameter, or which constant, gives each."""

    param: int
    box: tuple[int, int]
    swizzle: int
    dtype: str
    elem_bytes: int
    shape: tuple[Source, ...] | None = None
    strides: tuple[Source, ...] | None = None

    def metadata(self) -> dict:
        out = {"param": self.param, "box": list(self.box), "swizzle": self.swizzle, "dtype": self.dtype,
               "elem_bytes": self.elem_bytes}  # fmt: skip
        if self.shape is not None:
            out["shape"] = [{k: v} for k, v in self.shape]
            out["strides"] = [{k: v} for k, v in self.strides or ()]
        return out


def _c(x: int) -> ir.Constant:
    return ir.Constant(ops.I32, x)


def _provably_aligned(fn: Function, base: int) -> bool:
    """The specialisation says TMA takes this descriptor: base 16-byte aligned, leading strides x16."""
    params = fn.params
    rank = _RANK.search(str(params[base].attrs.get("tensordesc", "")))
    if rank is None:
        return False
    r = rank.group(1).count(",") + 1
    strides = params[base + 1 + r : base + 2 * r]
    return params[base].attrs.get("divisibility", 1) % 16 == 0 and all(
        p.attrs.get("divisibility", 1) % 16 == 0 for p in strides
    )


def _source(fn: Function, v: Value) -> Source | None:
    """Where the launcher finds scalar `v`: a kernel parameter (through an integer widening), a constant,
    or nowhere (None: a value the kernel computes)."""
    if isinstance(v.owner, Operation) and v.owner.name == "cast":
        src = v.owner.operands[0]
        a, b = elem_type(src.type), elem_type(v.type)
        if not (a.is_int and b.is_int and a.bits <= b.bits):
            return None
        v = src
    if v.owner is fn.body.block:
        p = fn.params[v.index]
        return ("value", 1) if p.attrs.get("equal_to_1") is True else ("param", v.index)
    if isinstance(v.owner, Operation) and v.owner.name == "constant" and not isinstance(v.type, TileType):
        value = v.owner.attrs["value"]
        return ("value", value) if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def _x16(fn: Function, src: Source) -> bool:
    """The specialisation proves this stride a positive multiple of 16 elements (a parameter: its hint)."""
    kind, x = src
    return fn.params[x].attrs.get("divisibility", 1) % 16 == 0 if kind == "param" else x > 0 and x % 16 == 0


def _block_recipe(fn: Function, box: Operation, rank: int) -> tuple[int, tuple, tuple] | None:
    """A block pointer's (base parameter, shape, strides) when TMA provably takes it: the base a 16-byte
    aligned pointer parameter, shape and strides parameters or constants, the last stride 1 and the
    others multiples of 16 elements; None otherwise (the pointer path)."""
    base, *dims = box.operands[1 + rank :]
    if base.owner is not fn.body.block or fn.params[base.index].attrs.get("divisibility", 1) % 16:
        return None
    srcs = [_source(fn, d) for d in dims]
    if any(s is None for s in srcs):
        return None
    shape, strides = tuple(srcs[:rank]), tuple(srcs[rank:])
    if strides[-1] != ("value", 1) or not all(_x16(fn, s) for s in strides[:-1]):
        return None
    return base.index, shape, strides


def plan_tma(fn: Function, pipes, mma: dict, sm: int) -> dict[Operation, TmaBox]:
    """The ring loads of `fn` that TMA copies (of wgmma dots: `mma`, the layout plan's), and their tensor maps."""
    if sm < 90:
        return {}
    index = {p.name: i for i, p in enumerate(fn.params)}
    out: dict[Operation, TmaBox] = {}
    for pipe in pipes.loops.values():
        for pl in pipe.loads:
            box = pl.load.operands[0].owner
            if not isinstance(box, Operation) or box.name != "desc_box":
                continue
            shape = shape_of(pl.load.result.type)
            et = elem_type(pl.load.result.type)
            if (
                len(shape) != 2
                or not pl.swizzle
                or not isinstance(mma.get(pl.dot), WgmmaSpec)  # mma.sync's rings: cp.async
                or pl.contig != 1
                or shape[0] > MAX_BOX
                or et.name not in DTYPES
            ):
                continue
            eb = et.bits // 8
            tile_box = (pl.swizzle // eb, shape[0])
            if "desc" in box.attrs:  # a host descriptor
                base = index.get(box.attrs["desc"])
                if base is None or not _provably_aligned(fn, base):
                    continue
                out[pl.load] = TmaBox(base, tile_box, pl.swizzle, DTYPES[et.name], eb)
                continue
            recipe = _block_recipe(fn, box, len(shape))
            if recipe is not None:
                base, dims, strides = recipe
                out[pl.load] = TmaBox(base, tile_box, pl.swizzle, DTYPES[et.name], eb, dims, strides)
    return out


def grid_constant_params(text: str) -> str:
    """The LLVM text with each tensor-map parameter made a 64-aligned, 128-byte grid-constant byval
    parameter (llvmlite cannot spell byval on an opaque pointer)."""
    pattern = re.compile(r'ptr %"(' + re.escape(PARAM_PREFIX) + r'\d+)"')
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("define ptx_kernel "):
            lines[i] = pattern.sub(r'ptr byval([128 x i8]) align 64 "nvvm.grid_constant" %"\1"', line)
    return "\n".join(lines)


class TmaLowering:
    """Mixed into CudaLowering (lower.py); pipelined.py calls the tma_* hooks, which do nothing for a
    loop without TMA loads."""

    def tma_setup(self) -> list[ir.Type]:
        """Plan the TMA loads; the extra kernel parameters (their tensor maps), recorded in arg_kinds."""
        self.tma = plan_tma(self.src, self.pipes, self.plan.mma, self.sm)
        self.tma_maps: list[TmaBox] = list(dict.fromkeys(self.tma.values()))
        self.arg_kinds.extend("tmap" for _ in self.tma_maps)
        return [ir.PointerType() for _ in self.tma_maps]

    def tma_bind(self, args: list) -> None:
        self.tma_args = {}
        for m, a in zip(self.tma_maps, args, strict=True):
            a.name = PARAM_PREFIX + str(len(self.tma_args))
            self.tma_args[m] = self.pb.ptrtoint(a, ir.IntType(64))

    def _tma_loads(self, pipe) -> list:
        return [pl for pl in pipe.loads if pl.load in self.tma]

    def tma_barrier_bytes(self, pipe) -> int:
        return 8 * pipe.stages if self._tma_loads(pipe) else 0

    def _thread0(self, extra=None):
        first = self.b.icmp_unsigned("==", self.tid, _c(0))
        return first if extra is None else self.b.and_(first, extra)

    def tma_init(self, op: Operation, pipe, bars: int) -> None:
        """Before the prologue: thread 0 initialises one mbarrier per stage at shared byte `bars`."""
        if not self._tma_loads(pipe):
            return
        self._tma_bars[op] = bars
        smem = self.pb.ptrtoint(self.smem, ops.I32)
        first = self._thread0()
        for s in range(pipe.stages):
            addr = self.b.add(smem, _c(bars + 8 * s))
            self._asm("@$1 mbarrier.init.shared::cta.b64 [$0], 1;", "r,b,~{memory}", [addr, first])
        self.barrier()

    def _bar(self, pipe, slot):
        bars = self._tma_bars[pipe.loop]
        return self.b.add(self.pb.ptrtoint(self.smem, ops.I32), self.b.add(self.b.mul(slot, _c(8)), _c(bars)))

    def tma_expect(self, pipe, slot, valid) -> None:
        """Thread 0 arms the stage's barrier with the bytes its boxes bring (where the stage is issued)."""
        loads = self._tma_loads(pipe)
        if not loads:
            return
        nbytes = sum(pl.tile().nbytes for pl in loads)
        self._asm(f"@$1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {nbytes};", "r,b,~{memory}",
                  [self._bar(pipe, slot), self._thread0(valid)])  # fmt: skip

    def tma_copy(self, pipe, pl, stage, slot, valid) -> None:
        """Thread 0 copies `pl`'s tile into `stage`: one box per `sw`-byte block of the contiguous dim."""
        m = self.tma[pl.load]
        tile = pl.tile()
        box = pl.load.operands[0].owner
        row, col = (self.scalar(c) for c in box.operands[1:3])
        bar = self._bar(pipe, slot)
        pred = self._thread0(valid)
        for j in range(tile.cols // m.box[0]):
            dst = self.b.add(stage, _c(pl.offset + j * tile.block_bytes))
            x = self.b.add(col, _c(j * m.box[0])) if j else col
            self._asm("@$5 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                      "[$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r,b,~{memory}",
                      [dst, self.tma_args[m], x, row, bar, pred])  # fmt: skip

    def tma_wait(self, pipe, slot, iv, lb, step) -> None:
        """Every thread waits until this iteration's stage has landed: parity (i / S) & 1, i the iteration."""
        if not self._tma_loads(pipe):
            return
        it = self.b.udiv(self.b.sub(iv, lb), step)
        phase = self.b.and_(self.b.udiv(it, _c(pipe.stages)), _c(1))
        self._asm("{\n.reg .pred tma_ready;\ntma_wait_again:\n"
                  "mbarrier.try_wait.parity.shared::cta.b64 tma_ready, [$0], $1;\n"
                  "@!tma_ready bra.uni tma_wait_again;\n}", "r,r,~{memory}", [self._bar(pipe, slot), phase])  # fmt: skip

    def tma_done(self, pipe) -> None:
        """After the loop (every stage waited for and the block synced): thread 0 invalidates the barriers."""
        if not self._tma_loads(pipe):
            return
        smem = self.pb.ptrtoint(self.smem, ops.I32)
        first = self._thread0()
        bars = self._tma_bars[pipe.loop]
        for s in range(pipe.stages):
            self._asm("@$1 mbarrier.inval.shared::cta.b64 [$0];", "r,b,~{memory}",
                      [self.b.add(smem, _c(bars + 8 * s)), first])  # fmt: skip
        self.shm.released()  # the next user of this scratch syncs first

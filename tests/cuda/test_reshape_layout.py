"""The layout algebra of `reshape` on the host (no GPU): for every layout the gpu-layout pass makes, the
reshaped layout puts in each (register, lane, warp) slot the element NumPy's row-major reshape puts
there; the lowering moves no data where the layouts line up and goes through shared memory where not."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.layout_reshape import flat_index, reshape_layout, unflat_index
from tilec.compiler.backends.cuda.layouts import Layout, MmaSpec, blocked, mma_layout, scan_layout
from tilec.compiler.backends.cuda.passes import GpuLayoutPass
from tilec.compiler.backends.cuda.plan import read_layouts
from tilec.compiler.ir import parse_module
from tilec.compiler.passes import PassManager, pipeline
from tilec.compiler.pipeline import compile_kernel


def slots(lay: Layout) -> dict[tuple[int, int, int], tuple[int, ...]]:
    """(register, lane, warp) -> the coordinate that slot holds (sum of the bases of the set bits)."""
    out = {}
    for r, ln, w in itertools.product(range(lay.num_regs), range(32), range(1 << len(lay.warp))):
        c = [0] * len(lay.shape)
        for bits, bases in ((r, lay.reg), (ln, lay.lane), (w, lay.warp)):
            for i, basis in enumerate(bases):
                if bits >> i & 1:
                    c = [x + y for x, y in zip(c, basis, strict=True)]
        out[(r, ln, w)] = tuple(c)
    return out


def layouts(shape: tuple[int, ...]) -> list[Layout]:
    out = []
    for nw in (1, 4, 8):
        for vec in (1, 2, 4, 8):
            for order in itertools.permutations(range(len(shape))):
                out.append(blocked(shape, nw, vec, order))
        for axis in range(len(shape)):
            out.append(scan_layout(shape, axis, nw))
    if len(shape) == 2 and shape[0] % 16 == 0 and shape[1] % 8 == 0:
        spec = MmaSpec("f16", 16, 2, 2, max(1, shape[0] // 32), max(1, shape[1] // 16))
        if 16 * spec.wm * spec.mrep == shape[0] and 8 * spec.wn * spec.nrep == shape[1]:
            out.append(mma_layout(shape, spec, 4))
    return out


PAIRS = [
    ((16,), (8, 2, 1)),
    ((4, 8), (32,)),
    ((2, 4, 8), (8, 8)),
    ((64,), (4, 4, 4)),
    ((32, 16), (16, 2, 16)),
    ((8, 2, 1), (4, 2, 2)),
    ((4, 2, 2), (2, 2, 4)),
    ((1, 64), (64, 1)),
    ((32, 32), (1024,)),
]


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=str)
def test_reshaped_layout_holds_the_numpy_reshape(src: tuple, dst: tuple) -> None:
    tile = np.arange(int(np.prod(src))).reshape(src)
    want = tile.reshape(dst)
    for lay in layouts(src):
        moved = reshape_layout(lay, dst)
        assert moved is not None and moved.shape == dst and moved.num_regs == lay.num_regs
        before, after = slots(lay), slots(moved)
        for key, c in before.items():
            assert tile[c] == want[after[key]], (lay, key)
        assert reshape_layout(moved, src) == lay  # the way back, as the lazy lowering asks for it


def test_flat_index_round_trips() -> None:
    shape = (4, 1, 8, 2)
    for f in range(64):
        assert flat_index(unflat_index(f, shape), shape) == f
        assert unflat_index(f, shape) == np.unravel_index(f, shape)


def test_bases_it_cannot_carry_are_refused() -> None:
    lay = blocked((4, 4), 1, 2)
    mixed = Layout(lay.shape, ((1, 1),) + lay.reg[1:], lay.lane, lay.warp)
    assert reshape_layout(mixed, (16,)) is None
    odd = Layout(lay.shape, ((0, 3),) + lay.reg[1:], lay.lane, lay.warp)
    assert reshape_layout(odd, (16,)) is None


def _kernel(body: str, params: str = "%x: ptr<f32>, %o: ptr<f32>") -> str:
    lines = "\n".join("    " + ln.strip() for ln in body.strip().splitlines())
    return f"module {{\n  kernel @k({params}) {{\n{lines}\n    return\n  }}\n}}\n"


# a 4x8 tile loaded row-major (dim 1 contiguous) or column-major (dim 0 contiguous), stored flat
LOAD_4x8 = """
%r = make_range {end = 4, start = 0} : tile<4xi32>
%c = make_range {end = 8, start = 0} : tile<8xi32>
%re = expand_dims %r {axis = 1} : tile<4x1xi32>
%ce = expand_dims %c {axis = 0} : tile<1x8xi32>
%rs = constant {value = ROWSTRIDE} : tile<4x1xi32>
%cs = constant {value = COLSTRIDE} : tile<1x8xi32>
%rm = mul %re, %rs : tile<4x1xi32>
%cm = mul %ce, %cs : tile<1x8xi32>
%rb = broadcast %rm : tile<4x8xi32>
%cb = broadcast %cm : tile<4x8xi32>
%off = add %rb, %cb : tile<4x8xi32>
%p = splat %x : tile<4x8xptr<f32>>
%a = addptr %p, %off : tile<4x8xptr<f32>>
%v = load %a : tile<4x8xf32>
%flat = reshape %v : tile<32xf32>
%f = make_range {end = 32, start = 0} : tile<32xi32>
%q = splat %o : tile<32xptr<f32>>
%b = addptr %q, %f : tile<32xptr<f32>>
store %b, %flat
"""


def _compile(text: str, emit: str = "ptx", num_warps: int = 1):
    return compile_kernel(text, "k", is_ir=True, options=CompileOptions(target="cuda:sm_90", num_warps=num_warps),
                          emit=emit)  # fmt: skip


def test_reshape_that_lines_up_moves_no_data() -> None:
    art = _compile(_kernel(LOAD_4x8.replace("ROWSTRIDE", "8").replace("COLSTRIDE", "1")))
    assert art.metadata["shared_bytes"] == 0 and "bar.sync" not in art.ptx


def test_reshape_across_threads_goes_through_shared_memory() -> None:
    art = _compile(_kernel(LOAD_4x8.replace("ROWSTRIDE", "1").replace("COLSTRIDE", "4")))
    assert art.metadata["shared_bytes"] >= 32 * 4 and "bar.sync" in art.ptx and "st.shared" in art.ptx


def test_layout_pass_gives_reshapes_the_moved_layout() -> None:
    text = _kernel("""
        %r = make_range {end = 64, start = 0} : tile<64xi32>
        %p = splat %x : tile<64xptr<f32>>
        %a = addptr %p, %r : tile<64xptr<f32>>
        %v = load %a : tile<64xf32>
        %t = reshape %v : tile<4x2x8xf32>
        %s = reduce %t {axis = 1, kind = "sum"} : tile<4x8xf32>
        %u = reshape %s : tile<32xf32>
        %h = make_range {end = 32, start = 0} : tile<32xi32>
        %q = splat %o : tile<32xptr<f32>>
        %b = addptr %q, %h : tile<32xptr<f32>>
        store %b, %u
    """)
    m = PassManager.from_names(pipeline("default")).run(parse_module(text))
    fn = m.kernels[0]
    GpuLayoutPass(num_warps=4, sm=90).apply(m)
    plan = read_layouts(fn)
    reshapes = [op for op in fn.walk() if op.name == "reshape"]
    assert len(reshapes) == 2
    for op in reshapes:
        assert plan.natural[op.result] == reshape_layout(plan.natural[op.operands[0]], op.result.type.shape)

"""The cuda backend's codegen choices are compile options (CompileOptions.cuda, a frozen CudaOptions): a
choice other than the default gives another stable hash, another artifact key and other PTX (assembled by
ptxas, no GPU needed); the defaults leave the artifact key of a default build as it was. No module-level
switch is left to flip, and no test or bench flips one."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from tilec.compiler.artifact import CompileOptions, CudaOptions, artifact_key
from tilec.compiler.backends.cuda import lower, ops, pipelined, wgmma
from tilec.compiler.backends.cuda import target as cuda_target
from tilec.compiler.pipeline import compile_kernel
from tilec.compiler.request import CompileRequest

ROOT = Path(__file__).resolve().parents[2]
SRC = """
import triton
import triton.language as tl


@triton.jit
def k(X, Y, Out, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(X + i)
    y = tl.load(Y + i)
    tl.store(Out + i, tl.math.exp2(x * y + x))
"""
SIG = {"X": "*fp32", "Y": "*fp32", "Out": "*fp32"}
SPEC = {"signature": SIG, "constexprs": {"BLOCK": 128}, "hints": {}, "emit": "cubin"}
CONFIG = {"kwargs": {"BLOCK": 128}, "num_warps": 4, "num_stages": 3}


def build(cuda: CudaOptions):
    return compile_kernel(SRC, "k", signature=SIG, constexprs={"BLOCK": 128},
                          options=CompileOptions(target="cuda:sm_90", cuda=cuda), emit="cubin")  # fmt: skip


@pytest.mark.parametrize("field", ["fp_fusion", "ex2_ftz", "uniform_warp", "coords_from_tid"])
def test_two_option_values_two_keys_two_binaries(field: str) -> None:
    # the kernel reads the warp index only for its coordinate, which by default comes from tid.x itself
    base = CudaOptions(coords_from_tid=False) if field == "uniform_warp" else CudaOptions()
    on, off = base, dataclasses.replace(base, **{field: False})
    assert (
        CompileOptions(target="cuda:sm_90", cuda=on).stable_hash()
        != CompileOptions(target="cuda:sm_90", cuda=off).stable_hash()
    )
    keys = {artifact_key("k" * 64, SPEC, CONFIG, "cuda:sm_90", "v1", codegen=c) for c in (on, off)}
    assert len(keys) == 2
    a, b = build(on), build(off)
    assert a.ptx != b.ptx and a.binary != b.binary
    assert a.metadata["options"]["hash"] != b.metadata["options"]["hash"]


def test_default_options_keep_the_key_of_a_default_build() -> None:
    """Builds with the defaults (every service build) keep the key they had before the options existed."""
    assert artifact_key("k" * 64, SPEC, CONFIG, "cpu", "v1", codegen=CudaOptions()) == artifact_key(
        "k" * 64, SPEC, CONFIG, "cpu", "v1"
    )
    assert CudaOptions(reuse_staged=False).changed() == {"reuse_staged": False}


def test_options_travel_as_plain_data() -> None:
    """A compile request crosses to a worker process as a dict: the nested cuda options come back typed."""
    opts = CompileOptions(target="cuda:sm_90", cuda=CudaOptions(fp_fusion=False, wgmma_pending=0))
    back = CompileRequest.from_dict({"text": SRC, "options": dataclasses.asdict(opts)})
    assert back.options == opts and isinstance(back.options.cuda, CudaOptions)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.cuda.fp_fusion = True  # type: ignore[misc]


OLD_SWITCHES = {"FP_FUSION", "EX2_FTZ", "SM90A_FOR_DOTS", "WGMMA_PENDING", "LEAVE_OCCUPANCY_TO_PTXAS", "OCCUPANCY_RETRY",
                "A_FROM_REGISTERS", "STAGE_INVARIANTS_ONCE", "REUSE_STAGED", "ISSUE_AFTER_LAST_DOT",
                "MMA_IN_FLIGHT_ACROSS", "UNIFORM_WARP"}  # fmt: skip


def test_no_module_switch_is_left() -> None:
    for module in (ops, cuda_target, wgmma, pipelined, lower):
        assert OLD_SWITCHES.isdisjoint(vars(module)), module.__name__


def _switch_flips(path: Path) -> list[str]:
    """Where a file sets a module attribute of the cuda backend (imported under any alias): setattr or
    monkeypatch.setattr with an UPPER_CASE name, or an assignment to one; and any mention of an old switch's
    name (a table of names that a loop flips)."""
    tree = ast.parse(path.read_text(), str(path))
    cuda = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "tilec.compiler.backends.cuda"
        ):
            cuda |= {a.asname or a.name for a in node.names}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in OLD_SWITCHES:
            found.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "setattr"
        ):
            owner, attr = (node.args + [None, None])[:2]
            if (
                isinstance(owner, ast.Name)
                and owner.id in cuda
                and isinstance(attr, ast.Constant)
                and str(attr.value).isupper()
            ):
                found.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            if any(
                isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in cuda
                for t in flat
            ):
                found.append(node.lineno)
    return [f"{path.name}:{n}" for n in sorted(set(found))]


def test_no_test_or_bench_flips_a_codegen_switch() -> None:
    files = [
        p
        for folder in ("tests", "bench")
        for p in sorted((ROOT / folder).rglob("*.py"))
        if p != Path(__file__)
    ]
    flips = [hit for p in files for hit in _switch_flips(p)]
    assert flips == []


def test_the_scan_sees_a_flip(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from tilec.compiler.backends.cuda import ops as o\n\n\ndef t(monkeypatch):\n"
                     "    monkeypatch.setattr(o, 'FOO', 1)\n    setattr(x, 'REUSE_STAGED', 0)\n"
                     "    o.BAR, y = 1, 2\n    o.ok = o.BAZ\n")  # fmt: skip
    assert _switch_flips(probe) == ["probe.py:5", "probe.py:6", "probe.py:7", "probe.py:8"]


PIPELINED = """
import triton
import triton.language as tl


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, K, stride_bk, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptrs = a_ptr + rm[:, None] * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(tl.load(a_ptrs, mask=rk[None, :] < K - k, other=0.0), tl.load(b_ptrs))
        a_ptrs += BK
        b_ptrs += BK * stride_bk
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)
"""


def _pipelined(cuda: CudaOptions):
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32", "stride_bk": "i32"}
    return compile_kernel(PIPELINED, "mm", signature=sig, constexprs={"BM": 64, "BN": 64, "BK": 32},
                          hints={p: {"divisibility": 16} for p in sig},
                          options=CompileOptions(target="cuda:sm_90a", num_stages=3, cuda=cuda), emit="ptx")  # fmt: skip


def test_the_pipelined_loops_copy_options_change_its_copies() -> None:
    """The A tile advances by a constant: by default LLVM carries its pointers (one per copy, as Triton's);
    uniform_advance_offset=True makes its copies bases plus one offset carried through an identity asm (so
    LLVM keeps one). Copies past the loop's end are predicated off by default; zero_fill_past_end=True
    issues them unpredicated with 0 bytes."""
    identity = "mov.b64 $0, $1;"
    base = _pipelined(CudaOptions())
    assert identity not in base.llir and re.search(r"@%p\d+ cp\.async", base.ptx)
    offset = _pipelined(CudaOptions(uniform_advance_offset=True))
    assert identity in offset.llir and offset.ptx != base.ptx
    filled = _pipelined(CudaOptions(zero_fill_past_end=True)).ptx
    assert "cp.async.cg" in filled and not re.search(r"@%p\d+ cp\.async", filled)


def test_the_mma_sync_ring_option_sets_its_slots_and_refill() -> None:
    """Two warps (no wgmma) at num_stages 4: by default a ring of 3 slots, 3 iterations ahead, refilled after the
    dots behind a second barrier; mma_ring_late=False gives 4 slots, refilled before the dots, one barrier."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32", "stride_bk": "i32"}

    def build(cuda: CudaOptions):
        return compile_kernel(PIPELINED, "mm", signature=sig, constexprs={"BM": 64, "BN": 64, "BK": 32},
                              hints={p: {"divisibility": 16} for p in sig},
                              options=CompileOptions(target="cuda:sm_90a", num_warps=2, num_stages=4, cuda=cuda),
                              emit="ptx")  # fmt: skip

    for cuda, slots in ((CudaOptions(), 3), (CudaOptions(mma_ring_late=False), 4)):
        art = build(cuda)
        assert slots * 8192 <= art.metadata["shared_bytes"] < (slots + 1) * 8192  # swizzled A 64 x 64 bytes, B 32 x 128
        assert art.ptx.count("cp.async.commit_group") == 4  # three iterations ahead either way, then one a loop
        loop = art.ptx[art.ptx.index("cp.async.wait_group 2;") : art.ptx.index("cp.async.wait_group 0;")]
        order = re.findall(r"bar\.sync|mma\.sync|cp\.async\.cg", loop)
        assert (order.index("mma.sync") < order.index("cp.async.cg")) == cuda.mma_ring_late
        assert order.count("bar.sync") == (2 if cuda.mma_ring_late else 1)


def test_the_mma_sync_ring_swizzle_and_pad_set_its_tiles() -> None:
    """By default ldmatrix reads swizzled ring tiles, rows unpadded (A 64 x 64 bytes, B 32 x 128), each read at
    per-lane offsets computed before the loop, so the loop adds the slot's base alone. mma_ring_swizzle=False
    pads the rows instead: mma_ring_pad bytes after each (16 by default: A 64 + 16, B 128 + 16 bytes a row);
    0 packs them (ldmatrix then meets bank conflicts: timed slower, bench/NOTES-cuda.md)."""
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "K": "i32", "stride_bk": "i32"}
    shared, loops = {}, {}
    for name, cuda in (("swizzled", CudaOptions()), ("pad16", CudaOptions(mma_ring_swizzle=False)),
                       ("pad0", CudaOptions(mma_ring_swizzle=False, mma_ring_pad=0))):  # fmt: skip
        art = compile_kernel(PIPELINED, "mm", signature=sig, constexprs={"BM": 64, "BN": 64, "BK": 32},
                             hints={p: {"divisibility": 16} for p in sig},
                             options=CompileOptions(target="cuda:sm_90a", num_warps=2, num_stages=4, cuda=cuda),
                             emit="ptx")  # fmt: skip
        shared[name] = art.metadata["shared_bytes"]
        loops[name] = art.ptx[art.ptx.index("cp.async.wait_group 2;") : art.ptx.index("cp.async.wait_group 0;")]
    assert 3 * (64 * 64 + 32 * 128) <= shared["swizzled"] < 3 * (64 * 80 + 32 * 144) <= shared["pad16"]
    assert 3 * (64 * 64 + 32 * 128) <= shared["pad0"] < 3 * (64 * 80 + 32 * 144)
    assert "xor.b32" not in loops["swizzled"] and loops["swizzled"].count("ldmatrix") == loops["pad16"].count("ldmatrix")
    assert loops["swizzled"] != loops["pad16"]


def test_the_wgmma_ring_options_set_its_syncs_groups_and_regions() -> None:
    """One warpgroup's wgmma ring (A 64 x 32 and B 32 x 64 halves, 4 KiB each, 3 slots): by default the
    refill follows the wgmma wait alone, a stage's copies are one commit group, and a slot holds A then B
    (8 KiB apart). refill_barrier puts a bar.sync before the refill; commit_per_load commits each load's
    copies as a group (twice the groups, the wait counts doubled); rings_apart gives each load its own region
    (slots 4 KiB apart), in the same shared bytes."""

    def loop(cuda: CudaOptions) -> tuple[list[str], list[str], int]:
        art = _pipelined(cuda)
        body = art.ptx[art.ptx.index("cp.async.wait_group") : art.ptx.rindex("cp.async.wait_group 0;")]
        order = re.findall(r"bar\.sync|wgmma\.wait_group\.sync\.aligned \d|cp\.async\.cg|cp\.async\.commit_group", body)
        strides = re.findall(r"shl\.b32\s+%r\d+, %r\d+, (1[23]);", body)
        return order, strides, art.metadata["shared_bytes"]

    order, strides, shared = loop(CudaOptions())
    copies = ["cp.async.cg"] * 4
    assert order == ["bar.sync", "wgmma.wait_group.sync.aligned 1", *copies, "cp.async.commit_group"]
    assert set(strides) == {"13"} and shared == 3 * 8192
    order = loop(CudaOptions(refill_barrier=True))[0]
    assert order == ["bar.sync", "wgmma.wait_group.sync.aligned 1", "bar.sync", *copies, "cp.async.commit_group"]
    order = loop(CudaOptions(commit_per_load=True))[0]
    assert order == ["bar.sync", "wgmma.wait_group.sync.aligned 1", *copies[:2], "cp.async.commit_group",
                     *copies[2:], "cp.async.commit_group"]  # fmt: skip
    assert "cp.async.wait_group 2;" in _pipelined(CudaOptions(commit_per_load=True)).ptx
    _, strides, shared = loop(CudaOptions(rings_apart=True))
    assert set(strides) == {"12"} and shared == 3 * 8192


def test_a_thread_coordinate_fed_by_lanes_comes_from_tid() -> None:
    """A 1-D tile over 4 warps: element i of thread t is at t; by default the address is built from tid.x
    alone (Triton's way), without the warp index's shfl.sync.idx before the first load; coords_from_tid=False
    builds it bit by bit from the lane and the warp index read back through the shuffle."""
    for cuda, shuffled in ((CudaOptions(), False), (CudaOptions(coords_from_tid=False), True)):
        ptx = build(cuda).ptx
        head = ptx[ptx.index("%tid.x") : ptx.index("ld.global")]
        assert ("shfl.sync.idx" in head) == shuffled
        assert (head.count("or.b32") == 0) != shuffled

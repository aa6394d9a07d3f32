"""Loads, stores and atomics on the interpreter: masks at tile edges, other=, faults, duplicate addresses."""

from __future__ import annotations

import numpy as np
import pytest

from tilec.compiler.errors import CompileError
from tilec.compiler.interp import MemoryFault, run_kernel

from .kit import kernel, parse_checked, run

COPY = kernel(
    "%x: ptr<f32>, %o: ptr<f32>, %n: i32",
    """
    %pid = program_id {axis = 0} : i32
    %bs = constant {value = 64} : i32
    %start = mul %pid, %bs : i32
    %r = make_range {end = 64, start = 0} : tile<64xi32>
    %s = splat %start : tile<64xi32>
    %offs = add %s, %r : tile<64xi32>
    %ns = splat %n : tile<64xi32>
    %mask = cmp %offs, %ns {pred = "lt"} : tile<64xi1>
    %xp = splat %x : tile<64xptr<f32>>
    %xa = addptr %xp, %offs : tile<64xptr<f32>>
    %minus = constant {value = -1.5} : tile<64xf32>
    %v = load %xa, %mask, %minus : tile<64xf32>
    %op = splat %o : tile<64xptr<f32>>
    %oa = addptr %op, %offs : tile<64xptr<f32>>
    store %oa, %v, %mask
    """,
)


def test_masked_copy_at_tile_edges_never_touches_memory_past_the_end():
    n = 150  # 3 programs, the last one two-thirds masked
    x = np.arange(n, dtype=np.float32)
    o = np.zeros(n, np.float32)
    run(COPY, [x, o, n], grid=(3,))
    np.testing.assert_array_equal(o, x)


def test_load_other_fills_masked_off_lanes():
    text = COPY.replace(
        "store %oa, %v, %mask", "%all = constant {value = 1} : tile<64xi1>\n    store %oa, %v, %all"
    )
    x = np.arange(10, dtype=np.float32)
    o = np.zeros(64, np.float32)
    run(text, [x, o, 10], grid=(1,))
    assert o[:10].tolist() == list(range(10)) and (o[10:] == -1.5).all()


def test_load_without_other_gives_zero():
    text = COPY.replace(", %minus : tile<64xf32>", " : tile<64xf32>").replace(
        "store %oa, %v, %mask", "%all = constant {value = 1} : tile<64xi1>\n    store %oa, %v, %all"
    )
    x = np.arange(1, 11, dtype=np.float32)
    o = np.full(64, 7.0, np.float32)
    run(text, [x, o, 10], grid=(1,))
    assert (o[10:] == 0).all() and o[9] == 10


def test_unmasked_out_of_bounds_store_is_a_located_memory_fault():
    text = COPY.replace("store %oa, %v, %mask", "store %oa, %v")
    x = np.arange(100, dtype=np.float32)
    o = np.zeros(100, np.float32)
    with pytest.raises(MemoryFault) as info:
        run(text, [x, o, 100], grid=(2,))
    err = info.value
    assert isinstance(err, CompileError)
    assert (err.line, err.col) == (17, 5)
    assert "'store'" in err.message and "%o" in err.message and "program (1, 0, 0)" in err.message
    assert "active lane 36" in err.message


def test_unmasked_out_of_bounds_load_faults_before_anything_is_stored():
    text = COPY.replace("%v = load %xa, %mask, %minus", "%v = load %xa")
    x = np.arange(10, dtype=np.float32)
    o = np.zeros(64, np.float32)
    with pytest.raises(MemoryFault, match="'load' out-of-bounds 4-byte access at byte 40 of %x"):
        run(text, [x, o, 64], grid=(1,))


def test_negative_offsets_fault():
    text = kernel(
        "%x: ptr<i32>",
        """
        %m = constant {value = -1} : i32
        %p = addptr %x, %m : ptr<i32>
        %v = load %p : i32
        store %x, %v
        """,
    )
    with pytest.raises(MemoryFault, match="outside every argument buffer|out-of-bounds"):
        run(text, [np.zeros(4, np.int32)])


def test_misaligned_access_faults():
    text = kernel(
        "%x: ptr<i32>",
        """
        %p = cast %x : ptr<i8>
        %one = constant {value = 1} : i32
        %q = addptr %p, %one : ptr<i8>
        %r = cast %q : ptr<i32>
        %v = load %r : i32
        store %x, %v
        """,
    )
    with pytest.raises(MemoryFault, match="misaligned"):
        run(text, [np.zeros(4, np.int32)])


def test_pointer_casts_reinterpret_bytes():
    text = kernel(
        "%x: ptr<i32>, %o: ptr<u8>",
        """
        %p = cast %x : ptr<u8>
        %three = constant {value = 3} : i32
        %q = addptr %p, %three : ptr<u8>
        %v = load %q : u8
        store %o, %v
        """,
    )
    o = np.zeros(1, np.uint8)
    run(text, [np.array([0x11223344], np.int32), o])
    assert o[0] == 0x11  # little-endian: byte 3 is the high byte


def test_scalar_loads_and_stores_and_multiple_buffers():
    text = kernel(
        "%a: ptr<i64>, %b: ptr<i64>, %o: ptr<i64>",
        """
        %x = load %a : i64
        %y = load %b : i64
        %s = add %x, %y : i64
        %two = constant {value = 2} : i64
        %q = addptr %o, %two : ptr<i64>
        store %q, %s
        """,
    )
    o = np.zeros(3, np.int64)
    run(text, [np.array([5], np.int64), np.array([2**40], np.int64), o])
    assert o.tolist() == [0, 0, 2**40 + 5]


def test_store_with_repeated_addresses_keeps_the_last_lane():
    text = kernel(
        "%o: ptr<i32>",
        """
        %r = make_range {end = 8, start = 0} : tile<8xi32>
        %two = constant {value = 2} : tile<8xi32>
        %idx = rem %r, %two : tile<8xi32>
        %p = splat %o : tile<8xptr<i32>>
        %q = addptr %p, %idx : tile<8xptr<i32>>
        store %q, %r
        """,
    )
    o = np.zeros(2, np.int32)
    run(text, [o])
    assert o.tolist() == [6, 7]


def _atomic_kernel(kind: str, elem: str, masked: bool = False) -> str:
    mask = ", %m" if masked else ""
    return kernel(
        f"%o: ptr<{elem}>, %v: ptr<{elem}>, %old: ptr<{elem}>",
        f"""
        %r = make_range {{end = 8, start = 0}} : tile<8xi32>
        %three = constant {{value = 3}} : tile<8xi32>
        %idx = rem %r, %three : tile<8xi32>
        %five = constant {{value = 5}} : tile<8xi32>
        %m = cmp %r, %five {{pred = "ne"}} : tile<8xi1>
        %vp = splat %v : tile<8xptr<{elem}>>
        %va = addptr %vp, %r : tile<8xptr<{elem}>>
        %vals = load %va : tile<8x{elem}>
        %p = splat %o : tile<8xptr<{elem}>>
        %q = addptr %p, %idx : tile<8xptr<{elem}>>
        %prev = atomic_rmw %q, %vals{mask} {{kind = "{kind}"}} : tile<8x{elem}>
        %pp = splat %old : tile<8xptr<{elem}>>
        %pa = addptr %pp, %r : tile<8xptr<{elem}>>
        store %pa, %prev
        """,
    )


def _sequential_atomic(kind, mem, vals, active):
    fns = {
        "add": lambda a, b: a + b, "max": max, "min": min, "xchg": lambda a, b: b,
        "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    }  # fmt: skip
    mem, olds = list(mem), []
    for lane, v in enumerate(vals):
        if not active[lane]:
            olds.append(0)
            continue
        i = lane % 3
        olds.append(mem[i])
        mem[i] = fns[kind](mem[i], v)
    return mem, olds


@pytest.mark.parametrize("kind", ["add", "max", "min", "xchg", "and", "or", "xor"])
@pytest.mark.parametrize("masked", [False, True])
def test_atomic_rmw_applies_repeated_addresses_in_lane_order(kind, masked):
    vals = np.array([5, -3, 12, 7, 1, 9, -8, 6], np.int32)
    o = np.array([10, 3, -1], np.int32)
    old = np.zeros(8, np.int32)
    want_mem, want_old = _sequential_atomic(
        kind, o.tolist(), vals.tolist(), [not masked or i != 5 for i in range(8)]
    )
    run(_atomic_kernel(kind, "i32", masked), [o, vals, old])
    assert o.tolist() == want_mem
    assert old.tolist() == want_old


def test_atomic_add_f32_rounds_in_lane_order():
    vals = np.array([2.0**24, 1.0, 1.0, -(2.0**24), 1.0, 1.0, 3.0, 0.5], np.float32)
    o = np.zeros(3, np.float32)
    old = np.zeros(8, np.float32)
    run(_atomic_kernel("add", "f32"), [o, vals, old])
    # lanes 0, 3, 6 hit address 0 in that order: 2^24, then -2^24 (old 2^24), then 3 (old 0)
    assert o.tolist() == [3.0, 2.5, 2.0]
    assert old.tolist() == [0.0, 0.0, 0.0, 2.0**24, 1.0, 1.0, 0.0, 2.0]


def test_atomic_add_scalar_counter_over_programs():
    text = kernel(
        "%c: ptr<i32>, %o: ptr<i32>",
        """
        %pid = program_id {axis = 0} : i32
        %one = constant {value = 1} : i32
        %prev = atomic_rmw %c, %one {kind = "add", sem = "acq_rel"} : i32
        %q = addptr %o, %pid : ptr<i32>
        store %q, %prev
        """,
    )
    c, o = np.zeros(1, np.int32), np.zeros(5, np.int32)
    run(text, [c, o], grid=(5,))
    assert c[0] == 5 and o.tolist() == [0, 1, 2, 3, 4]


def test_atomic_cas_in_lane_order():
    text = kernel(
        "%o: ptr<i32>, %old: ptr<i32>",
        """
        %r = make_range {end = 4, start = 0} : tile<4xi32>
        %zero = constant {value = 0} : tile<4xi32>
        %p = splat %o : tile<4xptr<i32>>
        %q = addptr %p, %zero : tile<4xptr<i32>>
        %one = constant {value = 1} : tile<4xi32>
        %next = add %r, %one : tile<4xi32>
        %prev = atomic_cas %q, %r, %next : tile<4xi32>
        %pp = splat %old : tile<4xptr<i32>>
        %pa = addptr %pp, %r : tile<4xptr<i32>>
        store %pa, %prev
        """,
    )
    o, old = np.zeros(1, np.int32), np.zeros(4, np.int32)
    run(text, [o, old])
    assert o[0] == 4 and old.tolist() == [0, 1, 2, 3]


def test_bf16_memory_holds_bits():
    text = kernel(
        "%x: ptr<bf16>, %o: ptr<bf16>",
        """
        %v = load %x : bf16
        %w = add %v, %v : bf16
        store %o, %w
        """,
    )
    o = np.zeros(1, np.uint16)
    run(text, [np.array([0x3FC0], np.uint16), o])  # 1.5
    assert o[0] == 0x4040  # 3.0


def test_argument_errors_are_type_errors():
    m = parse_checked(COPY)
    with pytest.raises(TypeError, match="ptr<f32> needs a float32 array"):
        run_kernel(m, "k", [np.zeros(4, np.float64), np.zeros(4, np.float32), 4], (1,))
    with pytest.raises(TypeError, match="takes 3 arguments"):
        run_kernel(m, "k", [np.zeros(4, np.float32)], (1,))
    with pytest.raises(TypeError, match="C-contiguous"):
        run_kernel(m, "k", [np.zeros(8, np.float32)[::2], np.zeros(4, np.float32), 4], (1,))


def test_scalar_arguments_wrap_and_round():
    text = kernel(
        "%a: i8, %b: f16, %o8: ptr<i8>, %o16: ptr<f16>",
        """
        store %o8, %a
        store %o16, %b
        """,
    )
    o8, o16 = np.zeros(1, np.int8), np.zeros(1, np.float16)
    run(text, [300, 1.0 + 2.0**-12, o8, o16])
    assert o8[0] == 44 and o16[0] == 1.0

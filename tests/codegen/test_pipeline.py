"""The cpu pipeline: its stages, errors from LLVM, masked accesses next to an unmapped page, asserts."""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest

from tilec.compiler.backends import stages
from tilec.compiler.backends.cpu.target import optimise
from tilec.compiler.errors import CompileError, ToolError
from tilec.compiler.pipeline import compile_kernel

from .kit import run_cpu

COPY = """module {
  kernel @copy(%x: ptr<f32>, %o: ptr<f32>, %n: i32) {
    %0 = make_range {end = 64, start = 0} : tile<64xi32>
    %1 = splat %n : tile<64xi32>
    %2 = cmp %0, %1 {pred = "lt"} : tile<64xi1>
    %3 = splat %x : tile<64xptr<f32>>
    %4 = addptr %3, %0 : tile<64xptr<f32>>
    %5 = load %4, %2 : tile<64xf32>
    %6 = splat %o : tile<64xptr<f32>>
    %7 = addptr %6, %0 : tile<64xptr<f32>>
    store %7, %5, %2
    return
  }
}
"""


def test_cpu_stages_in_order() -> None:
    assert [n for n, _ in stages("cpu")] == ["tir", "llir", "object"]


def test_emit_llir_and_object() -> None:
    art = compile_kernel(COPY, None, is_ir=True, emit="llir")
    assert "copy__grid" in art.llir and art.binary == b""
    art = compile_kernel(COPY, "copy", is_ir=True, emit="object")
    assert art.binary[:4] == b"\x7fELF"
    assert art.metadata["args"] == [
        {"name": "x", "kind": "ptr", "dtype": "f32"},
        {"name": "o", "kind": "ptr", "dtype": "f32"},
        {"name": "n", "kind": "scalar", "dtype": "i32"},
    ]
    assert art.metadata["grid_symbol"] == "copy__grid"


def test_unknown_emit_and_kernel_are_compile_errors() -> None:
    with pytest.raises(CompileError, match="emits one of"):
        compile_kernel(COPY, None, is_ir=True, emit="ptx")
    with pytest.raises(CompileError, match="no kernel named"):
        compile_kernel(COPY, "nope", is_ir=True, emit="object")


def test_llvm_failure_is_a_tool_error() -> None:
    with pytest.raises(ToolError, match="llvm"):
        optimise("define i32 @f() { ret i64 0 }")


def _guarded_page() -> tuple[mmap.mmap, np.ndarray]:
    """A float array filling the end of a page whose next page is unmapped (PROT_NONE)."""
    page = mmap.PAGESIZE
    buf = mmap.mmap(-1, 2 * page, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    libc = ctypes.CDLL(None)
    assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0
    arr = np.frombuffer(buf, dtype=np.float32, count=10, offset=page - 40)
    return buf, arr


def test_masked_lanes_never_touch_memory() -> None:
    buf, x = _guarded_page()
    x[:] = np.arange(10, dtype=np.float32)
    out = np.zeros(64, np.float32)
    run_cpu(COPY, [x, out, 10], (1,))  # lanes 10..63 would read the unmapped page
    np.testing.assert_array_equal(out[:10], np.arange(10))
    assert not out[10:].any()
    del x


STRIDED = COPY.replace("%n: i32)", "%n: i32, %s: i32)").replace(
    "%4 = addptr %3, %0",
    "%s1 = splat %s : tile<64xi32>\n    %s2 = mul %0, %s1 : tile<64xi32>\n    %4 = addptr %3, %s2",
)


def test_masked_gather_lanes_never_touch_memory() -> None:
    buf, x = _guarded_page()
    x[:] = np.arange(10, dtype=np.float32)
    out = np.zeros(64, np.float32)
    run_cpu(STRIDED, [x, out, 10, 1], (1,))  # a runtime stride: a gather, not a contiguous load
    np.testing.assert_array_equal(out[:10], np.arange(10))
    assert not out[10:].any()
    del x


ASSERT = """module {
  kernel @k(%x: ptr<i32>) {
    %0 = load %x : i32
    %1 = constant {value = 0} : i32
    %2 = cmp %0, %1 {pred = "gt"} : i1
    assert %2 {message = "must be positive"}
    return
  }
}
"""


def test_assert_codes_reach_the_runtime() -> None:
    from tilec.client import KernelAssertionError

    run_cpu(ASSERT, [np.array([3], np.int32)], (4,))
    with pytest.raises(KernelAssertionError, match="must be positive"):
        run_cpu(ASSERT, [np.array([-3], np.int32)], (4,))

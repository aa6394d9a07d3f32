"""The cuda target without a GPU: every tutorial kernel compiles to PTX and a cubin for sm_80 and sm_90;
the cubin is a CUDA ELF holding the kernel symbol, and its resource usage lands in the metadata."""

from __future__ import annotations

import struct

import pytest

from tests.kernels import KERNELS, source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.errors import CompileError
from tilec.compiler.pipeline import compile_kernel

EM_CUDA = 190


def compile_cuda(stem: str, sm: int, emit: str = "cubin", hints: dict | None = None, consts: dict | None = None,
                 **options):
    k = KERNELS[stem]
    opts = CompileOptions(target=f"cuda:sm_{sm}", **options)
    return compile_kernel(source(stem), k["name"], signature=k["signature"], constexprs={**k["constexprs"], **(consts or {})},
                          hints=hints, options=opts, emit=emit)  # fmt: skip


def elf_symbols(blob: bytes) -> set[str]:
    """Names in the ELF64 .symtab (enough of ELF to find the kernel's entry)."""
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for sh in sections:
        if sh[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sections[sh[6]]
        for off in range(sh[4], sh[4] + sh[5], 24):
            name_off, = struct.unpack_from("<I", blob, off)
            start = strtab[4] + name_off
            names.add(blob[start:blob.index(b"\0", start)].decode())
    return names


@pytest.mark.parametrize("sm", [80, 90])
@pytest.mark.parametrize("stem", sorted(KERNELS))
def test_cubin_is_elf_with_kernel_and_resources(stem: str, sm: int) -> None:
    art = compile_cuda(stem, sm)
    blob = art.binary
    assert blob[:4] == b"\x7fELF"
    assert struct.unpack_from("<H", blob, 0x12)[0] == EM_CUDA
    assert KERNELS[stem]["name"] in elf_symbols(blob)
    meta = art.metadata
    assert meta["registers"] > 0
    assert meta["spill_stores"] == 0
    assert meta["threads_per_block"] == 128
    assert f".target sm_{sm}" in art.ptx and ".version 8.0" in art.ptx
    assert f".entry {KERNELS[stem]['name']}" in art.ptx


def test_vector_add_uses_16_byte_accesses() -> None:
    aligned = {p: {"divisibility": 16} for p in ("x_ptr", "y_ptr", "out_ptr", "n_elements")}
    art = compile_cuda("vector_add", 90, emit="ptx", hints=aligned, consts={"BLOCK_SIZE": 1024})
    assert "ld.global.v4.b32" in art.ptx and "st.global.v4.b32" in art.ptx
    plain = compile_cuda("vector_add", 90, emit="ptx", consts={"BLOCK_SIZE": 1024})  # no alignment known: scalar
    assert "ld.global.v4" not in plain.ptx
    # 128 elements on 128 threads: one a thread (as Triton's coalescing), not 16-byte vectors on 32 of them
    small = compile_cuda("vector_add", 90, emit="ptx", hints=aligned)
    assert "ld.global.v4" not in small.ptx and "ld.global.b32" in small.ptx


def test_softmax_reduces_with_shuffles_and_smem_across_warps() -> None:
    art = compile_cuda("fused_softmax", 90, emit="ptx", consts={"BLOCK_SIZE": 1024})
    assert "shfl.sync.bfly" in art.ptx
    assert "bar.sync" in art.ptx
    # 128 columns with 16-byte aligned rows: 4 floats a thread, so one warp's lanes hold a row
    aligned = {p: {"divisibility": 16} for p in ("output_ptr", "input_ptr", "input_row_stride", "output_row_stride")}
    small = compile_cuda("fused_softmax", 90, emit="ptx", hints=aligned)
    assert "shfl.sync.bfly" in small.ptx and "bar.sync" not in small.ptx
    # rows at a runtime stride (alignment unknown): one float a thread over all four warps, as Triton lays them
    # out, so that a warp's scalar loads are consecutive; the row's maximum then crosses warps
    unaligned = compile_cuda("fused_softmax", 90, emit="ptx")
    assert "bar.sync" in unaligned.ptx and "ld.global.v" not in unaligned.ptx


def test_num_warps_sets_block_size() -> None:
    art = compile_cuda("vector_add", 90, num_warps=8)
    assert art.metadata["threads_per_block"] == 256
    assert ".maxntid 256" in art.ptx


def test_llir_uses_nvvm_intrinsics_and_ptx_kernel() -> None:
    art = compile_cuda("fused_softmax", 90, emit="llir")
    assert "define ptx_kernel void" in art.llir
    assert "llvm.nvvm.read.ptx.sreg.tid.x" in art.llir


def test_bad_num_warps_is_a_compile_error() -> None:
    with pytest.raises(CompileError, match="num_warps"):
        compile_cuda("vector_add", 90, num_warps=3)


def test_non_power_of_two_tiles_are_a_compile_error() -> None:
    text = """module {
  kernel @k(%x: ptr<f32>) {
    %0 = constant {value = 1.0} : tile<3xf32>
    %1 = splat %x : tile<3xptr<f32>>
    store %1, %0
    return
  }
}
"""
    with pytest.raises(CompileError):
        compile_kernel(text, None, is_ir=True, options=CompileOptions(target="cuda:sm_90"), emit="cubin")

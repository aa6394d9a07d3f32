"""The cuda lowering's shared-memory allocator (compiler/backends/cuda/smem.py): reservations from the
scratch base with the block's limit, the kernel's size as the largest extent, a scoped base that comes back
even when the code inside fails, epochs, and the barrier rule (a claim syncs only after a release or a
control-flow join, and a barrier clears it). The lowering keeps no shared-memory flags of its own."""

from __future__ import annotations

import pytest

from tests.kernels import KERNELS, source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda.lower import CudaLowering
from tilec.compiler.backends.cuda.smem import MAX_SMEM, SharedMemory
from tilec.compiler.errors import CompileError, OutOfResourcesError
from tilec.compiler.pipeline import compile_kernel


def allocator() -> tuple[SharedMemory, list[str]]:
    emitted: list[str] = []
    shm = SharedMemory(lambda: (emitted.append("bar"), shm.synced()))
    return shm, emitted


def test_claim_syncs_only_after_a_release() -> None:
    shm, bars = allocator()
    shm.claim(256)  # the kernel's first user: nothing to wait for
    assert bars == []
    shm.released()
    shm.claim(128)  # the previous user's reads may be in flight
    assert bars == ["bar"]
    shm.claim(64)  # synced since, and nobody released
    assert bars == ["bar"]
    shm.control_flow()  # a join: some path may have a reader
    shm.claim(64)
    assert bars == ["bar", "bar"]
    shm.released()
    shm.synced()  # a barrier the lowering emitted for its own reasons clears it too
    shm.claim(8)
    assert bars == ["bar", "bar"]


def test_size_is_the_largest_extent_and_scratch_starts_at_the_base() -> None:
    shm, _ = allocator()
    shm.reserve(1000)
    with shm.scoped(4096):
        assert shm.base == 4096
        shm.reserve(100)
        with shm.scoped(0):
            assert shm.base == 0
            shm.reserve(10)
        assert shm.base == 4096
    assert shm.base == 0 and shm.size == 4196


def test_scoped_base_comes_back_when_the_code_inside_fails() -> None:
    shm, _ = allocator()
    with pytest.raises(CompileError), shm.scoped(MAX_SMEM - 16):
        shm.reserve(32)  # past the block's limit over the ring
    assert shm.base == 0


def test_limits_name_the_ring() -> None:
    shm, _ = allocator()
    with pytest.raises(CompileError, match="more than the"):
        shm.reserve(MAX_SMEM + 1)
    with shm.scoped(200 * 1024), pytest.raises(CompileError, match=r"a pipelined loop's ring takes 204800"):
        shm.reserve(30 * 1024)


def test_every_reservation_is_a_new_epoch() -> None:
    shm, _ = allocator()
    first = shm.epoch
    shm.claim(16)
    shm.reserve(16)
    assert shm.epoch == first + 2


def test_the_lowering_keeps_no_flags_of_its_own() -> None:
    """The names of the state the allocator replaced fail when read or set, so a mixin written against them
    cannot leave a barrier out silently."""
    for name in ("smem_dirty", "smem_base", "smem_epoch", "smem_bytes"):
        with pytest.raises(AttributeError):
            getattr(CudaLowering, name).fget(object())
    low = CudaLowering.__new__(CudaLowering)
    with pytest.raises(AttributeError):
        low.smem_dirty = True


def test_shared_bytes_come_from_the_allocator() -> None:
    """A softmax's warp reduction reserves its partials: the artifact's shared_bytes is the allocator's size."""
    k = KERNELS["fused_softmax"]
    art = compile_kernel(source("fused_softmax"), k["name"], signature=k["signature"], constexprs={"BLOCK_SIZE": 1024},
                         options=CompileOptions(target="cuda:sm_90", num_warps=4), emit="ptx")  # fmt: skip
    assert art.metadata["shared_bytes"] > 0
    assert "bar.sync" in art.ptx


def test_a_config_too_large_is_out_of_resources_with_its_numbers() -> None:
    """The tutorial matmul at 256x256x256 with 4 stages needs more shared memory than a block has (the
    tutorial's 03 on an H100 hit this with one config): the error is the typed OutOfResourcesError with what
    it needs and the limit, which the drop-in hands Triton's autotuner as Triton's own OutOfResources (it
    skips that config; before, the whole kernel fell back to Triton). (At 256x256x128 this f32 build fits
    since its advanced address tiles are carried in their loads' layouts, not converted each iteration.)"""
    k = KERNELS["matmul"]
    big = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 8}
    with pytest.raises(OutOfResourcesError) as info:
        compile_kernel(source("matmul"), k["name"], signature=k["signature"], constexprs=big,
                       options=CompileOptions(target="cuda:sm_90", num_warps=8, num_stages=4), emit="ptx")  # fmt: skip
    assert info.value.limit == MAX_SMEM and info.value.required > MAX_SMEM
    triton_errors = pytest.importorskip("triton.runtime.errors")
    from tilec.client._dropin import _config_refused

    err = _config_refused(info.value)
    assert isinstance(err, triton_errors.OutOfResources)
    assert (err.required, err.limit, err.name) == (info.value.required, MAX_SMEM, "shared memory")

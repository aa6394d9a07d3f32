"""A binary for another arch, or one the driver refuses, is a typed ArchMismatchError naming the device,
the artifact's target and the driver, with `device_target` to rebuild for — never a raw CUDA error.
The check and the table of cuModuleLoadData refusals are pure and tested here without a GPU; on a GPU
(the device machine) a cubin for another major arch is refused before the load, and by the driver."""

from __future__ import annotations

import pickle

import pytest

from tests.cuda.gpu import gpu_reason
from tilec.client import ArchMismatchError, LaunchError, TargetError, TilecError
from tilec.runtime.cuda import LOAD_REFUSALS, DeviceArch, arch_mismatch, load_refusal, runs_on

A100 = DeviceArch(ordinal=1, name="NVIDIA A100-SXM4-80GB", sm=80, driver_version=12080)
H100 = DeviceArch(ordinal=0, name="NVIDIA H100 80GB HBM3", sm=90, driver_version=12040)
ADD1 = """
import triton
import triton.language as tl


@triton.jit
def add1(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)
"""


@pytest.mark.parametrize(
    ("artifact", "device", "runs"),
    [
        (80, 80, True),
        (80, 86, True),  # SASS runs on later minor versions of its major
        (70, 75, True),
        (100, 103, True),
        (86, 80, False),  # not on earlier ones
        (80, 90, False),  # nor on another major, either way
        (90, 80, False),
        (90, 100, False),
        (100, 120, False),
    ],
)
def test_runs_on(artifact: int, device: int, runs: bool) -> None:
    assert runs_on(artifact, device) is runs


def test_a_cubin_of_the_devices_own_arch_passes() -> None:
    assert arch_mismatch("cuda:sm_80", A100) is None
    assert arch_mismatch("cuda:sm_90", H100) is None
    assert arch_mismatch("cuda:sm_80", DeviceArch(0, "NVIDIA A10", 86, 12020)) is None


def test_a_cubin_for_another_arch_names_device_target_and_driver() -> None:
    err = arch_mismatch("cuda:sm_90", A100)
    assert isinstance(err, ArchMismatchError)
    assert isinstance(err, TargetError) and isinstance(err, LaunchError) and isinstance(err, TilecError)
    assert (err.artifact_target, err.device_target) == ("cuda:sm_90", "cuda:sm_80")
    assert (err.device_name, err.driver_version, err.device) == (A100.name, "12.8", 1)
    message = str(err)
    for part in ("cuda:sm_90", "GPU 1", A100.name, "sm_80", "CUDA driver 12.8", "rebuild it for cuda:sm_80"):
        assert part in message, (part, message)
    assert "another major arch" in message

    older = arch_mismatch("cuda:sm_86", A100)
    assert older is not None and "runs on sm_86 and later minor versions only" in str(older)
    assert str(arch_mismatch("cuda:sm_80", H100)).startswith(
        "cannot load a binary built for cuda:sm_80 on GPU 0 (NVIDIA H100 80GB HBM3, sm_90, CUDA driver 12.4)"
    )


@pytest.mark.parametrize("target", ["cpu", "cuda:sm_", "rocm:gfx90a", ""])
def test_a_binary_of_no_cuda_target_is_refused(target: str) -> None:
    err = arch_mismatch(target, H100)
    assert err is not None and "not a cuda target" in str(err) and err.device_target == "cuda:sm_90"


def test_the_refusal_table_names_real_cuda_errors() -> None:
    driver = pytest.importorskip("cuda.bindings.driver")
    assert set(LOAD_REFUSALS) == {
        "CUDA_ERROR_NO_BINARY_FOR_GPU",
        "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        "CUDA_ERROR_INVALID_PTX",
        "CUDA_ERROR_INVALID_IMAGE",
    }
    for name in LOAD_REFUSALS:
        assert getattr(driver.CUresult, name).name == name  # a typo here would never match the driver's name


@pytest.mark.parametrize("name", sorted(LOAD_REFUSALS))
def test_each_load_refusal_becomes_the_typed_error(name: str) -> None:
    err = load_refusal(name, "cuda:sm_90", A100)
    assert isinstance(err, ArchMismatchError) and name in str(err) and LOAD_REFUSALS[name] in err.reason
    assert (err.artifact_target, err.device_target, err.driver_version) == ("cuda:sm_90", "cuda:sm_80", "12.8")


def test_a_driver_too_old_for_the_devices_own_target_says_so() -> None:
    err = load_refusal("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "cuda:sm_90", H100)
    assert err is not None and err.artifact_target == err.device_target == "cuda:sm_90"
    assert "newer than this driver supports" in str(err) and "update the driver" in str(err)
    assert "rebuild it for" not in str(err)


@pytest.mark.parametrize("name", ["CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_CONTEXT_IS_DESTROYED", "", "nonsense"])
def test_other_errors_are_not_arch_mismatches(name: str) -> None:
    assert load_refusal(name, "cuda:sm_90", A100) is None


def test_the_error_pickles_with_its_fields() -> None:
    err = arch_mismatch("cuda:sm_90", A100)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ArchMismatchError and str(back) == str(err)
    assert vars(back) == vars(err)


def test_it_is_public() -> None:
    import tilec

    assert tilec.ArchMismatchError is ArchMismatchError


# ---- on a GPU ---------------------------------------------------------------------------------------


def _cubin(target: str):  # noqa: ANN202 - a compiler Artifact
    from tilec.compiler.artifact import CompileOptions
    from tilec.compiler.pipeline import compile_kernel

    return compile_kernel(ADD1, "add1", signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 128},
                          options=CompileOptions(target=target), emit="cubin")  # fmt: skip


@pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
def test_on_a_gpu_a_cubin_for_another_arch_is_refused_typed() -> None:
    import torch

    from tilec.runtime import cuda as rt

    torch.zeros(1, device="cuda")  # torch's context is the current one, as in a user's process
    device = rt.device_arch(torch.cuda.current_device())
    assert device.sm == 10 * torch.cuda.get_device_capability()[0] + torch.cuda.get_device_capability()[1]
    other = _cubin("cuda:sm_80" if device.sm // 10 != 8 else "cuda:sm_90")
    with pytest.raises(ArchMismatchError) as refused:
        rt.load(other, device.ordinal)
    assert refused.value.artifact_target == other.target and refused.value.device_target == device.target
    assert device.name in str(refused.value) and "another major arch" in str(refused.value)

    # the driver refuses it too when asked directly: its CUresult becomes the same typed error
    with pytest.raises(ArchMismatchError) as by_driver:
        rt._load_module(other.binary, other.target, device)
    assert any(name in str(by_driver.value) for name in LOAD_REFUSALS), str(by_driver.value)

    own = _cubin(device.target)  # the device's own arch loads and runs
    x = torch.zeros(1000, device="cuda")
    rt.launch(own, [x, 1000], (8, 1, 1))
    torch.cuda.synchronize()
    assert torch.equal(x, torch.ones_like(x))


@pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
def test_on_a_gpu_a_refused_cubin_is_rebuilt_from_ptx_by_the_driver() -> None:
    """A build the driver refuses (here: an sm of another major arch under the device's own target, as a
    cubin from a newer toolkit would be) is rebuilt: compiled here to PTX, loaded by the driver's JIT, and
    launched, with a warning that says so; the rebuild is kept for the next launch."""
    import dataclasses

    import torch

    from tilec.client._jit import JITKernel
    from tilec.runtime import cuda as rt

    torch.zeros(1, device="cuda")
    device = rt.device_arch(torch.cuda.current_device())
    k = JITKernel(ADD1, "add1")
    x = torch.zeros(1000, device="cuda")
    k[(8,)](x, 1000, BLOCK=128)
    ((key, art),) = k.cache.items()
    assert art.target == device.target and art.binary.startswith(b"\x7fELF")
    foreign = _cubin("cuda:sm_80" if device.sm // 10 != 8 else "cuda:sm_90")
    k.cache[key] = dataclasses.replace(art, binary=foreign.binary)  # the device's target, another arch's SASS
    k.__dict__.pop("_cuda_fast", None)  # the warm path holds the good module: take the full path
    with pytest.warns(UserWarning, match="rebuilding add1 from PTX"):
        k[(8,)](x, 1000, BLOCK=128)
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 2.0))
    rebuilt = k.cache[key]
    assert rebuilt.metadata["emit"] == "ptx" and rebuilt.binary.endswith(b"\0") and b".target" in rebuilt.binary
    k[(8,)](x, 1000, BLOCK=128)  # no second warning: warnings are errors in this suite
    torch.cuda.synchronize()
    assert torch.equal(x, torch.full_like(x, 3.0))

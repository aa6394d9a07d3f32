"""The cubin assembler choice (backends/cuda/nvptx.py): ptxas when one is found, nvJitLink when asked for or when
ptxas is missing or fails; both give a CUDA ELF with the kernel and its register count, and the compiler
version names the assembler in use. No GPU needed."""

from __future__ import annotations

import importlib.util
import os
import struct

import pytest

from tests.kernels import KERNELS, source
from tilec.compiler.artifact import CompileOptions
from tilec.compiler.backends.cuda import nvptx
from tilec.compiler.errors import ToolError
from tilec.compiler.pipeline import compile_kernel

HAS_NVJITLINK = importlib.util.find_spec("cuda") is not None and importlib.util.find_spec("cuda.bindings") is not None
if os.environ.get("CI") == "true" and not HAS_NVJITLINK:
    raise RuntimeError("CI installs the cuda extra (cuda-python, nvJitLink): the nvJitLink tests must run there")
EM_CUDA = 190


@pytest.fixture(scope="module")
def softmax_ptx() -> str:
    k = KERNELS["fused_softmax"]
    art = compile_kernel(source("fused_softmax"), k["name"], signature=k["signature"], constexprs=k["constexprs"],
                         options=CompileOptions(target="cuda:sm_90"), emit="ptx")  # fmt: skip
    return art.ptx


@pytest.fixture
def fresh_lookup(monkeypatch: pytest.MonkeyPatch):
    """Forget the cached ptxas lookup and version before and after the test (they depend on PATH)."""
    for fn in (nvptx.ptxas_path, nvptx.assembler_version):
        fn.cache_clear()
    yield monkeypatch
    for fn in (nvptx.ptxas_path, nvptx.assembler_version):
        fn.cache_clear()


def _is_cuda_elf(blob: bytes) -> bool:
    return blob[:4] == b"\x7fELF" and struct.unpack_from("<H", blob, 0x12)[0] == EM_CUDA


@pytest.mark.skipif(nvptx.ptxas_path() is None, reason="no ptxas here")
def test_ptxas_is_the_default_when_found(softmax_ptx: str, fresh_lookup) -> None:
    fresh_lookup.delenv("TILEC_ASSEMBLER", raising=False)
    kind, exe = nvptx.assembler()
    assert kind == "ptxas" and exe is not None and os.path.isfile(exe)
    blob, log = nvptx.ptx_to_cubin(softmax_ptx, 90)
    assert _is_cuda_elf(blob) and b"softmax_kernel" in blob
    assert nvptx.resource_usage(log)["registers"] > 0
    assert nvptx.assembler_version().startswith("ptxas=")


@pytest.mark.skipif(not HAS_NVJITLINK, reason="no cuda-python here")
def test_nvjitlink_on_request(softmax_ptx: str, fresh_lookup) -> None:
    fresh_lookup.setenv("TILEC_ASSEMBLER", "nvjitlink")
    assert nvptx.assembler() == ("nvjitlink", None)
    blob, log = nvptx.ptx_to_cubin(softmax_ptx, 90)
    assert _is_cuda_elf(blob) and nvptx.resource_usage(log)["registers"] > 0
    assert nvptx.assembler_version().startswith("nvjitlink=")


@pytest.mark.skipif(not HAS_NVJITLINK, reason="no cuda-python here")
def test_a_failing_ptxas_hands_over_to_nvjitlink(softmax_ptx: str, fresh_lookup, tmp_path) -> None:
    broken = tmp_path / "ptxas"
    broken.write_text("#!/bin/sh\necho 'ptxas fatal   : this ptxas is broken' >&2\nexit 1\n")
    broken.chmod(0o755)
    fresh_lookup.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    fresh_lookup.delenv("TILEC_ASSEMBLER", raising=False)
    assert nvptx.assembler() == ("ptxas", str(broken))
    blob, _ = nvptx.ptx_to_cubin(softmax_ptx, 90)
    assert _is_cuda_elf(blob)


@pytest.mark.parametrize("choice", ["ptxas", "nvjitlink"])
def test_bad_ptx_is_a_tool_error(choice: str, fresh_lookup) -> None:
    if choice == "ptxas" and nvptx.ptxas_path() is None or choice == "nvjitlink" and not HAS_NVJITLINK:
        pytest.skip(f"no {choice} here")
    fresh_lookup.setenv("TILEC_ASSEMBLER", choice)
    bad = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { bogus.instruction; }\n"
    with pytest.raises(ToolError) as info:
        nvptx.ptx_to_cubin(bad, 90)
    assert info.value.stderr


def test_the_cuda_extra_brings_its_own_ptxas_and_libdevice(softmax_ptx: str) -> None:
    """A pip-only install (the Docker image has no CUDA toolkit) still finds ptxas and libdevice."""
    wheel = nvptx._nvcc_wheel_dir()
    if wheel is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs the cuda extra, which carries nvidia-cuda-nvcc")
        pytest.skip("the cuda extra is not installed here")
    assert os.path.isfile(os.path.join(wheel, "nvvm/libdevice/libdevice.10.bc"))
    blob, log = nvptx._ptxas(softmax_ptx, 90, 3, exe=os.path.join(wheel, "bin", "ptxas"))
    assert _is_cuda_elf(blob) and nvptx.resource_usage(log)["registers"] > 0

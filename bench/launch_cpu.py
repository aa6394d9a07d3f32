"""The warm launch path of `k[grid](...)` for cuda, timed without a GPU: everything up to the driver
call is the real code (client.jit's dispatch, FastPath's key and table, Launcher's argument packing),
with stand-ins for what needs a device: tensors are a small class with torch's methods and
cuLaunchKernelEx is a libc function of no work called through ctypes the same way.
Usage: .venv/bin/python bench/launch_cpu.py
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

from tilec import client
from tilec.runtime.cuda import Launcher
from tilec.runtime.fastpath import FastPath

ROOT = Path(__file__).resolve().parent.parent


class Tensor:
    """A stand-in CUDA tensor: the attributes the warm path reads."""

    def __init__(self, ptr: int, dtype: str = "float32") -> None:
        self._ptr, self.dtype = ptr, dtype

    def data_ptr(self) -> int:
        return self._ptr

    def get_device(self) -> int:
        return 0

    is_cuda = True


class StandInKernel:
    name = "add_kernel"

    def __init__(self, kinds: list[str]) -> None:
        fn = ctypes.CDLL(None).geteuid  # no arguments (extra ones are ignored by the C ABI); 0 as root
        fn.restype = ctypes.c_int
        self.fast = Launcher(0x7F0000001000, 128, 0, kinds, fn)
        self.kinds = kinds

    def fail(self, rc: int) -> None:
        raise RuntimeError(rc)


def per_call_us(fn, reps: int = 50_000, rounds: int = 5) -> float:
    """The fastest of `rounds` rounds of `reps` calls (a shared machine's other work only adds time)."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps * 1e6)
    return best


def warm(k, args: tuple, kwargs: dict, rest: dict) -> StandInKernel:
    """`k`'s FastPath (as client.jit builds it, stand-in tensors) with the entry a first launch leaves."""
    fast = FastPath(k.params, tensor_type=Tensor, stream_of=lambda device: 0, value_names=k.value_names())
    kernel = StandInKernel(["ptr", "ptr", "ptr", "i32"])
    _seed(k, fast, args, kwargs, kernel, rest)
    k._cuda_fast = fast
    return kernel


def _seed(k, fast: FastPath, args: tuple, kwargs: dict, kernel: StandInKernel, rest: dict | None = None) -> None:
    """The table entry remember() leaves after a first launch of `k` with these arguments: keyed on the call
    as JITKernel.run puts it (keywords that continue the positional arguments among them), the runtime
    arguments packed from the first positions."""
    args, kwargs = k.positional(args, kwargs)
    key = fast.key_of(args, kwargs)  # as remember() makes it (the written-out key too)
    runtime = len(kernel.kinds)
    fast.table[key] = (kernel.fast, None if runtime == len(args) else runtime, 0, rest or {}, kernel)


TUTORIAL_02 = """
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        row = tl.load(row_start_ptr + col_offsets, mask=col_offsets < n_cols, other=-float("inf"))
        num = tl.exp(row - tl.max(row, axis=0))
        tl.store(output_ptr + row_idx * output_row_stride + col_offsets, num / tl.sum(num, axis=0),
                 mask=col_offsets < n_cols)
"""


def tutorial_02(tmp: Path):  # type: ignore[no-untyped-def]
    """The fused-softmax tutorial's host path through the drop-in (its kernel routed by tilec.install()):
    `warmup(...)` for the handle, the registers and shared memory read off it, the launch through it; the
    routed kernel's build and its FastPath entry stand in for a first call on a GPU."""
    import importlib
    import sys
    import types

    import tilec
    from tilec.client._dropin import _kernel

    tilec.install()
    (tmp / "tut02_kernel.py").write_text(TUTORIAL_02)
    sys.path.insert(0, str(tmp))
    mod = importlib.import_module("tut02_kernel")
    routed = mod.softmax_kernel
    k = _kernel(routed)
    x, y = Tensor(1 << 20), Tensor(2 << 20)
    consts = {"BLOCK_SIZE": 256, "num_stages": 4, "num_warps": 8}
    fast = FastPath(k.params, tensor_type=Tensor, stream_of=lambda device: 0, value_names=k.value_names())
    k._cuda_fast = fast
    art = types.SimpleNamespace(metadata={"registers": 28, "shared_bytes": 16, "spill_stores": 0},
                                kernel_name="softmax_kernel", target="cuda:sm_90")  # fmt: skip
    k._warm_memo = {fast.key_of(*k.positional((y, x, 256, 256, 4096, 256), consts)): art}
    kernel = StandInKernel(["ptr", "ptr", "i32", "i32", "i32", "i32"])
    key = fast.key_of((y, x, 256, 256, 4096, 256, 256, 4), {"num_warps": 8})
    fast.table[key] = (kernel.fast, 6, 0, {}, kernel)  # as remember() leaves it: the first 6 are the runtime ones

    def softmax() -> None:  # the tutorial's softmax(x) for a [4096, 256] fp32 x, less torch.empty_like
        handle = routed.warmup(y, x, 256, 256, 4096, 256, BLOCK_SIZE=256, num_stages=4, num_warps=8, grid=(1,))
        handle._init_handles()
        occupancy = min(65536 // (handle.n_regs * 32 * 8), 232448 // handle.metadata.shared)
        handle[(min(132 * occupancy, 4096), 1, 1)](y, x, 256, 256, 4096, 256, 256, 4)

    return softmax


TUTORIAL_03 = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
                                        num_stages=4, num_warps=4),
                          triton.Config({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8},
                                        num_stages=5, num_warps=2)],
                 key=["M", "N", "K"])
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                  GROUP_SIZE_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK_SIZE_M)
    tl.store(c_ptr + pid * BLOCK_SIZE_M + offs, tl.load(a_ptr + offs) + tl.load(b_ptr + offs))
"""


def tutorial_03(tmp: Path):  # type: ignore[no-untyped-def]
    """The matmul tutorial's host path through the drop-in: Triton's own Autotuner (key M, N, K, its choice
    already cached) over the routed kernel, the tutorial's grid lambda; the routed kernel's FastPath entry
    stands in for the first call on a GPU, as in tutorial_02."""
    import importlib
    import sys

    import tilec
    from tilec.client._dropin import _kernel

    tilec.install()
    (tmp / "tut03_kernel.py").write_text(TUTORIAL_03)
    sys.path.insert(0, str(tmp))
    mod = importlib.import_module("tut03_kernel")
    tuner = mod.matmul_kernel
    k = _kernel(tuner.fn)
    a, b, c = Tensor(1 << 20, "float16"), Tensor(2 << 20, "float16"), Tensor(3 << 20, "float16")
    n = 256
    args = (a, b, c, n, n, n, n, 1, n, 1, n, 1)
    cfg = tuner.configs[0]
    tuner.cache[(n, n, n, "float16", "float16", "float16")] = cfg
    fast = FastPath(k.params, tensor_type=Tensor, stream_of=lambda device: 0, value_names=k.value_names())
    k._cuda_fast = fast
    from tilec.client._dropin import _STATE, _TRITON_ONLY_OPTIONS

    dropped = _STATE.get("dropped", _TRITON_ONLY_OPTIONS)
    launch = {k2: v for k2, v in {"ACTIVATION": "", **cfg.all_kwargs()}.items() if k2 not in dropped}
    kernel = StandInKernel(["ptr"] * 3 + ["i32"] * 9)
    _seed(k, fast, args, launch, kernel)

    def matmul() -> None:  # the tutorial's matmul(a, b) for fp16 256x256, less torch.empty and its asserts
        grid = lambda META: (-(-n // META["BLOCK_SIZE_M"]) * -(-n // META["BLOCK_SIZE_N"]),)  # noqa: E731
        tuner[grid](a, b, c, n, n, n, n, 1, n, 1, n, 1, ACTIVATION="")

    return matmul


def main() -> None:
    from tilec.client.inductor import TilecKernel

    k = client.jit((ROOT / "tests/kernels/vector_add.py").read_text(), "add_kernel")
    x, y, o, n = Tensor(1 << 20), Tensor(2 << 20), Tensor(3 << 20), 1024
    kernel = warm(k, (x, y, o, n), {"BLOCK_SIZE": 1024}, {})
    fast = k._cuda_fast
    tuned = client.jit((ROOT / "bench/speed_kernels.py").read_text(), "add_tuned")
    warm(tuned, (x, y, o, n), {}, {"BLOCK_SIZE": 1024})
    tuned_grid = lambda meta: (-(-meta["n_elements"] // meta["BLOCK_SIZE"]),)  # noqa: E731
    ind_src = (ROOT / "tests/inductor/corpus/kernels/add_relu.triton_poi_fused_add_relu_0.py").read_text()
    ind = TilecKernel("triton_poi_fused_add_relu_0", ind_src, None, None)
    warm(ind.jit, (x, y, o, 4773), {}, {"XBLOCK": 1024})
    raw = [1 << 20, 2 << 20, 3 << 20, 1024]
    rows = {
        "ctypes call alone (4 prebuilt args)": lambda: kernel.fast.fn(*kernel.fast.argv),
        "Launcher (pack + call)": lambda: kernel.fast(raw, (1,), 0),
        "FastPath.launch": lambda: fast.launch((1,), (x, y, o, n), {"BLOCK_SIZE": 1024}),
        "k[(1,)](x, y, o, n, BLOCK_SIZE=1024)": lambda: k[(1,)](x, y, o, n, BLOCK_SIZE=1024),
        "autotuned k[grid](x, y, o, n)": lambda: tuned[tuned_grid](x, y, o, n),
        "Inductor TilecKernel.run(x, y, o, 4773)": lambda: ind.run(x, y, o, 4773, stream=0),
    }
    import tempfile

    rows["tutorial 02's softmax(x), drop-in (no alloc)"] = tutorial_02(Path(tempfile.mkdtemp()))
    rows["tutorial 03's matmul(a, b), drop-in (no alloc)"] = tutorial_03(Path(tempfile.mkdtemp()))
    for name, fn in rows.items():
        print(f"{name:40} {per_call_us(fn):6.2f} us")


if __name__ == "__main__":
    main()

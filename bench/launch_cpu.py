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
from tilec.runtime.cuda import FastPath, Launcher

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
    key, _ = fast._key(args, kwargs)
    kernel = StandInKernel(["ptr", "ptr", "ptr", "i32"])
    fast.table[key] = (kernel.fast, None, 0, rest, kernel)
    k._cuda_fast = fast
    return kernel


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
    for name, fn in rows.items():
        print(f"{name:40} {per_call_us(fn):6.2f} us")


if __name__ == "__main__":
    main()

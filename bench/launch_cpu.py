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


def per_call_us(fn, reps: int = 200_000) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def main() -> None:
    k = client.jit((ROOT / "tests/kernels/vector_add.py").read_text(), "add_kernel")
    fast = FastPath(k.params, tensor_type=Tensor, stream_of=lambda device: 0)
    x, y, o, n = Tensor(1 << 20), Tensor(2 << 20), Tensor(3 << 20), 1024
    key, _ = fast._key((x, y, o, n), {"BLOCK_SIZE": 1024})
    kernel = StandInKernel(["ptr", "ptr", "ptr", "i32"])
    fast.table[key] = (kernel.fast, None, 0, {}, kernel)
    k._cuda_fast = fast
    raw = [1 << 20, 2 << 20, 3 << 20, 1024]
    rows = {
        "ctypes call alone (4 prebuilt args)": lambda: kernel.fast.fn(*kernel.fast.argv),
        "Launcher (pack + call)": lambda: kernel.fast(raw, (1,), 0),
        "FastPath.launch": lambda: fast.launch((1,), (x, y, o, n), {"BLOCK_SIZE": 1024}),
        "k[(1,)](x, y, o, n, BLOCK_SIZE=1024)": lambda: k[(1,)](x, y, o, n, BLOCK_SIZE=1024),
    }
    for name, fn in rows.items():
        print(f"{name:40} {per_call_us(fn):6.2f} us")


if __name__ == "__main__":
    main()

"""The order a 1-D tl.sum rounds in, as Triton and tilec build it: the float adds of a thread's registers and
the shuffle offsets across lanes, from each side's PTX (Triton's compile needs no GPU; the device's Triton is
the one that counts). tests/cuda/test_reduce_bits_gpu.py checks the sums' bits; this shows the tree when
they differ.

    python3 bench/reduce_order.py [--block 4096] [--warps 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cuda.test_reduce_bits_gpu import SRC  # noqa: E402


def _tilec(block: int, warps: int) -> str:
    from tilec.compiler.artifact import CompileOptions
    from tilec.compiler.pipeline import compile_kernel

    return compile_kernel(SRC, "whole", signature={"x_ptr": "*fp32", "s_ptr": "*fp32"}, constexprs={"BLOCK": block},
                          hints={"x_ptr": {"divisibility": 16}, "s_ptr": {"divisibility": 16}},
                          options=CompileOptions(target="cuda:sm_90", num_warps=warps), emit="ptx").ptx  # fmt: skip


def _triton(block: int, warps: int) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    path = Path(tempfile.mkdtemp()) / "reduce_kernels.py"
    path.write_text(SRC)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    src = ASTSource(mod.whole, {"x_ptr": "*fp32", "s_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": block}, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", type=int, default=4096)
    ap.add_argument("--warps", type=int, default=4)
    args = ap.parse_args()
    import triton

    for side, ptx in (("triton " + triton.__version__, _triton(args.block, args.warps)), ("tilec", _tilec(args.block, args.warps))):
        adds = re.findall(r"add\.f32\s+(%r\d+), (%r\d+), (%r\d+);", ptx)
        shfl = re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+),", ptx)
        print(f"{side}: {len(adds)} adds; shuffle offsets {shfl}")
        print("  " + " ".join(f"{d}={a}+{b}" for d, a, b in adds[:40]))


if __name__ == "__main__":
    main()

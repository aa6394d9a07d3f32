"""The order a 1-D tl.sum rounds in, as Triton and tilec build it: the float adds of a thread's registers and
the shuffle offsets across lanes, from each side's PTX (Triton's compile needs no GPU; the device's Triton is
the one that counts). tests/cuda/test_reduce_bits_gpu.py checks the sums' bits; this shows the tree when
they differ.

    python3 bench/reduce_order.py [--block 4096] [--warps 4]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.cuda.test_reduce_bits_gpu import SRC  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from static_compare import _tilec_ptx, _triton_ptx  # noqa: E402


def _case(block: int, warps: int) -> tuple:
    """The 1-D sum as a bench/static_compare.py case, built by its two compile helpers."""
    return (SRC, "whole", {"x_ptr": "*fp32", "s_ptr": "*fp32"}, {"BLOCK": block}, ["x_ptr", "s_ptr"], warps, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--block", type=int, default=4096)
    ap.add_argument("--warps", type=int, default=4)
    args = ap.parse_args()
    import triton

    case = _case(args.block, args.warps)
    sides = (("triton " + triton.__version__, _triton_ptx(case, Path(tempfile.mkdtemp()))), ("tilec", _tilec_ptx(case)))
    for side, ptx in sides:
        adds = re.findall(r"add\.f32\s+(%r\d+), (%r\d+), (%r\d+);", ptx)
        shfl = re.findall(r"shfl\.sync\.bfly\.b32\s+%r\d+, %r\d+, (\d+),", ptx)
        print(f"{side}: {len(adds)} adds; shuffle offsets {shfl}")
        print("  " + " ".join(f"{d}={a}+{b}" for d, a, b in adds[:40]))


if __name__ == "__main__":
    main()

"""Compile time, registers and spills of long and tuple-valued scans for cuda:sm_90 (PTX through ptxas, no
GPU): the kernels of tests/cuda/test_scan_parallel.py. Usage (repo root): .venv/bin/python bench/scan_compile.py
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.cuda.test_scan_parallel import _ptx  # noqa: E402 - the repository root first

# (tile shape, scanned axis, kind: 0 cumsum, 1 running max, 2 a 2-tuple affine recurrence)
for shape, axis, kind in [((1, 1024), 1, 0), ((1, 256), 1, 2), ((1, 1024), 1, 2), ((4, 2048), 1, 1)]:
    t = time.perf_counter()
    art = _ptx(*shape, axis, kind, "float32")
    took = time.perf_counter() - t
    print(shape, kind, f"{took:.2f} s", art.metadata["registers"], "regs", art.metadata["spill_stores"], "spills")

"""The host side of Triton's fused-softmax tutorial as published (its `softmax(x)`: `warmup`, the registers and
shared memory read off the handle, the launch through it), per call, under plain Triton and under the drop-in,
each in a process of its own; under the drop-in, where the time goes (cProfile). Its benchmark times
`softmax(x)` with do_bench, so at small N this host path is what it measures.

Usage (GPU machine, repo root): python3 bench/softmax_host.py [PATH/TO/02-fused-softmax.py]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tutorials import load_head  # noqa: E402


def child(tutorial: Path, mode: str) -> None:
    if mode == "tilec":
        import tilec

        tilec.install(strict=True)
    import torch

    mod = load_head(tutorial)  # imports, the kernel, the device's properties, softmax()
    for n in (256, 4096):
        x = torch.randn(4096, n, device="cuda")
        y = mod.softmax(x)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, torch.softmax(x, dim=1))
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(200):
                mod.softmax(x)
            best = min(best, (time.perf_counter() - t0) / 200 * 1e6)
            torch.cuda.synchronize()
        print(f"{mode:7s} N={n:5d} host us per softmax(x): {best:7.1f}", flush=True)
    if mode == "tilec":
        import cProfile
        import pstats

        x = torch.randn(4096, 256, device="cuda")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(500):
            mod.softmax(x)
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(22)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(Path(sys.argv[3]), sys.argv[2])
        return
    tutorial = Path(sys.argv[1] if len(sys.argv) > 1 else ".wt/tutorials/02-fused-softmax.py").resolve()
    env = {**os.environ}
    env.pop("TILEC_TRITON", None)
    for mode in ("triton", "tilec"):
        subprocess.run([sys.executable, __file__, "--child", mode, str(tutorial)], env=env, check=False)


if __name__ == "__main__":
    main()

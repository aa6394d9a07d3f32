"""The fused-softmax tutorial's short rows: Triton's tutorial 02 as published, its `softmax(x)` timed as its
benchmark times it (do_bench's mean, GB/s), at several row lengths, under plain Triton and under the drop-in
in a few variants, each in a process of its own with its own build cache:

- tilec:        the drop-in as it is;
- tilec-exact:  the warmed handle's `n_regs` as ptxas counts them (before: the SM's allocation unit of 8).

(Session 7's first call also timed gpu-prefetch{extra_regs=16} by replacing the pass in the target's module;
a bench flips no codegen switch (tests/cuda/test_codegen_options.py), so that variant is not kept here.)

Per row length: the registers and shared memory the tutorial reads off its warmed handle, the programs it
launches from them (its own formula), how many of those one wave of the GPU holds (the compiler's
blocks_per_sm), GB/s, and the output checked against torch.softmax.

Usage (GPU machine, repo root): python3 bench/softmax_rows.py [PATH/TO/02-fused-softmax.py] [--modes a,b]
    [--n 256,512,...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tutorials import load_head  # noqa: E402

MODES = ("triton", "tilec", "tilec-exact")


def _variant(mode: str) -> None:
    """The drop-in, changed as `mode` says, before the tutorial is loaded."""
    import tilec

    tilec.install(strict=True)
    if mode == "tilec-exact":
        from tilec.client import _dropin

        init = _dropin.Warmed.__init__

        def exact(self, kernel, args, kwargs, art):  # type: ignore[no-untyped-def]
            init(self, kernel, args, kwargs, art)
            self.n_regs = int(art.metadata.get("registers", 0))

        _dropin.Warmed.__init__ = exact


def child(tutorial: Path, mode: str, sizes: list[int]) -> None:
    if mode != "triton":
        _variant(mode)
    import torch
    import triton

    from tilec.compiler.backends.cuda.target import blocks_per_sm

    mod = load_head(tutorial)  # imports, the kernel, the device's properties, softmax()
    seen: dict = {}
    warmup = mod.softmax_kernel.warmup

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        handle = warmup(*args, **kwargs)
        seen["handle"], seen["warps"] = handle, kwargs.get("num_warps", 4)
        return handle

    mod.softmax_kernel.warmup = spy
    stream = torch.cuda.Stream()
    torch.cuda.set_stream(stream)  # as the tutorial's benchmark does
    for n in sizes:
        x = torch.randn(4096, n, device="cuda", dtype=torch.float32)
        y = mod.softmax(x)
        torch.cuda.synchronize()
        ok = torch.allclose(y, torch.softmax(x, dim=1), atol=1e-6, rtol=1e-5)
        h, warps = seen["handle"], seen["warps"]
        regs, smem = h.n_regs, h.metadata.shared
        occ = min(mod.NUM_REGS // (regs * mod.WARP_SIZE * warps), mod.SIZE_SMEM // smem)
        programs = min(mod.NUM_SM * occ, 4096)
        wave = mod.NUM_SM * blocks_per_sm(regs, 32 * warps, smem)
        ms = triton.testing.do_bench(lambda: mod.softmax(x))  # noqa: B023
        gbps = 2 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)
        print(f"{mode:12s} N={n:5d} n_regs={regs:3d} shared={smem:6d} programs={programs:5d} one wave={wave:5d} "
              f"{ms * 1e3:8.2f} us {gbps:8.1f} GB/s {'ok' if ok else 'WRONG'}", flush=True)  # fmt: skip


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(Path(sys.argv[3]), sys.argv[2], [int(v) for v in sys.argv[4].split(",")])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tutorial", nargs="?", default=".wt/tutorials/02-fused-softmax.py")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--n", default="256,384,512,768,1024,1280,2304")
    ns = ap.parse_args()
    tutorial = Path(ns.tutorial).resolve()
    for mode in ns.modes.split(","):
        env = {**os.environ, "TILEC_CACHE_DIR": tempfile.mkdtemp(prefix=f"softmax_rows_{mode}_")}
        env.pop("TILEC_TRITON", None)
        subprocess.run([sys.executable, __file__, "--child", mode, str(tutorial), ns.n], env=env, check=False)


if __name__ == "__main__":
    main()

"""Host time per call of a FlagGems op under plain Triton or under the drop-in (issue 24: when bench/flaggems_ops.py's
rows move with the host, which side's launch path is the cost). One mode per process, as flaggems_ops runs them:
the op is called `--calls` times with no synchronisation between (host microseconds a call), then once more
under cProfile (`--profile`: the 25 costliest functions by own time).

Usage (GPU machine, repo root, FlagGems' src on PYTHONPATH): python3 bench/flaggems_host.py tilec|triton [--op add]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["tilec", "triton"])
    ap.add_argument("--op", default="add")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--why", action="store_true", help="tilec: why warm launches miss runtime/fastpath.py's FastPath")
    args = ap.parse_args()
    sys.argv[1:] = []  # FlagGems reads the command line when it is imported
    if args.mode == "tilec":
        import tilec

        tilec.install(strict=True)
    import flag_gems
    import torch
    from flaggems_ops import cases

    if args.mode == "triton":
        from flaggems_compat import bypass_launch_cache

        bypass_launch_cache()
    misses: dict = {}
    if args.why and args.mode == "tilec":
        from tilec.runtime.fastpath import FastPath

        plain = FastPath.launch

        def traced(self, grid, a, kw):
            ok = plain(self, grid, a, kw)
            if not ok:
                key, _raw = self._key(a, kw)
                why = ("args: " + ", ".join(sorted({type(x).__name__ for x in a}))) if key is None else (
                    f"no entry: key {key!r:.300} among {len(self.table)}: {[repr(k)[:300] for k in self.table][:2]}")
                misses[why] = misses.get(why, 0) + 1
            return ok

        FastPath.launch = traced
    make, call, _tol = cases(torch)[args.op]
    inputs = make()
    with flag_gems.use_gems():
        call(*inputs)
        torch.cuda.synchronize()
        for _round in range(3):
            began = time.perf_counter()
            for _ in range(args.calls):
                call(*inputs)
            host = time.perf_counter() - began
            torch.cuda.synchronize()
            total = time.perf_counter() - began
            print(f"{args.mode} {args.op}: host {host / args.calls * 1e6:.1f} us a call, "
                  f"with the GPU's work {total / args.calls * 1e6:.1f} us a call", flush=True)  # fmt: skip
        for why, n in misses.items():
            print(f"fast path missed {n} times: {why}")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                call(*inputs)
            prof.disable()
            torch.cuda.synchronize()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()

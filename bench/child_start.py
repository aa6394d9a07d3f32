"""How long a bench child takes to start when 1, 2 or 4 GPUs start them at once (issue 28: a tune job's
bench start grows from 0.00 s with one worker to 0.53 s with four). Each GPU gets a process of its own
(CUDA_VISIBLE_DEVICES) that starts R children one after another and times each, in three depths:

- exec: a fresh `python -I` importing numpy and the cuda runtime, then exiting;
- context: the same, then cuInit and the device's primary context;
- sandboxed: a real sandboxed bench child (runtime/sandbox.py Child with runtime/bench's entry), from its
  spawn until it answers its first message, after its imports, namespaces and GPU context (the warm-up of
  runtime/standby.py).

Usage (GPU machine, repo root): python3 bench/child_start.py [--repeat 6] [--gpus 1,2,4] [--depths exec,context,sandboxed]
Prints: depth, GPUs at once, mean and max seconds a start, starts per second over all GPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORTS = "import numpy, tilec.runtime.cuda as rt"


def one(depth: str, repeat: int) -> list[float]:
    """In one GPU's process: `repeat` starts of `depth`, each timed from spawn to its answer."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        if depth == "sandboxed":
            from tilec.runtime.sandbox import Child, Profile
            from tilec.runtime.standby import ENTRY

            child = Child(ENTRY, Profile(kind="cuda"))
            child.send(("warm", "cuda", 0))
            child.send(("cuda:sm_90", None, 0, 0))  # no launch: the child answers a fault once warm
            child.poll(120)
            child.recv()
            times.append(time.perf_counter() - began)
            child.kill(grace_s=0.2)
            continue
        code = IMPORTS + ("; rt._context(0)" if depth == "context" else "")
        env = {k: v for k, v in os.environ.items() if k in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH", "PATH")}
        subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path[:0]={sys.path!r}; {code}"],
                       env=env, check=True)  # fmt: skip
        times.append(time.perf_counter() - began)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--gpus", default="1,2,4")
    ap.add_argument("--depths", default="exec,context,sandboxed")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.repeat)))
        return
    print(f"{'depth':<10} {'GPUs':>4} {'mean s':>7} {'max s':>7} {'starts/s':>9}")
    for depth in args.depths.split(","):
        for n in (int(x) for x in args.gpus.split(",")):
            began = time.perf_counter()
            procs = [
                subprocess.Popen([sys.executable, __file__, "--one", depth, "--repeat", str(args.repeat)],
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                 env={**os.environ, "CUDA_VISIBLE_DEVICES": str(i)})  # fmt: skip
                for i in range(n)
            ]
            times = [t for p in procs for t in json.loads(p.communicate()[0].strip().splitlines()[-1])]
            wall = time.perf_counter() - began
            print(f"{depth:<10} {n:>4} {statistics.mean(times):7.2f} {max(times):7.2f} {len(times) / wall:9.2f}",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

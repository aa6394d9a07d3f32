"""Differential fuzzing of tilec against Triton for a time budget (issue 21): the generator of
tests/fuzz/kernelgen.py writes random Triton-language kernels; each runs on an oracle and on tilec targets,
on the same inputs, and every disagreement is counted by category and saved (source, inputs seed, what
differed) under --out.

    python3 bench/fuzz_vs_triton.py --seconds 600                 # Triton's interpreter vs tilec interp + cpu
    python3 bench/fuzz_vs_triton.py --gpu --seconds 300           # Triton on the GPU vs tilec cuda (and
                                                                   # Triton's interpreter vs Triton's GPU)

On --gpu, kernels never return from inside a runtime loop (Triton's compiler refuses that; its interpreter
runs it). The last line is the summary: kernels, agreements and disagreements per target and category.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz.differential import compare, run_tilec, run_triton, run_triton_interpreter  # noqa: E402
from tests.fuzz.kernelgen import random_program  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0, help="time budget")
    ap.add_argument(
        "--seed", type=int, default=0, help="kernel i is drawn from random.Random(seed * 1_000_003 + i)"
    )
    ap.add_argument("--gpu", action="store_true", help="oracle: Triton on the GPU; tilec target: cuda")
    ap.add_argument(
        "--targets", default=None, help="tilec targets, comma-separated (default interp,cpu or cuda)"
    )
    ap.add_argument("--out", default="fuzz_failures", help="folder for disagreeing kernels")
    ap.add_argument("--json", default=None, help="write the summary here as JSON")
    args = ap.parse_args()
    os.environ.setdefault("TILEC_CACHE_DIR", tempfile.mkdtemp(prefix="tilec_fuzz_cache_"))
    targets = (args.targets or ("cuda" if args.gpu else "interp,cpu")).split(",")
    if args.gpu:
        targets.append("triton-interp")  # where Triton's interpreter is not Triton's GPU semantics
    out = Path(args.out)
    kernels, oracle_rejected = 0, 0
    agree: Counter = Counter()
    disagree: Counter = Counter()
    by_cat: Counter = Counter()
    start = time.monotonic()
    while time.monotonic() - start < args.seconds:
        rng = random.Random(args.seed * 1_000_003 + kernels)
        prog = random_program(rng, loop_returns=not args.gpu, bf16=args.gpu)
        kernels += 1
        seed = kernels
        inputs = prog.inputs(seed)
        oracle = run_triton(prog, inputs, device="cuda") if args.gpu else run_triton_interpreter(prog, inputs)
        if oracle.outputs is None:
            oracle_rejected += 1
            _save(out, f"oracle_{kernels}", prog, seed, {"oracle": oracle.error})
            continue
        for t in targets:
            res = run_triton_interpreter(prog, inputs) if t == "triton-interp" else run_tilec(prog, inputs, t)
            why = (
                res.error
                if res.outputs is None
                else compare(prog, oracle.outputs, res.outputs, fused=args.gpu)
            )
            if why is None:
                agree[t] += 1
                continue
            disagree[t] += 1
            kind = "error" if res.outputs is None else "value"
            for c in sorted(prog.categories) or ["plain"]:
                by_cat[f"{t}:{kind}:{c}"] += 1
            _save(out, f"{t}_{kernels}", prog, seed, {t: why})
    summary = {
        "kernels": kernels,
        "seconds": round(time.monotonic() - start, 1),
        "oracle": "triton-gpu" if args.gpu else "triton-interpreter",
        "oracle_rejected": oracle_rejected,
        "agree": dict(agree),
        "disagree": dict(disagree),
        "disagree_by_category": dict(sorted(by_cat.items())),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    print("SUMMARY " + json.dumps(summary))
    return 0 if not disagree and not oracle_rejected else 1


def _save(out: Path, stem: str, prog, seed: int, why: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    note = (
        f"\n# constexprs: {prog.constexprs}\n# inputs seed: {seed}\n# categories: {sorted(prog.categories)}\n"
    )
    (out / f"{stem}.py").write_text(prog.source + note + "".join(f"# {k}: {v}\n" for k, v in why.items()))


if __name__ == "__main__":
    sys.exit(main())

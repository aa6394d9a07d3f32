"""Two FlagGems ops whose results under the drop-in differed from Triton's in FlagGems' own suite, probed
directly (GPU machine, FlagGems' src on PYTHONPATH): `torch.full_like(int32, 2)` twice (the suite's
full_like case: a launch, then the same op again through FlagGems' launch cache), and dropout's mask from
one generator state under plain Triton and under the drop-in (the bits should be Triton's).

Usage: python3 bench/flaggems_probe.py   (prints one line per check)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(mode: str) -> None:
    if mode == "tilec":
        import tilec

        tilec.install(strict=True)
        from tilec.runtime import cuda as _cuda

        original = _cuda.Launcher.__call__

        def traced(self, raw, grid, stream):  # the arguments of a launch the packer refuses, for the report
            try:
                return original(self, raw, grid, stream)
            except Exception as exc:
                kinds = [f"{type(r).__name__}:{r!r}"[:60] for r in raw]
                raise type(exc)(f"{exc}; packed {kinds}") from None

        _cuda.Launcher.__call__ = traced
    import flag_gems
    import torch

    if mode == "triton":  # FlagGems 3.0's launch cache fails under Triton 3.6 (bench/flaggems_compat.py)
        from flaggems_compat import bypass_launch_cache

        bypass_launch_cache()
    out: dict = {}
    for dt in (torch.int32, torch.int16, torch.int64, torch.float32):
        for fill in (2, 3.1415926, False):
            inp = torch.empty(266, dtype=dt, device="cuda")
            want = torch.full_like(inp, fill)
            got = []
            try:
                for _ in range(3):  # the first launch compiles; the later ones go through FlagGems' launch cache
                    with flag_gems.use_gems():
                        got.append(torch.full_like(inp, fill))
            except Exception as exc:  # noqa: BLE001 - each case reports for itself
                import traceback

                tb = "".join(traceback.format_exception(exc)[-6:])
                out[f"full_like {dt} {fill}"] = {"error": f"{type(exc).__name__}: {exc}"[:600], "tb": tb[-1500:]}
                continue
            bad = [int((g != want).sum()) for g in got]
            out[f"full_like {dt} {fill}"] = {"mismatched": bad, "first": [g[:3].tolist() for g in got]}
    masks = []
    try:
        for p in (0.3, 0.9):
            torch.cuda.manual_seed(1234)
            x = torch.randn(4096, dtype=torch.float16, device="cuda")
            with flag_gems.use_gems():
                y = torch.nn.functional.dropout(x, p, True)
            masks.append((y != 0).cpu().int().tolist())
        out["dropout_masks"] = masks
    except Exception as exc:  # noqa: BLE001
        out["dropout_error"] = f"{type(exc).__name__}: {exc}"[:400]
    out["kron"] = kron_timing(flag_gems, torch, profile=mode == "tilec")
    print(json.dumps(out))


def kron_timing(flag_gems, torch, profile: bool) -> dict:
    """Seconds per torch.kron call (FlagGems' autotuned kernel, key M, N) over a few shapes and dtypes, the
    first call of each (autotuning) and a second; under tilec, cProfile's top entries of the whole loop."""
    import cProfile
    import io
    import pstats
    import time

    times = []
    prof = cProfile.Profile() if profile else None
    try:
        for dt in (torch.float32, torch.int32):
            for sa, sb in (((2, 3), (4, 5)), ((16, 16), (8, 8)), ((3, 33), (17, 5))):
                a = (torch.randn(sa, device="cuda") * 5).to(dt)
                b = (torch.randn(sb, device="cuda") * 5).to(dt)
                for i in range(2):
                    t0 = time.perf_counter()
                    if prof:
                        prof.enable()
                    with flag_gems.use_gems():
                        r = torch.kron(a, b)
                    torch.cuda.synchronize()
                    if prof:
                        prof.disable()
                    ok = bool(torch.equal(r, torch.kron(a, b)))
                    times.append(f"{dt} {sa}x{sb} call {i}: {time.perf_counter() - t0:.3f} s {'ok' if ok else 'WRONG'}")
    except Exception as exc:  # noqa: BLE001
        times.append(f"error {type(exc).__name__}: {exc}"[:400])
    res: dict = {"times": times}
    if prof:
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(30)
        res["profile"] = buf.getvalue()[-6000:]
    return res


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    runs = {}
    for mode in ("triton", "tilec"):
        p = subprocess.run([sys.executable, __file__, "--child", mode], env=env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        runs[mode] = json.loads(lines[-1]) if lines else {"error": p.stderr[-1500:]}
    report(runs)
    print("probe done")


def report(runs: dict) -> None:
    for mode, res in runs.items():
        if "error" in res:
            print(mode, "error:", res["error"])
            continue
        for name, r in res.items():
            if not name.startswith(("full_like", "dropout")):
                continue
            if name == "dropout_error":
                print(f"{mode}: dropout: {r}")
            elif name != "dropout_masks" and "error" in r:
                print(f"{mode}: {name}: {r['error']}\n{r.get('tb', '')}")
            elif name != "dropout_masks" and any(r["mismatched"]):
                print(f"{mode}: {name}: mismatched {r['mismatched']} first values {r['first']}")
            elif name != "dropout_masks":
                print(f"{mode}: {name}: right on every call")
    if all("dropout_masks" in r for r in runs.values()):
        for i, p in enumerate((0.3, 0.9)):
            a, b = runs["triton"]["dropout_masks"][i], runs["tilec"]["dropout_masks"][i]
            same = sum(x == y for x, y in zip(a, b, strict=True))
            print(f"dropout p={p}: tilec's mask equals Triton's on {same}/{len(a)} elements; kept {sum(a)} vs {sum(b)}")
    for mode, res in runs.items():
        kron = res.get("kron") or {}
        print(f"{mode}: kron\n  " + "\n  ".join(kron.get("times", [])))
        if kron.get("profile"):
            print(kron["profile"])


if __name__ == "__main__":
    main()

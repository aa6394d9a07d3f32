"""FlagGems' operators (a Triton library tilec did not write) timed under plain Triton and under the drop-in,
side by side: each op runs in a process of its own mode (`tilec.install()` must come before flag_gems is
imported), is checked against torch's own op on the same inputs, then timed with triton.testing.do_bench
(median; the first call, which compiles and autotunes, is left out). Under tilec the run is strict: a kernel
tilec could not take fails its row instead of timing Triton's build.

With --graph each op is timed inside a CUDA graph (triton.testing.do_bench_cudagraph: the calls are captured
once and replayed), which takes the host's launch path out of both sides' figures: kernels against kernels.
An op that cannot be captured (Liger's cross-entropy reads a count back to the host with .item()) is timed
there by its kernels' own durations under torch.profiler instead, per call, the row marked "(profiler)".
--profile prints, under each row, where each side's host time goes (cProfile over 200 calls).
Without it the figures include each side's launch path (FlagGems' own Python wrappers, then Triton's or
tilec's launch), which for small ops is most of the time.

Usage (GPU machine, repo root, FlagGems' src on PYTHONPATH):
    python3 bench/flaggems_ops.py [--graph] [--json OUT] [--only softmax,mm]
`--library liger` times Liger-Kernel's ops instead (its src/ on PYTHONPATH: bench/NOTES-dropin.md).
Prints: op, Triton ms, tilec ms, ratio (Triton ms / tilec ms), then the geometric mean and the worst ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _rotated(q, k, c, s):  # type: ignore[no-untyped-def]
    """q and k rotated by halves (not interleaved) in torch, c and s (half the head's width) broadcast over them,
    flattened one after the other: the rotary embedding both libraries' kernels compute."""
    import torch

    def one(x):  # type: ignore[no-untyped-def]
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * c.float() - x2 * s.float(), x2 * c.float() + x1 * s.float()], dim=-1).to(x.dtype)

    return torch.cat([one(q).flatten(), one(k).flatten()])


def _rope(q, k, cos, sin, pos):  # type: ignore[no-untyped-def]
    """What flag_gems.apply_rotary_pos_emb computes: q, k (tokens, heads, dim), cos/sin (positions, dim / 2)."""
    return _rotated(q, k, cos[pos][:, None, :], sin[pos][:, None, :])


def cases(torch):
    """name -> (make inputs, call under flag_gems, tolerance[, torch's reference where the call is FlagGems' own
    function]); shapes as FlagGems' own benchmarks use them."""
    f16, f32, dev = torch.float16, torch.float32, "cuda"

    def rnd(*shape, dtype=f16):
        return torch.randn(*shape, dtype=dtype, device=dev)

    def rope_inputs():  # type: ignore[no-untyped-def]
        pos = torch.arange(4096, device=dev)
        return rnd(4096, 32, 128), rnd(4096, 8, 128), rnd(4096, 64), rnd(4096, 64), pos

    def rope(q, k, cos, sin, pos):  # type: ignore[no-untyped-def]
        import flag_gems

        qe, ke = flag_gems.apply_rotary_pos_emb(q, k, cos, sin, pos)
        return torch.cat([qe.flatten(), ke.flatten()])

    return {
        # an autotuned L2 norm along rows (FlagGems' l2_norm_kernel, its tuning list) and a rotary embedding: two of
        # the library kernels issue 24 names besides softmax and cross-entropy
        "vector_norm": (lambda: (rnd(4096, 4096, dtype=f32),), lambda a: torch.linalg.vector_norm(a, 2, dim=-1), 1e-4),
        "rotary": (rope_inputs, rope, 2e-3, _rope),
        "add": (lambda: (rnd(4096, 4096), rnd(4096, 4096)), lambda a, b: torch.add(a, b), 1e-3),
        "mul_scalar": (lambda: (rnd(4096, 4096),), lambda a: a * 1.5, 1e-3),
        "gelu": (lambda: (rnd(4096, 4096),), lambda a: torch.nn.functional.gelu(a), 2e-3),
        "exp": (lambda: (rnd(4096, 4096, dtype=f32),), lambda a: torch.exp(a), 1e-5),
        "sum_dim": (lambda: (rnd(4096, 4096, dtype=f32),), lambda a: torch.sum(a, dim=1), 1e-4),
        "mean_all": (lambda: (rnd(4096, 4096, dtype=f32),), lambda a: torch.mean(a), 1e-4),
        "amax": (lambda: (rnd(4096, 4096, dtype=f32),), lambda a: torch.amax(a, dim=-1), 0.0),
        "argmax": (lambda: (rnd(4096, 4096, dtype=f32),), lambda a: torch.argmax(a, dim=-1), 0.0),
        "softmax": (lambda: (rnd(4096, 4096),), lambda a: torch.softmax(a, dim=-1), 2e-3),
        "log_softmax": (lambda: (rnd(4096, 4096, dtype=f32),), lambda a: torch.log_softmax(a, dim=-1), 1e-4),
        "layer_norm": (lambda: (rnd(4096, 4096), rnd(4096), rnd(4096)),
                       lambda a, w, b: torch.layer_norm(a, (4096,), w, b, 1e-5), 5e-3),
        "cumsum": (lambda: (rnd(1024, 4096, dtype=f32),), lambda a: torch.cumsum(a, dim=1), 1e-3),
        "mm": (lambda: (rnd(4096, 4096), rnd(4096, 4096)), lambda a, b: torch.mm(a, b), 2e-2),
        "bmm": (lambda: (rnd(16, 1024, 1024), rnd(16, 1024, 1024)), lambda a, b: torch.bmm(a, b), 2e-2),
        "cross_entropy": (lambda: (rnd(4096, 32000, dtype=f32), torch.randint(0, 32000, (4096,), device=dev)),
                          lambda a, t: torch.nn.functional.cross_entropy(a, t), 1e-4),
        "where": (lambda: (rnd(4096, 4096) > 0, rnd(4096, 4096), rnd(4096, 4096)),
                  lambda c, a, b: torch.where(c, a, b), 0.0),
    }


# --cpu-check: the Liger cases on the cpu target through the drop-in, at these sizes, in f32
_SMALL = {4096: 6, 2048: 6, 32000: 100, 32: 4, 8: 2, 128: 16, 64: 8}


def liger_cases(torch, dev: str = "cuda"):
    """Liger-Kernel's ops (its src/ on PYTHONPATH) that issue 24 names: a row softmax, a cross-entropy over a
    32,000-word vocabulary, a KL divergence and RoPE; name -> (make inputs, Liger's call, tolerance, torch's).
    On dev="cpu" the sizes are _SMALL's and the halves floats."""
    import torch.nn.functional as F
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    from liger_kernel.ops.kl_div import LigerKLDivLossFunction
    from liger_kernel.ops.rope import LigerRopeFunction
    from liger_kernel.ops.softmax import LigerSoftmaxFunction

    cpu = dev == "cpu"
    f32 = torch.float32
    f16 = f32 if cpu else torch.float16

    def n(*shape):  # type: ignore[no-untyped-def]
        return tuple(_SMALL.get(s, s) for s in shape) if cpu else shape

    def rnd(*shape, dtype=f16):
        return torch.randn(*n(*shape), dtype=dtype, device=dev)

    def kl_inputs():  # type: ignore[no-untyped-def]
        return rnd(2048, 32000, dtype=f32).log_softmax(-1), rnd(2048, 32000, dtype=f32).softmax(-1)

    def rope_inputs():  # type: ignore[no-untyped-def]
        ang = torch.rand(*n(1, 4096, 64), device=dev)
        cos, sin = (torch.cat([t, t], -1).to(f16) for t in (ang.cos(), ang.sin()))
        return rnd(1, 32, 4096, 128), rnd(1, 8, 4096, 128), cos, sin

    def rope_ref(q, k, cos, sin):  # type: ignore[no-untyped-def]  # q, k (1, heads, seq, dim); cos/sin (1, seq, dim)
        half = cos.shape[-1] // 2
        return _rotated(q, k, cos[:, None, :, :half], sin[:, None, :, :half])

    def rope(q, k, cos, sin):  # type: ignore[no-untyped-def]
        return torch.cat([t.flatten() for t in LigerRopeFunction.apply(q, k, cos, sin)])

    return {
        "softmax": (lambda: (rnd(4096, 4096),), LigerSoftmaxFunction.apply, 2e-3, lambda a: torch.softmax(a, -1)),
        # Liger's cross-entropy writes its gradient into the logits: the check is the first call's loss
        "cross_entropy": (lambda: (rnd(4096, 32000, dtype=f32), torch.randint(0, n(32000)[0], n(4096), device=dev)),
                          lambda a, t: LigerCrossEntropyFunction.apply(a, t, None)[0], 1e-4,
                          lambda a, t: F.cross_entropy(a, t)),  # fmt: skip
        "kl_div": (kl_inputs, lambda x, y: LigerKLDivLossFunction.apply(x, y, "batchmean", False, 1e-10), 1e-4,
                   lambda x, y: F.kl_div(x, y, reduction="batchmean")),  # fmt: skip
        "rope": (rope_inputs, rope, 2e-3, rope_ref),
    }


# ops whose call synchronises with the host (no CUDA graph can hold them): their kernels are timed by the profiler
NOT_CAPTURABLE = {("liger", "cross_entropy")}


def _kernels_ms(torch, fn, calls: int = 100) -> float:  # type: ignore[no-untyped-def]
    """The device time of every kernel a call launches (torch.profiler's CUPTI durations), per call, in ms."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return sum(e.self_device_time_total for e in prof.key_averages()) / calls / 1000.0


def _host_profile(fn, calls: int = 200) -> str:  # type: ignore[no-untyped-def]
    """cProfile of `calls` calls: the 24 functions of most cumulative time."""
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(24)
    return out.getvalue()


def child(mode: str, only: set[str], graph: bool, library: str = "flaggems", host_profile: bool = False) -> None:
    """Run every op of `library` in this process's mode; one JSON line per op on stdout."""
    import contextlib

    if mode == "tilec":
        import tilec

        tilec.install(strict=True)
    import torch
    import triton

    if library == "liger":
        table, gems = liger_cases(torch), contextlib.nullcontext
    else:
        import flag_gems

        table, gems = cases(torch), flag_gems.use_gems
        if mode == "triton":  # FlagGems 3.0's launch cache fails under Triton 3.6 (bench/flaggems_compat.py)
            from flaggems_compat import bypass_launch_cache

            bypass_launch_cache()
    torch.manual_seed(0)
    for name, (make, call, tol, *ref) in table.items():
        if only and name not in only:
            continue
        row: dict = {"op": name}
        try:
            args = make()
            want = (ref[0] if ref else call)(*args)  # torch's own op
            with gems():
                got = call(*args)  # compiles (and autotunes) the first time
                torch.cuda.synchronize()
                err = (got.double() - want.double()).abs().max().item() if got.numel() else 0.0
                scale = want.double().abs().max().item() or 1.0
                row["ok"] = bool(err <= tol * max(scale, 1.0)) and not math.isnan(err)
                row["err"] = err
                fn = lambda c=call, a=args: c(*a)  # noqa: E731
                if graph and (library, name) in NOT_CAPTURABLE:
                    row["ms"], row["how"] = _kernels_ms(torch, fn), "profiler"
                elif graph:
                    row["ms"] = triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
                else:
                    row["ms"] = triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median")
                if host_profile:
                    row["profile"] = _host_profile(fn)
        except Exception as exc:  # noqa: BLE001 - the row records why
            row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        print(json.dumps(row), flush=True)
    if mode == "tilec":
        import tilec

        print(json.dumps({"stats": {k: v for k, v in tilec.stats().items() if k != "reasons"}}), flush=True)


def cpu_check(only: set[str]) -> None:
    """Liger's cases on the cpu target through the drop-in (strict), each against torch: that the drop-in takes
    them, without a GPU."""
    import tilec

    tilec.install(strict=True)
    import torch

    torch.manual_seed(0)
    for name, (make, call, tol, ref) in liger_cases(torch, "cpu").items():
        if only and name not in only:
            continue
        args = make()
        want, got = ref(*args), call(*args)
        err = (got.double() - want.double()).abs().max().item()
        ok = err <= tol * max(want.double().abs().max().item(), 1.0)
        print(f"{name:16s} {'ok' if ok else 'WRONG'} (max err {err:.2g}; inputs {[tuple(a.shape) for a in args]})")
    print("tilec:", {k: v for k, v in tilec.stats().items() if k != "reasons"})


def run_mode(mode: str, only: str, timeout: int, graph: bool, library: str = "flaggems",
             host_profile: bool = False) -> dict[str, dict]:  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("TILEC_TRITON", None)
    flags = (["--graph"] if graph else []) + (["--profile"] if host_profile else [])
    p = subprocess.run([sys.executable, __file__, "--child", mode, "--only", only, "--library", library, *flags],
                       env=env, capture_output=True, text=True, timeout=timeout)  # fmt: skip
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            rows[rec.get("op", "_stats")] = rec
    if p.returncode:
        rows["_error"] = {"error": p.stderr[-1500:]}
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--only", default="")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--timeout", type=int, default=400)
    ap.add_argument("--graph", action="store_true", help="time inside a CUDA graph (kernels, not launch paths)")
    ap.add_argument("--library", default="flaggems", choices=("flaggems", "liger"),
                    help="whose ops: FlagGems' (its src/ on PYTHONPATH) or Liger-Kernel's (its src/ on PYTHONPATH)")
    ap.add_argument("--profile", action="store_true", help="cProfile each side's calls (host time)")
    ap.add_argument("--cpu-check", action="store_true", help="no GPU: Liger's cases, small, on tilec's cpu target "
                    "through the drop-in, each against torch")  # fmt: skip
    args = ap.parse_args()
    only = {o for o in args.only.split(",") if o}
    if args.cpu_check:
        cpu_check(only)
        return
    if args.child:
        child(args.child, only, args.graph, args.library, args.profile)
        return
    triton_rows = run_mode("triton", args.only, args.timeout, args.graph, args.library, args.profile)
    tilec_rows = run_mode("tilec", args.only, args.timeout, args.graph, args.library, args.profile)
    print("timed in CUDA graphs (kernels only)" if args.graph else "timed with launches (host path included)")
    print(f"{'op':16s} {'triton ms':>10s} {'tilec ms':>10s} {'ratio':>7s}  check")
    ratios = []
    for name, t in triton_rows.items():
        if name.startswith("_"):
            continue
        c = tilec_rows.get(name, {"error": "no row (the tilec run ended early)"})
        if "ms" in t and "ms" in c and c.get("ok"):
            ratio = t["ms"] / c["ms"]
            ratios.append(ratio)
            how = " (profiler)" if c.get("how") else ""
            print(f"{name:16s} {t['ms']:10.4f} {c['ms']:10.4f} {ratio:7.2f}  ok (tilec max err {c['err']:.2g}){how}")
        else:
            why = c.get("error") or t.get("error") or f"wrong result (max err {c.get('err')})"
            print(f"{name:16s} {t.get('ms', float('nan')):10.4f} {c.get('ms', float('nan')):10.4f} {'-':>7s}  {why}")
        for side, rec in (("triton", t), ("tilec", c)):
            if rec.get("profile"):
                print(f"{side}: {rec['profile']}")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean {geo:.3f} over {len(ratios)} ops; worst {min(ratios):.2f}")
    for rows in (triton_rows, tilec_rows):
        if "_error" in rows:
            print(rows["_error"]["error"])
    if "_stats" in tilec_rows:
        print("tilec:", tilec_rows["_stats"]["stats"])
    if args.json:
        args.json.write_text(json.dumps({"triton": triton_rows, "tilec": tilec_rows}, indent=1))


if __name__ == "__main__":
    main()

"""Each autotune config of a bench/speed_kernels.py kernel, timed alone under Triton and under tilec (the
kernel's source without its autotune decorator, the config's constexprs and launch options passed at the
launch): where tilec's autotuner picks another config than Triton's, this says which configs tilec builds
slower, with the registers and spills of tilec's build.

Usage (GPU machine, repo root): python3 bench/config_sweep.py [bmm_kernel matmul_kernel]
"""

from __future__ import annotations

import re
import sys

import torch
import triton

from tilec import client

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from speed import TEXT, TRI, cdiv  # noqa: E402


def untuned(name: str):
    """tilec's kernel `name` from the bench source with its autotune decorator taken off."""
    text = re.sub(r"@triton\.autotune\([^\n]*\)\n(@triton\.jit\ndef " + name + r"\()", r"\1", TEXT)
    return client.jit(text, name)


def launches(name: str):
    s, bt = 4096, 16
    if name == "bmm_kernel":
        s = 1024
        a = torch.randn(bt, s, s, device="cuda", dtype=torch.float16)
        b = torch.randn(bt, s, s, device="cuda", dtype=torch.float16)
        c = torch.empty(bt, s, s, device="cuda", dtype=torch.float16)

        def call(k, meta, opts):
            grid = (cdiv(s, meta["BLOCK_SIZE_M"]), cdiv(s, meta["BLOCK_SIZE_N"]), bt)
            return k[grid](a, b, c, s, s, s, *a.stride(), *b.stride(), *c.stride(), **meta, **opts)

        return call, c
    a = torch.randn(s, s, device="cuda", dtype=torch.float16)
    b = torch.randn(s, s, device="cuda", dtype=torch.float16)
    c = torch.empty(s, s, device="cuda", dtype=torch.float16)

    def call(k, meta, opts):
        grid = (cdiv(s, meta["BLOCK_SIZE_M"]) * cdiv(s, meta["BLOCK_SIZE_N"]),)
        return k[grid](a, b, c, s, s, s, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                       **meta, **opts)  # fmt: skip

    return call, c


def sweep(name: str) -> None:
    tuner = getattr(TRI, name)
    tri, til = tuner.fn, untuned(name)
    call, out = launches(name)
    print(f"{name}: config, Triton ms, tilec ms, ratio, tilec registers/spills/shared bytes, Triton's")
    for cfg in tuner.configs:
        meta = dict(cfg.kwargs)
        opts = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        row = f"  {meta} w{cfg.num_warps} s{cfg.num_stages}"
        times, compiled = {}, None
        for side, k in (("triton", tri), ("tilec", til)):
            try:
                got = call(k, meta, opts)
                compiled = got if side == "triton" else compiled  # Triton's launch returns its CompiledKernel
                torch.cuda.synchronize()
                times[side] = triton.testing.do_bench(lambda k=k, m=meta, o=opts: call(k, m, o), warmup=25, rep=100)
            except Exception as exc:  # noqa: BLE001 - the row says why
                times[side] = float("nan")
                row += f" {side} error {type(exc).__name__}: {str(exc)[:160]}"
        art = next(reversed(til.cache.values()), None) if til.cache else None
        regs = (f"{art.metadata.get('registers')}/{art.metadata.get('spill_stores')}/{art.metadata.get('shared_bytes')}"
                if art is not None else "-")  # fmt: skip
        theirs = (f"{getattr(compiled, 'n_regs', '?')}/{getattr(compiled, 'n_spills', '?')}/"
                  f"{getattr(getattr(compiled, 'metadata', None), 'shared', '?')}")  # fmt: skip
        t, c = times["triton"], times["tilec"]
        print(f"{row}: {t:.4f} {c:.4f} {t / c:.2f} {regs} {theirs}", flush=True)


def main() -> None:
    for name in sys.argv[1:] or ["bmm_kernel", "matmul_kernel"]:
        sweep(name)


if __name__ == "__main__":
    main()

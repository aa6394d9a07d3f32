"""Where the batched matmul's gap at Triton's config comes from (issue 24: 0.82x at 128x128x64 w4 s4 where the
4096 matmul is at 0.99x): bench/speed_kernels.py's bmm_kernel in variants, each timed under Triton and tilec at
that one config, same inputs, same run:

- as written: 16 x 1024^3, M/N masks on the loads and the store, K masks;
- no M/N masks (the shapes are multiples of the tile): the loads keep their K masks, the store none;
- no masks at all;
- K 4096 (16 x 1024 x 1024 x 4096): four times the iterations per tile, the same tiles.

Usage (GPU machine, repo root): python3 bench/bmm_probe.py [--once] [--variant NAME]
(--once: each side launched once per variant, untimed, for a profiler: `bash bench/gpu_run.sh ncu_bmm`;
--dump DIR: both sides' PTX and cubin of each variant written there, for nvdisasm on another machine)
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path

import torch
import triton

from tilec import client

SRC = Path(__file__).resolve().parent / "speed_kernels.py"
CONFIG = {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 8}
OPTS = {"num_warps": 4, "num_stages": 4}


def bmm_source() -> str:
    text = SRC.read_text()
    head = text[: text.index("@triton.autotune")]  # the imports
    body = re.search(r"@triton\.jit\ndef bmm_kernel\(.*?(?=\n\n\n)", text, re.S).group(0)
    return head + body + "\n"


def variants() -> dict[str, str]:
    src = bmm_source()
    no_mn = src.replace("(offs_m[:, None] < M) & (offs_k[None, :] + k < K)", "offs_k[None, :] + k < K")
    no_mn = no_mn.replace("(offs_k[:, None] + k < K) & (offs_n[None, :] < N)", "offs_k[:, None] + k < K")
    no_mn = no_mn.replace(", mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))", ")")
    none = re.sub(r", mask=offs_k\[[^\n]*?< K, other=0\.0\)", ")", no_mn)
    assert no_mn != src and none != no_mn, "the kernel's masks are not where this probe looks for them"
    return {"as written": src, "no M/N masks": no_mn, "no masks": none, "as written, K 4096": src}


def triton_kernel(text: str):
    path = Path(tempfile.mkdtemp()) / "bmm_variant.py"  # Triton reads a kernel's source from its file
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.bmm_kernel


def main() -> None:
    once = "--once" in sys.argv
    only = sys.argv[sys.argv.index("--variant") + 1] if "--variant" in sys.argv else None
    dump = Path(sys.argv[sys.argv.index("--dump") + 1]) if "--dump" in sys.argv else None
    torch.manual_seed(0)
    print(f"{'variant':<22} {'Triton ms':>9} {'tilec ms':>9} {'ratio':>6}  tilec regs/spills")
    for name, text in variants().items():
        if only is not None and name != only:
            continue
        bt, s, k = 16, 1024, 4096 if "4096" in name else 1024
        a = torch.randn(bt, s, k, device="cuda", dtype=torch.float16)
        b = torch.randn(bt, k, s, device="cuda", dtype=torch.float16)
        grid = (s // 128, s // 128, bt)
        times, outs = {}, {}
        til = client.jit(text, "bmm_kernel")
        for side, kern in (("triton", triton_kernel(text)), ("tilec", til)):
            c = torch.empty(bt, s, s, device="cuda", dtype=torch.float16)

            def call(kern=kern, c=c, a=a, b=b, grid=grid, s=s, k=k):
                return kern[grid](a, b, c, s, s, k, *a.stride(), *b.stride(), *c.stride(), **CONFIG, **OPTS)

            ret = call()
            if dump is not None:
                tag = re.sub(r"\W+", "_", name).strip("_")
                dump.mkdir(parents=True, exist_ok=True)
                if side == "triton":
                    (dump / f"{tag}.triton.ptx").write_text(ret.asm["ptx"])
                    (dump / f"{tag}.triton.cubin").write_bytes(ret.asm["cubin"])
                else:
                    art = next(reversed(til.cache.values()))
                    (dump / f"{tag}.tilec.ptx").write_text(art.ptx)
                    (dump / f"{tag}.tilec.cubin").write_bytes(art.binary)
            torch.cuda.synchronize()
            outs[side] = c
            times[side] = (float("nan") if once
                           else triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median"))  # fmt: skip
        same = torch.equal(outs["triton"], outs["tilec"])
        art = next(reversed(til.cache.values()))
        regs = f"{art.metadata.get('registers')}/{art.metadata.get('spill_stores')}"
        t, c = times["triton"], times["tilec"]
        print(f"{name:<22} {t:9.4f} {c:9.4f} {t / c:6.2f}  {regs}  {'bits=Triton' if same else 'bits differ'}",
              flush=True)  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()

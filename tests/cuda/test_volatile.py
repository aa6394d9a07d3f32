"""`tl.load(..., volatile=True)` reads memory every time, as Triton's ld.volatile does. The cuda lowering had set
a flag llvmlite's load never prints, so every volatile load was a plain one: a spin on a flag that another
program stores (FlagGems' radix sort waits so, in a decoupled look-back) was read once, and LLVM made the wait
an endless loop (`$L: bra.uni $L`), which hung FlagGems' sort tests. Checked in the PTX here (ptxas assembles
it) and, on the GPU, by a chain of programs each waiting for the one before it (in a child process, so that a
hang fails the test instead of stopping the run)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from tilec.compiler.artifact import CompileOptions
from tilec.compiler.pipeline import compile_kernel

from .gpu import gpu_reason

CHAIN = """
import triton
import triton.language as tl


@triton.jit
def chain(flags, vals, out):
    # program p waits until program p-1 has published its prefix, then publishes its own (value + 1: 0 is
    # "not yet"); the look-back of a single-pass scan, one step deep
    pid = tl.program_id(0)
    prefix = tl.load(vals + pid)
    if pid > 0:
        seen = tl.load(flags + pid - 1, volatile=True)
        while seen == 0:
            seen = tl.load(flags + pid - 1, volatile=True)
        prefix += seen - 1
    tl.store(flags + pid, prefix + 1, cache_modifier=".cg")
    tl.store(out + pid, prefix)


@triton.jit
def poll(flags, out, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(flags + i, volatile=True))
    tl.store(out + BLOCK + i, tl.load(flags + i, mask=i < 7, other=0, volatile=True))
"""

SIG = {"flags": "*i32", "vals": "*i32", "out": "*i32"}


def _ptx(name: str, sig: dict, constexprs: dict | None = None) -> str:
    art = compile_kernel(CHAIN, name, signature=sig, constexprs=constexprs or {},
                         options=CompileOptions(target="cuda:sm_90", num_warps=1), emit="cubin")  # fmt: skip
    assert art.binary[:4] == b"\x7fELF"
    return art.ptx


def test_a_spin_on_a_volatile_flag_reads_memory_each_time() -> None:
    ptx = _ptx("chain", SIG)
    assert not re.search(r"^(\$L\w+):\s*\n\s*bra(\.uni)?\s+\1;", ptx, re.M), "an endless loop where the wait was"
    # the wait: a block that loads the flag volatile and branches back to itself while it is 0
    loop = re.search(r"^(\$L\w+):\s*\n\s*ld\.volatile\.global\.b32\s+(%r\d+)[^\n]*\n(?:[^\n]*\n){0,2}?\s*@%p\d+ bra\s+\1;",
                     ptx, re.M)  # fmt: skip
    assert loop is not None, ptx[-2500:]


def test_volatile_tile_loads_are_ld_volatile_masked_or_not() -> None:
    ptx = _ptx("poll", {"flags": "*i32", "out": "*i32"}, {"BLOCK": 32})
    assert "ld.volatile.global" in ptx
    assert not re.search(r"\bld\.global", ptx), "no plain global load is left (the masked one is volatile too)"


@pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")
def test_a_chain_of_programs_waiting_on_each_other_ends_on_the_gpu(tmp_path) -> None:
    kernel = tmp_path / "chain_kernels.py"
    kernel.write_text(CHAIN)
    script = textwrap.dedent(f"""
        import torch
        from tilec import client
        k = client.jit({str(kernel)!r}, "chain", server=False)
        n = 2048
        vals = torch.randint(0, 5, (n,), dtype=torch.int32, device="cuda")
        flags = torch.zeros(n, dtype=torch.int32, device="cuda")
        out = torch.empty(n, dtype=torch.int32, device="cuda")
        k[(n,)](flags, vals, out, num_warps=1)
        torch.cuda.synchronize()
        assert torch.equal(out, torch.cumsum(vals, 0).to(torch.int32)), (out[:8], vals[:8])
        print("chain ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "chain ok" in done.stdout, done.stderr[-3000:]


def test_the_chain_runs_on_the_cpu_target(tmp_path) -> None:
    import numpy as np

    from tilec import client

    (tmp_path / "chain_kernels.py").write_text(CHAIN)
    k = client.jit(str(tmp_path / "chain_kernels.py"), "chain", server=False)
    n = 1024
    vals = np.random.default_rng(3).integers(0, 5, n).astype(np.int32)
    flags, out = np.zeros(n, np.int32), np.empty(n, np.int32)
    k[(n,)](flags, vals, out)
    assert (out == np.cumsum(vals)).all() and (flags == out + 1).all()

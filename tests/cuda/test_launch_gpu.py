"""Warm launches on a real GPU: an autotuned kernel's cached launch takes the fast path (no binding, no
tuning-key work) while the autotune key's values are those it was tuned for; heuristics computed from
values are recomputed for each value. Skips where there is no GPU (the device machine runs it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cuda.gpu import gpu_reason
from tests.cuda.test_launch_path import AUTOTUNED, HEURISTIC
from tilec import client

pytestmark = pytest.mark.skipif(gpu_reason() is not None, reason=gpu_reason() or "")


def _grid(meta: dict) -> tuple:
    return (-(-meta["n"] // meta["BLOCK"]),)


def test_autotuned_warm_launch_skips_the_autotuned_path(monkeypatch) -> None:
    import torch

    k = client.jit(AUTOTUNED, "add_tuned")
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    k[_grid](x, y, out, 4096)  # tunes, then remembers the choice for this tuning key
    calls = []
    real = k._run_autotuned
    monkeypatch.setattr(k, "_run_autotuned", lambda *a: calls.append(a[3]) or real(*a))
    out.zero_()
    k[_grid](x, y, out, 4096)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert calls == []  # the warm launch never reached the autotuned path
    x2, y2 = torch.randn(8192, device="cuda"), torch.randn(8192, device="cuda")
    out2 = torch.empty_like(x2)
    k[_grid](x2, y2, out2, 8192)  # a new tuning key: the full path tunes it
    torch.cuda.synchronize()
    torch.testing.assert_close(out2, x2 + y2, rtol=0, atol=0)
    assert len(calls) == 1 and len(k.best_configs) == 2


def test_heuristics_follow_each_value() -> None:
    import torch

    k = client.jit(HEURISTIC, "add_one")
    for n in (4096, 4000, 4096, 1000):
        x = torch.randn(n, device="cuda")
        out = torch.full((n,), float("nan"), device="cuda")
        k[_grid](x, out, n, BLOCK=1024)
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x + (1.0 if n % 1024 == 0 else 2.0), rtol=0, atol=0)


def test_autotune_times_the_gpu_not_the_host_path() -> None:
    """Configs are timed as Triton's do_bench times them (CUDA events around each run, queued behind a spin):
    a one-block kernel's trial is a few microseconds of GPU time, not the full host launch path (hundreds of
    microseconds), which hid the configs' differences from the choice."""
    import torch

    k = client.jit(AUTOTUNED, "add_tuned")
    x, y = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
    out = torch.empty_like(x)
    k[_grid](x, y, out, 64)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    (trials,) = k.trials.values()
    assert len(trials) == 2 and all(0 < t < 30e-6 for _, t in trials), trials


def test_torch_compile_warm_launches_follow_every_call() -> None:
    """tilec.inductor's warm launch (the addresses packed, nothing else looked at) gives eager's results for
    new tensors of the same shape, a misaligned view (the full path takes it), another stream, and a second
    shape (a new graph); the warm table holds what the calls made."""
    import torch

    import tilec.inductor

    torch._dynamo.reset()
    fn = torch.compile(lambda a, b: a * 2.0 + b.sin(), backend=tilec.inductor.backend, dynamic=False)
    for _ in range(3):
        a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
        torch.testing.assert_close(fn(a, b), a * 2.0 + b.sin())
    big = torch.randn(4097, device="cuda")
    a, b = big[1:], torch.randn(4096, device="cuda")  # 4 bytes past an aligned start
    torch.testing.assert_close(fn(a, b), a * 2.0 + b.sin())
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
        got = fn(a, b)
    side.synchronize()
    torch.testing.assert_close(got, a * 2.0 + b.sin())
    a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    torch.testing.assert_close(fn(a, b), a * 2.0 + b.sin())
    assert tilec.inductor.stats()["tilec"] >= 1


def test_one_cubin_for_an_int_and_a_float_argument_is_launched_with_each_ones_layout() -> None:
    """The GPU side of tests/client/test_same_binary.py: the same bytes, two argument layouts, right bits."""
    import torch

    from tests.client.test_same_binary import BITS

    k = client.jit(BITS, "bits")
    a, b = torch.zeros(64, device="cuda", dtype=torch.int32), torch.zeros(64, device="cuda", dtype=torch.int32)
    k[(1,)](a, 3.5, 64, BLOCK=64)
    k[(1,)](b, 2, 64, BLOCK=64)
    torch.cuda.synchronize()
    assert int(a[0]) == 0x40600000 and (b == 2).all()


class _Strided:
    """A duck-typed tensor over a torch CUDA tensor, as FlagGems' StridedBuffer is (an offset view of it)."""

    def __init__(self, base, offset: int = 0) -> None:
        self.base, self.offset, self.dtype, self.device = base, offset, base.dtype, base.device

    def data_ptr(self) -> int:
        return self.base.data_ptr() + self.offset * self.base.element_size()


def test_duck_typed_tensors_take_the_warm_launch(monkeypatch) -> None:
    import torch

    from tests.kernels import source

    k = client.jit(source("vector_add"), "add_kernel")
    x, y = torch.randn(4096 + 4, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.zeros(4096, device="cuda")
    k[(4,)](_Strided(x), y, _Strided(out), 4096, BLOCK_SIZE=1024)
    full = []
    real = k._run_once
    monkeypatch.setattr(k, "_run_once", lambda *a, **kw: full.append(1) or real(*a, **kw))
    for _ in range(3):
        out.zero_()
        k[(4,)](_Strided(x), y, _Strided(out), 4096, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x[:4096] + y, rtol=0, atol=0)
    assert full == []  # warm: no binding, no artifact lookup
    k[(4,)](_Strided(x, offset=4), y, _Strided(out), 4096, BLOCK_SIZE=1024)  # 16 bytes in: still aligned
    k[(4,)](_Strided(x, offset=1), y, _Strided(out), 4096, BLOCK_SIZE=1024)  # misaligned: another build
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x[1:4097] + y, rtol=0, atol=0)
    assert full == [1]


def test_a_warmed_build_is_kept_per_call_key(monkeypatch) -> None:
    """Triton's fused-softmax tutorial calls `kernel.warmup(...)` before every launch: the second warm of the
    same call key returns the kept build without binding or the cache; another dtype or size class is built."""
    import torch

    k = client.jit((Path(__file__).resolve().parents[1] / "kernels/vector_add.py").read_text(), "add_kernel")
    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    first = k.warm((x, y, out, 4096), {"BLOCK_SIZE": 1024})
    calls = []
    real = k._warm
    monkeypatch.setattr(k, "_warm", lambda *a: calls.append(a) or real(*a))
    assert k.warm((x, y, out, 4096), {"BLOCK_SIZE": 1024}) is first and calls == []
    half = [t.half() for t in (x, y, out)]
    assert k.warm((*half, 4096), {"BLOCK_SIZE": 1024}) is not first and len(calls) == 1
    assert k.warm((x, y, out, 4097), {"BLOCK_SIZE": 1024}) is not first and len(calls) == 2  # not a multiple of 16
    k[(4,)](x, y, out, 4096, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_a_warmed_handle_counts_registers_as_the_sm_allocates_them() -> None:
    """Triton's fused-softmax tutorial sizes its grid from a warmed handle: 65536 // (n_regs * 32 * num_warps)
    blocks an SM. The drop-in's handle gives ptxas's count rounded up to the SM's unit (8 registers a thread),
    so that figure never promises more blocks than the registers hold (28 would promise 9 of 8 warps, 8 fit)."""
    import torch

    from tilec.client._dropin import Warmed
    from tilec.compiler.backends.cuda.target import blocks_per_sm

    k = client.jit((Path(__file__).resolve().parents[1] / "kernels/fused_softmax.py").read_text(), "softmax_kernel")
    x = torch.randn(64, 256, device="cuda")
    y = torch.empty_like(x)
    args, kwargs = (y, x, x.stride(0), y.stride(0), 256), {"BLOCK_SIZE": 256, "num_warps": 8}
    art = k.warm(args, kwargs)
    exact = int(art.metadata["registers"])
    handle = Warmed(k, args, kwargs, art)
    assert handle.n_regs % 8 == 0 and exact <= handle.n_regs < exact + 8
    by_regs = 65536 // (handle.n_regs * 32 * 8)
    assert by_regs == 65536 // (-(-exact * 32 // 256) * 256 * 8)
    assert min(by_regs, 8) == blocks_per_sm(exact, 256, int(art.metadata["shared_bytes"]))
    handle[(64, 1, 1)](*args, 256)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, torch.softmax(x, dim=1))

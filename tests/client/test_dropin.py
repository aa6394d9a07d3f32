"""tilec.install(): `@triton.jit` kernels of a package imported afterwards launch through tilec (cpu target,
torch CPU tensors), under the library's own host decorators (a launch-cache wrapper, triton.autotune,
triton.heuristics). A kernel tilec cannot compile runs under Triton's interpreter with one warning and is
counted; TILEC_STRICT=1 makes that an error. Results are checked against NumPy and Triton's interpreter."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import tilec  # noqa: E402
from tilec.client import _dropin  # noqa: E402

FILES = {
    "tpkg/__init__.py": "",
    "tpkg/utils.py": """
        import triton
        import triton.language as tl

        try:
            from triton.language.extra.cuda.libdevice import rsqrt
        except ImportError:
            from triton.language.extra.libdevice import rsqrt

        @triton.jit
        def exp_(x):
            return tl.exp(x)
        """,
    "tpkg/shim.py": """
        try:
            from triton.language.extra.cuda import libdevice
        except ImportError:
            from triton.language.extra import libdevice
        rsqrt2 = libdevice.rsqrt  # a vendor shim: kernels call shim.rsqrt2
        """,
    "tpkg/entry.py": """
        import triton

        class LibEntry(triton.KernelInterface):
            # A library's launch cache over a kernel, as FlagGems' is: the first run's kernel object is kept
            # and later launches call it with the runtime arguments, bypassing autotune and heuristics.

            def __init__(self, fn):
                self.fn = fn
                self.arg_names = fn.arg_names
                self.calls = 0
                self.kernel = None

            def run(self, *args, grid, **kwargs):
                self.calls += 1
                if self.kernel is None:
                    self.kernel = self.fn.run(*args, grid=grid, **kwargs)
                else:
                    self.kernel[grid](*args[:3])  # x_ptr, y_ptr, n: the runtime parameters
                return self.kernel

        def libentry():
            return LibEntry
        """,
    "tpkg/ops.py": """
        import time
        import triton
        import triton.language as tl
        from .utils import exp_, rsqrt
        from .entry import libentry
        from . import shim

        def do_bench(fn, quantiles=None):
            t0 = time.perf_counter()
            fn()
            t = time.perf_counter() - t0
            return [t, t, t]

        CONFIGS = [triton.Config({"BLOCK": b}, num_warps=w) for b in (16, 64) for w in (1, 4)]

        @libentry()
        @triton.autotune(configs=CONFIGS, key=["n"], do_bench=do_bench)
        @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
        @triton.jit
        def act(x_ptr, y_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m, other=1.0)
            tl.store(y_ptr + offs, exp_(x) + shim.rsqrt2(x * x + 1.0) + rsqrt(x * x + 1.0) - rsqrt(x * x + 1.0), mask=m)

        @triton.jit
        def soft(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m, other=0.0)
            e = exp_(x - tl.max(tl.where(m, x, -float("inf")), axis=0))
            tl.store(y_ptr + offs, tl.where(m, e, 0.0) / tl.sum(tl.where(m, e, 0.0), axis=0), mask=m)

        @triton.jit
        def first(pair):
            return pair[0]

        @triton.jit
        def odd(x_ptr, n, BLOCK: tl.constexpr):  # a tuple of tensors passed to a helper: tilec refuses it
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(x_ptr + offs, first((x, x)) + 1, mask=offs < n)
        """,
}


@pytest.fixture
def tpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton's own runs (the fallback) on the CPU
    monkeypatch.delenv("TILEC_STRICT", raising=False)
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = dict(
        _dropin._STATS, reasons=dict(_dropin._STATS["reasons"]), kernels=set(_dropin._STATS["kernels"])
    )
    tilec.install()
    try:
        yield importlib.import_module("tpkg.ops")
    finally:
        tilec.uninstall()
        _dropin._STATS.update(saved)
        _dropin._STATE.pop("strict", None)
        for name in [m for m in sys.modules if m == "tpkg" or m.startswith("tpkg.")]:
            sys.modules.pop(name, None)


def test_a_library_kernel_runs_through_tilec_under_its_own_decorators(tpkg) -> None:
    before = tilec.stats()["launched"]
    x = torch.linspace(-2, 2, 100)
    y = torch.zeros(100)
    tpkg.act[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, y, 100)
    xn = x.numpy()
    np.testing.assert_allclose(y.numpy(), np.exp(xn) + 1 / np.sqrt(xn * xn + 1), rtol=1e-5)
    assert tpkg.act.calls == 1
    assert tilec.stats()["launched"] - before >= 5  # 4 configs timed by triton.autotune, then the launch
    x2, y2 = torch.linspace(0, 1, 100), torch.zeros(100)
    tpkg.act[(100,)](x2, y2, 100)  # the kept kernel, called with the runtime arguments only
    np.testing.assert_allclose(y2.numpy(), np.exp(x2.numpy()) + 1 / np.sqrt(x2.numpy() ** 2 + 1), rtol=1e-5)
    assert tpkg.act.calls == 2
    handle = tpkg.act.kernel
    plan = handle._plan  # the layout of such a launch, worked out once per handle
    x3, y3 = torch.linspace(-1, 3, 100), torch.zeros(100)
    tpkg.act[(100,)](x3, y3, 100)
    np.testing.assert_allclose(y3.numpy(), np.exp(x3.numpy()) + 1 / np.sqrt(x3.numpy() ** 2 + 1), rtol=1e-5)
    assert handle._plan is plan and plan[1] is not None and len(plan[1][1]) == 3
    kernel = tpkg.act.fn.fn.fn.__dict__["_tilec_state"]["kernel"]
    assert {"tpkg.ops", "tpkg.utils", "tpkg.shim"} <= set(kernel.bundle.modules)


def test_a_kernel_tilec_cannot_compile_runs_under_triton_once_warned(tpkg) -> None:
    x = torch.arange(8, dtype=torch.float32)
    with pytest.warns(RuntimeWarning, match="runs under Triton"):
        tpkg.odd[(1,)](x, 8, BLOCK=8)
    np.testing.assert_array_equal(x.numpy(), np.arange(8, dtype=np.float32) + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tpkg.odd[(1,)](x, 8, BLOCK=8)  # no second warning
    assert "tpkg.ops.odd" in tilec.stats()["reasons"] and tilec.stats()["fallbacks"] >= 1


def test_strict_makes_it_an_error(tpkg, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEC_STRICT", "fallback")  # the drop-in's own meaning alone: compiles are fine
    with pytest.raises(_dropin.RoutedKernel, match="tuple of tensors"):
        tpkg.odd[(1,)](torch.zeros(8), 8, BLOCK=8)


def test_strict_1_also_forbids_the_compile_and_never_hands_it_to_triton(tpkg, monkeypatch: pytest.MonkeyPatch) -> None:
    """TILEC_STRICT=1 (issue 27): a launch nothing was pulled for is a StrictError, not a compile here and not
    Triton's (which would be one too); the fallback rule of TILEC_STRICT=fallback holds as well."""
    monkeypatch.setenv("TILEC_STRICT", "1")
    fallbacks = tilec.stats()["fallbacks"]
    with pytest.raises(tilec.StrictError, match="odd would compile on cpu"):
        tpkg.odd[(1,)](torch.zeros(8), 8, BLOCK=8)
    assert tilec.stats()["fallbacks"] == fallbacks


def test_routed_and_triton_interpreter_agree(tpkg, tmp_path: Path) -> None:
    """The same kernel through tilec here, and through Triton's own interpreter in a fresh process (the
    interpreter needs TRITON_INTERPRET before triton is first imported)."""
    x = torch.randn(300, generator=torch.Generator().manual_seed(0))
    ours = torch.zeros(300)
    tpkg.soft[(1,)](x, ours, 300, BLOCK=512)
    assert tpkg.soft.__dict__["_tilec_state"]["kernel"] is not None  # tilec ran it, not the fallback
    script = textwrap.dedent(f"""
        import numpy as np, torch, tpkg.ops as ops
        x = torch.randn(300, generator=torch.Generator().manual_seed(0))
        y = torch.zeros(300)
        ops.soft[(1,)](x, y, 300, BLOCK=512)
        np.save({str(tmp_path / "theirs.npy")!r}, y.numpy())
        """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    theirs = np.load(tmp_path / "theirs.npy")
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("how", ["run", "env"])
def test_python_m_tilec_run_and_tilec_triton_route_a_script(tmp_path: Path, how: str) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, numpy as np, triton, triton.language as tl{", tilec" if how == "env" else ""}

        @triton.jit
        def fill(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, offs * 2.0, mask=offs < n)

        x = np.zeros(100, np.float32)
        fill[(triton.cdiv(100, 64),)](x, 100, BLOCK=64)
        assert (x == np.arange(100) * 2).all(), x
        import tilec
        print(sys.argv[1:], tilec.stats()["launched"], tilec.stats()["fallbacks"])
        """)
    )
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "TILEC_TRITON")}
    if how == "run":
        cmd = [sys.executable, "-m", "tilec", "run", str(script), "a", "b"]
    else:
        cmd = [sys.executable, str(script), "a", "b"]
        env["TILEC_TRITON"] = "1"
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['a', 'b'] 1 0"


def test_warmup_builds_through_tilec_and_its_handle_launches(tpkg) -> None:
    """Triton's tutorial pattern: `k = kernel.warmup(...)`, read `k.n_regs` / `k.metadata.shared`, then
    `k[grid](*every_argument)`; each launch goes through tilec."""
    x = torch.randn(300)
    y = torch.zeros(300)
    before = tilec.stats()["launched"]
    handle = tpkg.soft.warmup(x, y, 300, BLOCK=512, grid=(1,))
    handle._init_handles()
    assert handle.n_regs >= 0 and handle.metadata.shared >= 0 and tilec.stats()["launched"] == before
    handle[(1, 1, 1)](x, y, 300, 512)
    e = np.exp(x.numpy() - x.numpy().max())
    np.testing.assert_allclose(y.numpy(), e / e.sum(), rtol=1e-5, atol=1e-7)
    assert tilec.stats()["launched"] == before + 1


def test_warming_the_same_build_again_gives_the_same_handle(tpkg) -> None:
    """Triton keeps one CompiledKernel per specialisation, and the fused-softmax tutorial warms before every
    launch: a second warmup of the same build returns the handle made by the first (with the latest call's
    arguments); other launch options or another build get a handle of their own."""
    x, y = torch.randn(300), torch.zeros(300)
    first = tpkg.soft.warmup(x, y, 300, BLOCK=512, grid=(1,))
    if tpkg.soft.warmup(x, y, 300, BLOCK=512, grid=(1,)).art is not first.art:
        pytest.skip("this target's cache gives a new artifact object per lookup")
    again = tpkg.soft.warmup(y, x, 299, BLOCK=512, grid=(1,))
    assert again is first and again.args == (y, x, 299)
    assert tpkg.soft.warmup(x, y, 300, BLOCK=512, num_warps=2, grid=(1,)) is not first
    assert tpkg.soft.warmup(x, y, 300, BLOCK=1024, grid=(1,)) is not first
    first[(1, 1, 1)](x, y, 300, 512)
    e = np.exp(x.numpy() - x.numpy().max())
    np.testing.assert_allclose(y.numpy(), e / e.sum(), rtol=1e-5, atol=1e-7)


def test_a_kernel_of_generated_code_outside_sys_modules(tpkg, tmp_path: Path) -> None:
    """Code generators (FlagGems' pointwise_dynamic) write a file and load it without sys.modules: the
    resolver reads the function's own file."""
    import importlib.util

    path = tmp_path / "gen_abs_0.py"
    path.write_text(
        textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def abs_kernel(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(o_ptr + offs, tl.abs(tl.load(x_ptr + offs, mask=m)), mask=m)
        """)
    )
    spec = importlib.util.spec_from_file_location("gen_abs_0", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert "gen_abs_0" not in sys.modules
    x, out = torch.randn(100), torch.empty(100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to Triton
        module.abs_kernel[(2,)](x, out, 100, BLOCK=64)
    assert torch.equal(out, x.abs())

"""Triton's decorator API on tilec, and the client's resolver behind it: kernels written as a package is
written (helpers in other modules, aliases, conditional imports, nested jit functions, constexpr globals),
read through the function's real globals, run on the cpu target and checked against NumPy."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.compiler.errors import CompileError

FILES = {
    "dpkg/__init__.py": "",
    "dpkg/shim.py": """
        import tilec
        import tilec.language as tl

        @tilec.jit
        def program_id(axis: tl.constexpr):
            return tl.program_id(axis)
        """,
    "dpkg/utils.py": """
        import os
        import tilec
        import tilec.language as tl
        from . import shim as tle

        if os.environ.get("DPKG_FAST") == "1":
            from tilec.language import exp2 as fast_exp
        else:
            from tilec.language import exp as fast_exp

        SCALE = tl.constexpr(3)
        times = tl.maximum  # a module-level alias of a library function

        @tilec.jit
        def scaled(x):
            return x * SCALE

        def make_adder(k):
            @tilec.jit
            def add_k(x):
                return x + k
            return add_k

        add_two = make_adder(2)
        """,
    "dpkg/kernels.py": """
        import tilec
        import tilec.language as tl
        from .utils import scaled, fast_exp, add_two, tle, times
        from . import utils

        @tilec.jit
        def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tle.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m)
            y = add_two(scaled(x)) + utils.scaled(x) + fast_exp(x * 0.0) + times(x, 0.0)
            tl.store(y_ptr + offs, y, mask=m)

        @tilec.autotune(configs=[tilec.Config({"BLOCK": 16}), tilec.Config({"BLOCK": 64}),
                                 tilec.Config({"BLOCK": 128})],
                        key=["n"], prune_configs_by={"early_config_prune": lambda cfgs, args: cfgs[:2]})
        @tilec.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
        @tilec.jit
        def tuned(x_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            if EVEN:
                tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1)
            else:
                m = offs < n
                tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)
        """,
}


@pytest.fixture
def dpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for rel, text in FILES.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "dpkg" or m.startswith("dpkg.")]:
        monkeypatch.delitem(sys.modules, name)
    yield importlib.import_module("dpkg.kernels")
    for name in [m for m in sys.modules if m == "dpkg" or m.startswith("dpkg.")]:
        sys.modules.pop(name, None)


def _expected(x: np.ndarray, exp=np.exp) -> np.ndarray:
    return (x * 3 + 2) + x * 3 + exp(x * 0) + np.maximum(x, 0)


def test_a_package_kernel_runs_with_helpers_from_its_modules(dpkg) -> None:
    x = np.linspace(-2, 2, 200, dtype=np.float32)
    y = np.zeros_like(x)
    dpkg.kernel[(tilec.cdiv(200, 64),)](x, y, 200, BLOCK=64)
    np.testing.assert_allclose(y, _expected(x), rtol=1e-6)
    bundle = dpkg.kernel.bundle
    assert {"dpkg.kernels", "dpkg.utils", "dpkg.shim"} <= set(bundle.modules)
    assert any("_tilec_local_" in m for m in bundle.modules)  # the nested add_k, its closure's k pinned
    assert bundle.filenames["dpkg.kernels"].endswith("kernels.py")


def test_the_key_follows_what_the_host_bound(dpkg, monkeypatch: pytest.MonkeyPatch) -> None:
    """A conditional import bound differently (the environment decides) is another kernel."""
    key = dpkg.kernel.ks.key
    monkeypatch.setenv("DPKG_FAST", "1")
    importlib.reload(sys.modules["dpkg.utils"])
    fast = importlib.reload(dpkg)
    assert fast.kernel.ks.key != key
    x = np.linspace(-2, 2, 100, dtype=np.float32)
    y = np.zeros_like(x)
    fast.kernel[(2,)](x, y, 100, BLOCK=64)
    np.testing.assert_allclose(y, _expected(x, np.exp2), rtol=1e-6)


def test_autotune_heuristics_and_pruning_run_on_the_host(dpkg) -> None:
    x = np.arange(100, dtype=np.float32)
    for n in (100, 64):
        before = x.copy()
        dpkg.tuned[lambda meta: (tilec.cdiv(meta["n"], meta["BLOCK"]),)](x, n)
        np.testing.assert_array_equal(x[:n], before[:n] + 1)
        np.testing.assert_array_equal(x[n:], before[n:])
    tried = {c["BLOCK"] for trials in dpkg.tuned.trials.values() for c, _ in trials}
    assert tried == {16, 64}  # early_config_prune kept the first two


def test_config_pre_hook_runs_before_each_launch() -> None:
    src_dir = Path(__file__).parent
    calls = []

    def hook(args):
        calls.append(args["n"])
        args["x_ptr"][:] = 0

    import tilec.language as tl

    @tilec.autotune(configs=[tilec.Config({"BLOCK": 32}, pre_hook=hook)], key=["n"])
    @tilec.jit
    def inc(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    x = np.full(64, 5, np.float32)
    inc[(2,)](x, 64)
    assert calls == [64] and (x == 1).all() and src_dir.exists()


def test_jit_of_text_paths_and_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        tilec.jit(str(tmp_path / "missing.py"))
    with pytest.raises(FileNotFoundError):
        tilec.jit(tmp_path / "missing.py")
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x_ptr):\n    tl.store(x_ptr, nope)\n"
    )
    k = tilec.jit(bad)
    with pytest.raises(CompileError) as exc:
        k[(1,)](np.zeros(4, np.float32))
    assert str(exc.value).startswith(f"{bad}:6:21: name 'nope' is not defined")


def test_cdiv_and_next_power_of_2() -> None:
    assert [tilec.cdiv(n, 16) for n in (0, 1, 16, 17)] == [0, 1, 1, 2]
    assert [tilec.next_power_of_2(n) for n in (0, 1, 2, 3, 5, 1024, 1025, 2**40 + 1)] == [
        1, 1, 2, 4, 8, 1024, 2048, 2**41]  # fmt: skip

"""The drop-in's cached path through Triton's autotuner (client/_dropin_tune.py): for every shape of call it
looks up the key Triton's own `Autotuner.run` looks up and calls the kernel's `run` as Triton's does; what it
does not take as it is (a first call, a config's pre_hook, a parameter given twice) runs Triton's own path."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from triton.runtime.autotuner import Autotuner  # noqa: E402

import tilec  # noqa: E402
from tilec.client._dropin_tune import fast_tuner  # noqa: E402

NAMES = ["x_ptr", "y_ptr", "n", "m", "scale", "BLOCK", "MODE"]


def _body() -> None:
    """Where Triton's autotuner finds the kernel's Python function (its `base_fn`)."""


class Kernel:
    """What an autotuner wraps, recording the calls it gets."""

    def __init__(self) -> None:
        self.arg_names, self.fn, self.calls = list(NAMES), _body, []

    def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.calls.append((args, kwargs))
        return len(self.calls)


class Seen(dict):
    """A tuning cache that answers every key with one config and records the keys asked for."""

    def __init__(self, config: triton.Config) -> None:
        super().__init__()
        self.config, self.keys = config, []

    def __contains__(self, key: object) -> bool:  # Triton's run: `key not in self.cache`, then cache[key]
        self.keys.append(key)
        return True

    def __getitem__(self, key: object) -> triton.Config:
        return self.config

    def get(self, key: object, default: object = None) -> triton.Config:  # the cached path's lookup
        self.keys.append(key)
        return self.config


CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=8)]


def _pair(key: list[str], configs: list = CONFIGS) -> tuple[Autotuner, Autotuner]:
    plain = Autotuner(Kernel(), NAMES, configs, key, None, None)
    fast = fast_tuner(Autotuner(Kernel(), NAMES, configs, key, None, None))
    assert type(fast) is not Autotuner and isinstance(fast, Autotuner)
    for t in (plain, fast):
        t.cache = Seen(configs[1])
    return plain, fast


x32, y16 = torch.zeros(4), torch.zeros(4, dtype=torch.float16)
CALLS = [
    ((x32, y16, 100, 7, 0.5), {"MODE": "a"}),
    ((x32, y16, 100), {"m": 9, "scale": 1.5, "MODE": "b"}),
    ((x32,), {"y_ptr": y16, "n": 3, "m": 4, "scale": 2.0, "MODE": None}),
    ((np.zeros(3, np.int32), None, 5, 6, 0.0), {"MODE": "c"}),  # a NumPy array has a dtype too; None has none
    ((x32, y16, 100, 7, torch.tensor(2.0, dtype=torch.float64)), {"MODE": "d"}),
    ((x32, y16, 100, 7, 0.5), {"MODE": "a", "debug": True, "out": y16}),  # not parameters: not in the key
]


@pytest.mark.parametrize("key", [["n", "m"], ["m"], ["n", "MODE"], []])
@pytest.mark.parametrize("call", range(len(CALLS)))
def test_the_cached_path_looks_up_tritons_key_and_calls_the_kernel_as_triton_does(key: list[str], call: int) -> None:
    plain, fast = _pair(key)
    args, kwargs = CALLS[call]
    grid = (1,)
    assert plain.run(*args, grid=grid, warmup=False, **kwargs) == fast.run(*args, grid=grid, warmup=False, **kwargs)
    assert plain.cache.keys == fast.cache.keys and len(fast.cache.keys) == 1
    assert plain.fn.calls == fast.fn.calls
    assert fast.best_config is CONFIGS[1]


def test_a_first_call_tunes_on_tritons_path_and_later_calls_take_the_cached_one() -> None:
    timed: list[dict] = []

    def do_bench(fn, quantiles=None):  # type: ignore[no-untyped-def]
        fn()
        cfg = timed[-1]
        t = 1.0 if cfg.get("BLOCK") == 128 else 2.0
        return [t, t, t]

    class Timed(Kernel):
        def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            timed.append(kwargs)
            return super().run(*args, **kwargs)

    tuner = fast_tuner(Autotuner(Timed(), NAMES, CONFIGS, ["n"], None, None, do_bench=do_bench))
    tuner.run(x32, y16, 100, 7, 0.5, grid=(1,), warmup=False, MODE="a")
    assert tuner.best_config is CONFIGS[1] and len(tuner.cache) == 1
    benched = len(tuner.fn.calls)
    assert benched == len(CONFIGS) + 1  # each config timed, then the launch
    tuner.run(x32, y16, 100, 8, 0.25, grid=(2,), warmup=False, MODE="a")  # the same key: no timing
    assert len(tuner.fn.calls) == benched + 1
    assert tuner.fn.calls[-1] == ((x32, y16, 100, 8, 0.25), {"grid": (2,), "warmup": False, "MODE": "a",
                                                              **CONFIGS[1].all_kwargs()})  # fmt: skip
    tuner.run(x32, y16, 101, 8, 0.25, grid=(2,), warmup=False, MODE="a")  # another key: timed again
    assert len(tuner.fn.calls) == benched + 1 + len(CONFIGS) + 1 and len(tuner.cache) == 2


def test_a_config_with_a_pre_hook_and_a_single_config_keep_tritons_semantics() -> None:
    hooked: list[dict] = []
    config = triton.Config({"BLOCK": 32}, num_warps=2, pre_hook=lambda nargs: hooked.append(dict(nargs)))
    plain, fast = _pair(["n"], [config, CONFIGS[0]])
    plain.cache.config = fast.cache.config = config
    for t in (plain, fast):
        t.run(x32, y16, 100, 7, 0.5, grid=(1,), warmup=False, MODE="a")
    assert len(hooked) == 2 and hooked[0].keys() == hooked[1].keys()
    assert plain.fn.calls == fast.fn.calls
    one = fast_tuner(Autotuner(Kernel(), NAMES, [CONFIGS[0]], ["n"], None, None))
    one.run(x32, y16, 100, 7, 0.5, grid=(1,), warmup=False, MODE="a")
    assert one.fn.calls[-1][1]["BLOCK"] == 64 and one.best_config is CONFIGS[0]


def test_a_parameter_given_twice_goes_tritons_way() -> None:
    """Positionally and by keyword: Triton's key takes the keyword's value (the kernel's run then refuses
    the call, or not, as it does under Triton); the cached path leaves such a call to Triton's run."""
    plain, fast = _pair(["n"])
    for t in (plain, fast):
        t.run(x32, y16, 100, 7, 0.5, grid=(1,), warmup=False, n=5, MODE="a")
    assert plain.cache.keys == fast.cache.keys == [(5, "torch.float32", "torch.float16")]
    assert plain.fn.calls == fast.fn.calls
    too_many = (x32, y16, 100, 7, 0.5, 64, "a", x32)  # one more than there are parameters
    for t in (plain, fast):
        t.run(*too_many, grid=(1,), warmup=False)
    assert plain.cache.keys[-1] == fast.cache.keys[-1] == (100, "torch.float32", "torch.float16")
    assert plain.fn.calls == fast.fn.calls


def test_install_gives_triton_autotune_the_cached_path_and_uninstall_takes_it_back() -> None:
    import triton.runtime.autotuner as autotuner

    before = triton.autotune
    tilec.install()
    try:
        assert triton.autotune is not before and autotuner.autotune is triton.autotune
        tuned = triton.autotune(configs=CONFIGS, key=["n"])(Kernel())
        assert isinstance(tuned, Autotuner) and type(tuned).__name__ == "TilecAutotuner"
    finally:
        tilec.uninstall()
    assert triton.autotune is before and autotuner.autotune is before


def test_an_autotuner_class_with_a_run_of_its_own_is_left_as_it_is() -> None:
    class LibTuner(Autotuner):  # a library's tuner (FlagGems' has one): its run is the library's
        def run(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return "the library's"

    tuner = LibTuner(Kernel(), NAMES, CONFIGS, ["n"], None, None)
    assert fast_tuner(tuner) is tuner and type(tuner) is LibTuner
    assert tuner.run(x32, grid=(1,), warmup=False) == "the library's"


KERNEL_MODULE = '''
import triton
import triton.language as tl

TIMED = []


def do_bench(fn, quantiles=None):
    TIMED.append(1)
    fn()
    return [1.0, 1.0, 1.0]


@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"], do_bench=do_bench)
@triton.jit
def scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3.0, mask=offs < n)
'''


def test_a_package_kernel_under_install_tunes_once_then_takes_the_cached_path(tmp_path, monkeypatch) -> None:
    """End to end on the cpu target: the package's autotuner is the cached-path class, its first call times both
    configs through tilec's launches, a second call with the same key times nothing and computes the same."""
    import importlib
    import sys

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (tmp_path / "tuned_pkg_mod.py").write_text(KERNEL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = tilec.stats()["launched"]
    tilec.install()
    try:
        mod = importlib.import_module("tuned_pkg_mod")
        assert type(mod.scale).__name__ == "TilecAutotuner"
        x = torch.linspace(-1, 1, 100)
        for call in range(3):
            y = torch.zeros(100)
            mod.scale[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, y, 100)
            np.testing.assert_allclose(y.numpy(), x.numpy() * 3.0, rtol=1e-6)
            assert len(mod.TIMED) == 2, f"call {call}: only the first call times the configs"
        assert tilec.stats()["launched"] - before >= 2 + 3  # each config timed once, then three launches
    finally:
        tilec.uninstall()
        sys.modules.pop("tuned_pkg_mod", None)

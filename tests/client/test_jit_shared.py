"""An autotuned kernel with a server shares its tuning result: the first "rank" misses, tunes and
publishes; the next one finds the result and launches the same config without timing any. A read-only
token or an unreachable server tunes locally with one warning; without a server nothing changes. The
tuning key's parts equal the ones a tune job's worker writes for the same launch."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest

from tilec import client
from tilec.client._client import Client
from tilec.compiler.tune.launch import LaunchDescription
from tilec.runtime.tune import TuneSpec, prepare

from .conftest import Service

VADD = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""


def grid(meta: dict) -> tuple[int]:
    return (-(-meta["n"] // meta["BLOCK"]),)


def run(k: client.JITKernel, n: int, seed: int = 0) -> None:
    """One launch of vadd on fresh arrays of n elements, checked against NumPy."""
    rng = np.random.default_rng(seed)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    k[grid](x, y, out, n)
    np.testing.assert_array_equal(out, x + y)


def chosen(k: client.JITKernel) -> tuple[dict, int | None, int | None]:
    (cfg,) = k.best_configs.values()
    return dict(cfg.kwargs), cfg.num_warps, cfg.num_stages


def test_second_rank_uses_the_first_ranks_result(
    service: Callable[..., Service], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = service()
    with Client(svc.url, svc.tokens["submit"]) as submitter:
        rank0 = client.jit(VADD, server=submitter)
        run(rank0, 3000)
    assert rank0.compile_count == 2 and len(next(iter(rank0.trials.values()))) == 2, (
        "a miss tunes both configs"
    )

    monkeypatch.setenv("TILEC_URL", svc.url)  # the second rank finds the server through the environment
    monkeypatch.setenv("TILEC_TOKEN", svc.tokens["read"])
    rank1 = client.jit(VADD)
    run(rank1, 3000, seed=1)
    assert rank1.trials == {}, "a hit times nothing"
    assert rank1.compile_count == 1, "a hit compiles only the shared config"
    assert chosen(rank1) == chosen(rank0)

    with Client(svc.url, svc.tokens["read"]) as c:
        where = rank0.shared_key({"x_ptr": np.zeros(3000, np.float32), "y_ptr": np.zeros(3000, np.float32),
                                  "out_ptr": np.zeros(3000, np.float32), "n": 3000}, "cpu")  # fmt: skip
        found = c.lookup(where["kernel_key"], "cpu", key=where["key"], dtypes=where["dtypes"])
    assert found is not None and found.trials == 2
    assert found.config["kwargs"] == chosen(rank0)[0]

    run(rank1, 3000, seed=2)  # the same key again: no second lookup, no compile
    assert rank1.compile_count == 1
    with pytest.warns(UserWarning, match="submit-scoped token"):
        run(rank1, 5000)  # a new key: a miss, tuned here, and not published with the read-only token
    assert len(rank1.trials) == 1
    rank1.shared.close()


def test_read_only_token_tunes_locally_and_warns_once(service: Callable[..., Service]) -> None:
    svc = service()
    k = client.jit(VADD, server=svc.url)
    k.shared._token = svc.tokens["read"]  # noqa: SLF001 - as TILEC_TOKEN would have given it
    with pytest.warns(UserWarning, match="submit-scoped token"):
        run(k, 2000)
    assert len(next(iter(k.trials.values()))) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(k, 4000)  # another miss: tuned, not published, and not warned about again
    assert len(k.trials) == 2
    with Client(svc.url, svc.tokens["read"]) as c:
        where = k.shared_key({"x_ptr": np.zeros(2000, np.float32), "y_ptr": np.zeros(2000, np.float32),
                              "out_ptr": np.zeros(2000, np.float32), "n": 2000}, "cpu")  # fmt: skip
        assert c.lookup(where["kernel_key"], "cpu", key=where["key"], dtypes=where["dtypes"]) is None
    k.shared.close()


def test_unreachable_server_tunes_locally_and_warns_once() -> None:
    from tests.server.conftest import free_port

    k = client.jit(VADD, server=f"http://127.0.0.1:{free_port()}")
    with pytest.warns(UserWarning, match="could not read the shared tuning result"):
        run(k, 2000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(k, 4000)
    assert len(k.trials) == 2 and k.shared is not None and not k.shared.reachable
    k.shared.close()


def test_no_server_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILEC_URL", raising=False)
    k = client.jit(VADD)
    assert k.shared is None
    run(k, 2000)
    assert k.compile_count == 2 and len(k.trials) == 1
    monkeypatch.setenv("TILEC_URL", "http://127.0.0.1:1")
    assert client.jit(VADD, server=False).shared is None


KEYED = """
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 128})], key=["n", "x_ptr", "s"])
@triton.jit
def scaled(x_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)
"""

KEYED_TOML = """
grid = ["cdiv(n, BLOCK)"]
[args]
x_ptr = "randn(n)"
out_ptr = "empty(n)"
n = 1000
s = 2.5
"""


def test_key_parts_equal_the_workers() -> None:
    k = client.jit(KEYED, server="http://127.0.0.1:1")
    bound = {"x_ptr": np.zeros(1000, np.float16), "out_ptr": np.zeros(1000, np.float16), "n": 1000, "s": 2.5}
    mine = k.shared_key(bound, "cpu")
    signature = {"x_ptr": "*fp16", "out_ptr": "*fp16", "n": "i32", "s": "fp32"}
    spec = TuneSpec(
        source=KEYED, name=None, signature=signature, launch=LaunchDescription.from_toml(KEYED_TOML)
    )
    worker = prepare(spec)
    assert mine == {
        "kernel_key": worker.kernel_key,
        "key": worker.key,
        "dtypes": worker.dtypes,
        "target": "cpu",
    }
    assert mine["key"] == '{"n":1000,"x_ptr":{"shape":[1000],"dtype":"fp16"},"s":2.5}'


BUNDLED = """
import tilec
import tilec.language as tl


@tilec.jit
def add(a, b):
    return a + b


@tilec.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, add(tl.load(x_ptr + offs, mask=mask), tl.load(y_ptr + offs, mask=mask)), mask=mask)
"""


def test_a_resolved_kernel_shares_its_bundle_with_the_server(
    service: Callable[..., Service], tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """@tilec.jit + @tilec.autotune: the bundle goes to the server (kind 'bundle'), the first rank's tuning
    result serves the second, which times nothing and builds only the shared config."""
    import importlib
    import sys

    import tilec
    from tilec.client._decorators import kernel_from_function

    (tmp_path / "bundled_vadd.py").write_text(BUNDLED)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("bundled_vadd", None)
    fn = importlib.import_module("bundled_vadd").vadd.fn
    tune = tilec.autotune(configs=[tilec.Config({"BLOCK": 64}), tilec.Config({"BLOCK": 256})], key=["n"])
    svc = service()
    with Client(svc.url, svc.tokens["submit"]) as submitter, Client(svc.url, svc.tokens["read"]) as reader:
        rank0 = tune(kernel_from_function(fn, server=submitter, cache=tmp_path / "cache0"))
        run(rank0, 3000)
        assert len(next(iter(rank0.trials.values()))) == 2
        assert reader.kernel(rank0.ks.key).kind == "bundle"
        rank1 = tune(kernel_from_function(fn, server=reader, cache=tmp_path / "cache1"))
        assert rank1.ks.key == rank0.ks.key
        run(rank1, 3000, seed=1)
        assert rank1.trials == {} and chosen(rank1)[0] == chosen(rank0)[0]
        assert rank1.compile_count == 1, "a hit builds only the shared config"
    sys.modules.pop("bundled_vadd", None)

"""jit with a server and the local cache, against a real uvicorn: a plain kernel is compiled by the server,
verified, kept and launched; a second kernel object launches it from disk with every request refused; a
corrupt cached blob or manifest is deleted and fetched again (by its artifact id, no compile); a tampered
cache or a server signing with an unpinned key is refused before the loader sees anything. An autotuned
kernel uses the shared config's build (the tuning result's own, for a read-only token) and keeps both.
A read-only token or an unreachable server builds here, as without a server."""

from __future__ import annotations

import base64
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.server.conftest import Uvicorn
from tilec import client
from tilec.client import UnsignedManifestError, UntrustedKeyError, _verify
from tilec.client._cache import LocalCache
from tilec.client._client import Client
from tilec.client._verify import TrustedKeys
from tilec.runtime import cpu as _runtime_cpu
from tilec.wire import ManifestPublic, TuneJobCreate

from .conftest import Service, _make_tokens
from .test_pull import LAUNCH, _raw, _resign

ADD = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""
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


def run(k: client.JITKernel, n: int = 2048, **constexprs: int) -> None:
    rng = np.random.default_rng(n)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    k[grid](x, y, out, n, **constexprs)
    np.testing.assert_array_equal(out, x + y)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILEC_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("TILEC_URL", "TILEC_TOKEN", "TILEC_TRUSTED_KEYS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = _runtime_cpu.load

    def load(art):  # noqa: ANN001, ANN202 - the loader's own signature
        calls.append(art.sha256)
        return real(art)

    monkeypatch.setattr(_runtime_cpu, "load", load)
    return calls


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One real service for the module (starting one takes seconds); each test has its own local cache
    and builds its own specialisations (BLOCK, n), so no test sees another's server-side work."""
    root = tmp_path_factory.mktemp("service")
    url = f"sqlite:///{root / 'tilec.db'}"
    tokens = _make_tokens(url)
    server = Uvicorn({"TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(root), "TILEC_AUTH": "true"}).start()
    yield Service(server.url, tokens, server)
    server.stop()


def pinned(svc: Service) -> TrustedKeys:
    with Client(svc.url) as c:
        (key,) = c.keys()
    return TrustedKeys.parse(key.public_key)


def offline(svc: Service) -> Client:
    """A client whose every request fails the test: what launches through it made no network call."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"a network call: {request.method} {request.url}")

    return Client(svc.url, transport=httpx.MockTransport(refuse))


def cached(k: client.JITKernel) -> tuple[LocalCache, str]:
    """The kernel's local cache and the sha256 of the one binary it holds."""
    cache = k.builds.local
    (blob,) = (cache.root / "blobs").glob("*/*")
    return cache, blob.name


def test_plain_kernel_built_by_the_server_then_launched_from_disk(svc: Service, loads: list[str]) -> None:
    keys = pinned(svc)
    with Client(svc.url, svc.tokens["submit"]) as c:
        k = client.jit(ADD, server=c, trusted_keys=keys)
        run(k, BLOCK=256)
        assert k.obtained == {"here": 0, "disk": 0, "server": 1}
        listed = {a.id: a.sha256 for a in c.artifacts(kernel=k.ks.key, target="cpu")}
    cache, sha = cached(k)
    assert listed[cache.get_manifest(sha).manifest.artifact_id] == sha, "the server's own build"

    again = client.jit(ADD, server=offline(svc), trusted_keys=keys)
    run(again, BLOCK=256)
    assert again.obtained == {"here": 0, "disk": 1, "server": 0}
    assert loads == [sha, sha]
    with pytest.raises(AssertionError, match="a network call"):  # the refusing client does refuse
        run(again, 1000, BLOCK=256)  # n=1000: another specialisation (not divisible by 16), not cached


@pytest.mark.parametrize("broken", ["blob", "manifest"])
def test_a_corrupt_cached_file_is_deleted_and_fetched_again(svc: Service, broken: str) -> None:
    keys = pinned(svc)
    with Client(svc.url, svc.tokens["submit"]) as c:
        run(client.jit(ADD, server=c, trusted_keys=keys), BLOCK=512)
    cache = LocalCache()
    (blob,) = (cache.root / "blobs").glob("*/*")
    sha, good = blob.name, blob.read_bytes()
    if broken == "blob":
        blob.write_bytes(good[: len(good) // 2])  # truncated
    else:
        cache.manifest_path(sha).write_text("{not json")
    with Client(svc.url, svc.tokens["read"]) as c:  # a read token: fetched by its artifact id, not compiled
        k = client.jit(ADD, server=c, trusted_keys=keys)
        run(k, BLOCK=512)
    assert k.obtained == {"here": 0, "disk": 0, "server": 1} and k.builds.compiling
    assert k.builds.local.corrupt == 1
    assert blob.read_bytes() == good and cache.get_manifest(sha) is not None


@pytest.mark.parametrize("case", ["re-signed", "unsigned"])
def test_a_tampered_cache_is_refused_before_loading(svc: Service, loads: list[str], case: str) -> None:
    keys = pinned(svc)
    with Client(svc.url, svc.tokens["submit"]) as c:
        first = client.jit(ADD, server=c, trusted_keys=keys)
        run(first, BLOCK=256)
    cache, sha = cached(first)
    _resign(cache.manifest_path(sha), Ed25519PrivateKey.generate() if case == "re-signed" else None)
    error = UntrustedKeyError if case == "re-signed" else UnsignedManifestError
    k = client.jit(ADD, server=offline(svc), trusted_keys=keys)
    with pytest.raises(error):
        run(k, BLOCK=256)
    assert len(loads) == 1, "only the first kernel's verified build reached the loader"


def test_a_server_key_that_is_not_pinned_is_refused(svc: Service, loads: list[str]) -> None:
    other = TrustedKeys.parse(base64.b64encode(_raw(Ed25519PrivateKey.generate())).decode())
    with Client(svc.url, svc.tokens["submit"]) as c:
        k = client.jit(ADD, server=c, trusted_keys=other)
        with pytest.raises(UntrustedKeyError, match="does not pin"):
            run(k, BLOCK=256)
    assert loads == [] and not (LocalCache().root / "index").exists(), "nothing kept, nothing loaded"


def test_trusted_keys_from_the_environment_and_the_unpinned_warning(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TILEC_TRUSTED_KEYS", base64.b64encode(_raw(Ed25519PrivateKey.generate())).decode())
    with Client(svc.url, svc.tokens["submit"]) as c:
        with pytest.raises(UntrustedKeyError):
            run(client.jit(ADD, server=c), BLOCK=256)
        monkeypatch.delenv("TILEC_TRUSTED_KEYS")
        monkeypatch.setattr(_verify, "_warned", False)
        k = client.jit(ADD, server=c)
        with pytest.warns(UserWarning, match="no TILEC_TRUSTED_KEYS pinned"):
            run(k, BLOCK=256)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            run(client.jit(ADD, server=c), BLOCK=256)  # from disk: verified again, not warned again
    assert k.obtained["server"] == 1


def test_a_read_only_token_fetches_what_exists_and_builds_the_rest_here(svc: Service) -> None:
    keys = pinned(svc)
    with Client(svc.url, svc.tokens["submit"]) as c:
        run(
            client.jit(ADD, server=c, trusted_keys=keys, cache=LocalCache(Path(LocalCache().root, "other"))),
            BLOCK=16,
        )
    with Client(svc.url, svc.tokens["read"]) as c:
        k = client.jit(ADD, server=c, trusted_keys=keys)
        run(k, BLOCK=16)  # built before: found by its artifact key
        assert k.obtained == {"here": 0, "disk": 0, "server": 1}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            run(k, BLOCK=8)  # never built: the token may not compile, so it is built here, quietly
            run(k, BLOCK=4)
    assert k.obtained == {"here": 2, "disk": 0, "server": 1} and not k.builds.compiling


def test_an_unreachable_server_builds_here_with_one_warning() -> None:
    from tests.server.conftest import free_port

    k = client.jit(ADD, server=f"http://127.0.0.1:{free_port()}")
    with pytest.warns(UserWarning, match="could not fetch the build; compiling locally"):
        run(k, BLOCK=256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(k, BLOCK=128)
    assert k.obtained == {"here": 2, "disk": 0, "server": 0}
    k.shared.close()


def test_autotuned_kernel_uses_the_shared_config_and_keeps_it(svc: Service) -> None:
    keys = pinned(svc)
    with Client(svc.url, svc.tokens["submit"]) as c:
        rank0 = client.jit(VADD, server=c, trusted_keys=keys)
        run(rank0, 4096)  # a miss: tuned here, published (a result with no build)
        assert len(rank0.trials) == 1 and rank0.obtained["server"] == 0
        rank1 = client.jit(VADD, server=c, trusted_keys=keys)
        run(rank1, 4096)  # the shared config, compiled by the server
    assert rank1.trials == {} and rank1.obtained == {"here": 0, "disk": 0, "server": 1}
    assert rank1.best_configs == rank0.best_configs

    rank2 = client.jit(VADD, server=offline(svc), trusted_keys=keys)
    run(rank2, 4096)  # a fresh process's first launch: the config and its build from disk
    assert rank2.trials == {} and rank2.obtained == {"here": 0, "disk": 1, "server": 0}
    assert rank2.best_configs == rank0.best_configs


def test_autotuned_kernel_launches_the_tune_jobs_own_build(svc: Service) -> None:
    from tilec.compiler.tune.launch import LaunchDescription

    launch = LaunchDescription.from_toml(LAUNCH).model_dump(mode="json")
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    with Client(svc.url, svc.tokens["submit"]) as c:
        job = c.submit_tune(TuneJobCreate(source=VADD, signature=signature, launch=launch, target="cpu"))
        while job.state not in ("done", "failed", "cancelled"):
            job = c.tune_job(job.id)
        assert job.state == "done", job.error
        built = {a.id for a in c.artifacts(kernel=job.kernel_key, target="cpu")}
    with Client(svc.url, svc.tokens["read"]) as c:  # a read token cannot compile: the build is the job's
        k = client.jit(VADD, server=c, trusted_keys=pinned(svc))
        run(k)
    assert k.trials == {} and k.obtained == {"here": 0, "disk": 0, "server": 1}
    cache, sha = cached(k)
    manifest = ManifestPublic.model_validate_json(cache.manifest_path(sha).read_bytes())
    assert manifest.manifest.artifact_id in built and manifest.manifest.tuning_key is not None
    assert (
        json.loads(json.dumps(manifest.manifest.config))["kwargs"]
        == next(iter(k.best_configs.values())).kwargs
    )

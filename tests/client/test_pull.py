"""`tilec pull` against a real uvicorn, and load_index over what it wrote: a read token lists what the
server lacks (exit 1, nothing written); --compile-missing builds the plain entry and tunes the tuned one;
a second pull downloads nothing; bad manifests exit 2 without a traceback. load_index launches with no
server, picks the build by the call's specialisation, and refuses a flipped byte, a manifest re-signed
with another key, an unsigned manifest and a manifest for another target before the loader sees them."""

from __future__ import annotations

import base64
import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import typer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner, Result

from tests.server.conftest import Uvicorn
from tilec.client import (
    ArgumentError,
    BinaryMismatchError,
    TargetMismatchError,
    UnsignedManifestError,
    UntrustedKeyError,
)
from tilec.client._client import Client
from tilec.client._index import IndexFileError, load_index
from tilec.client._verify import TrustedKeys, key_id
from tilec.client.cli import register
from tilec.runtime import cpu as _runtime_cpu
from tilec.wire import ManifestPublic, canonical_json

from .conftest import Service, _make_tokens

app = typer.Typer()
register(app)
runner = CliRunner()

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def vadd(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2 + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""
LAUNCH = """
grid = ["cdiv(n, BLOCK)"]
[args]
x_ptr = "randn(n)"
y_ptr = "randn(n)"
out_ptr = "empty(n)"
n = 2048
"""
SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"
PLAIN = f"""
[[kernel]]
file = "kernels/ops.py"
name = "add_kernel"
signature = "{SIG}"
constexpr = {{ BLOCK = 256 }}
"""
TUNED = f"""
[[kernel]]
file = "kernels/ops.py"
name = "vadd"
signature = "{SIG}"
launch = "vadd.launch.toml"
"""


def add_grid(meta: dict) -> tuple[int]:
    return (-(-meta["n"] // meta["BLOCK"]),)


def write_project(root: Path, manifest: str, launch: str = LAUNCH) -> Path:
    """The manifest's path, beside the kernel file and the launch description."""
    root = root / "project"
    (root / "kernels").mkdir(parents=True, exist_ok=True)
    (root / "kernels" / "ops.py").write_text(KERNELS)
    (root / "vadd.launch.toml").write_text(launch)
    (root / "tilec.toml").write_text(manifest)
    return root / "tilec.toml"


def pinned_key(url: str) -> str:
    with Client(url) as c:
        (key,) = c.keys()
    return key.public_key


def pull(manifest: Path, out: Path, *extra: str, svc: Service | None = None, token: str = "read",
         keys: str | None = None) -> Result:  # fmt: skip
    env = {"TILEC_URL": svc.url if svc else None, "TILEC_TOKEN": svc.tokens.get(token) if svc else None,
           "TILEC_TRUSTED_KEYS": keys}  # fmt: skip
    args = ["pull", "--manifest", str(manifest), "--target", "cpu", "-o", str(out), *extra]
    return runner.invoke(app, args, env=env)


def no_traceback(r: Result) -> None:
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit), (
        r.output
    )


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sha256 of every binary handed to the cpu loader during the test."""
    calls: list[str] = []
    real = _runtime_cpu.load

    def load(art):  # noqa: ANN001, ANN202 - the loader's own signature
        calls.append(art.sha256)
        return real(art)

    monkeypatch.setattr(_runtime_cpu, "load", load)
    return calls


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """One real service for the module (a tune job takes seconds): auth on, tokens of each scope."""
    root = tmp_path_factory.mktemp("service")
    url = f"sqlite:///{root / 'tilec.db'}"
    tokens = _make_tokens(url)
    server = Uvicorn({"TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(root), "TILEC_AUTH": "true"}).start()
    yield Service(server.url, tokens, server)
    server.stop()


@pytest.fixture(scope="module")
def first_pull(svc: Service, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """The plain build compiled and the tuned one tuned by --compile-missing: (the directory, the --json
    report, the server's public key)."""
    root = tmp_path_factory.mktemp("first")
    keys = pinned_key(svc.url)
    r = pull(write_project(root, PLAIN + TUNED), root / "pulled", "--compile-missing", "--json", svc=svc,
             token="submit", keys=keys)  # fmt: skip
    assert r.exit_code == 0, r.output
    return root / "pulled", json.loads(r.stdout), keys


@pytest.fixture
def pulled(
    first_pull: tuple[Path, dict, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    """A copy of the first pull's directory, with every socket connection refused: (the directory, the key)."""
    out = tmp_path / "pulled"
    shutil.copytree(first_pull[0], out)

    def refuse(*args: object) -> None:
        raise AssertionError("load_index made a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    return out, first_pull[2]


def test_compile_missing_builds_and_tunes(first_pull: tuple[Path, dict, str]) -> None:
    out, report, _ = first_pull
    assert (report["downloaded"], report["up_to_date"], report["missing"]) == (2, 0, [])
    plain, tuned = report["entries"]
    assert (
        plain["kind"] == "plain"
        and plain["config"]["kwargs"] == {}
        and plain["spec"]["constexprs"] == {"BLOCK": 256}
    )
    assert (
        tuned["kind"] == "tuned"
        and tuned["key"] == '{"n":2048}'
        and tuned["config"]["kwargs"]["BLOCK"] in (64, 256)
    )
    assert tuned["tuning_key"] and tuned["spec"]["hints"]["n"] == {"divisibility": 16}
    for e in report["entries"]:
        assert (out / "blobs" / e["sha256"]).is_file() and (
            out / "manifests" / f"{e['sha256']}.json"
        ).is_file()
    assert json.loads((out / "index.json").read_text())["entries"] == report["entries"]


def test_a_second_pull_downloads_nothing(
    svc: Service, first_pull: tuple[Path, dict, str], tmp_path: Path
) -> None:
    out = tmp_path / "pulled"
    shutil.copytree(first_pull[0], out)
    manifest, keys = write_project(tmp_path, PLAIN + TUNED), first_pull[2]
    index = (out / "index.json").read_bytes()
    stamp = (out / "index.json").stat().st_mtime_ns
    r = pull(manifest, out, "--json", svc=svc, keys=keys)  # a read token: nothing to build, nothing to fetch
    assert r.exit_code == 0, r.output
    second = json.loads(r.stdout)
    assert (second["downloaded"], second["up_to_date"]) == (0, 2)
    assert (out / "index.json").read_bytes() == index and (out / "index.json").stat().st_mtime_ns == stamp

    plain = second["entries"][0]
    (out / "blobs" / plain["sha256"]).write_bytes(b"truncated")  # a corrupt file is fetched again
    r = pull(manifest, out, "--json", svc=svc, keys=keys)
    assert r.exit_code == 0 and json.loads(r.stdout)["downloaded"] == 1, r.output

    r = pull(manifest, out, svc=svc, keys=keys)  # the table, for people
    assert r.exit_code == 0 and "0 downloaded, 2 up to date" in r.stdout and "add_kernel" in r.stdout


def test_missing_builds_are_listed(svc: Service, first_pull: tuple[Path, dict, str], tmp_path: Path) -> None:
    others = PLAIN.replace("BLOCK = 256", "BLOCK = 512") + TUNED
    manifest = write_project(tmp_path, others, launch=LAUNCH.replace("n = 2048", "n = 4096"))
    out = tmp_path / "out"
    r = pull(manifest, out, svc=svc, keys=first_pull[2])
    assert r.exit_code == 1, r.output
    assert "the server does not have 2 build(s)" in r.stderr
    assert "add_kernel (kernels/ops.py): not built for cpu" in r.stderr
    assert 'vadd (kernels/ops.py): no tuning result for key {"n":4096}' in r.stderr
    assert "--compile-missing" in r.stderr
    assert not (out / "blobs").exists()
    assert json.loads((out / "index.json").read_text())["entries"] == []
    no_traceback(r)


def test_a_server_signing_with_an_unpinned_key_is_refused(
    svc: Service, first_pull: tuple[Path, dict, str], tmp_path: Path
) -> None:
    other = base64.b64encode(_raw(Ed25519PrivateKey.generate())).decode()
    out = tmp_path / "out"
    r = pull(write_project(tmp_path, PLAIN), out, svc=svc, keys=other)
    assert r.exit_code == 1 and "tilec: refused:" in r.stderr and "does not pin" in r.stderr, r.output
    assert not (out / "blobs").exists() and not (out / "index.json").exists()
    no_traceback(r)


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ("[[kernel]]\nfile = 'kernels/ops.py'\nname = 'add_kernel'\n", "kernel[0]: 'signature' must be"),
        (PLAIN + "colour = 'red'\n", "unknown key(s) colour"),
        (PLAIN.replace("kernels/ops.py", "nope.py"), "kernel[0] (add_kernel): file"),
        (PLAIN.replace(SIG, "x_ptr"), "expected NAME=VALUE"),
        (TUNED.replace("vadd.launch.toml", "missing.toml"), "launch"),
        ("kernel = 3\n", "expected one or more [[kernel]] tables"),
        ("[[kernel]\n", "not TOML"),
        (PLAIN.replace('name = "add_kernel"', 'name = "nope"'), "nope"),
    ],
)
def test_bad_input_exits_2(tmp_path: Path, manifest: str, message: str) -> None:
    r = pull(write_project(tmp_path, manifest), tmp_path / "out", svc=Service("http://127.0.0.1:9"))
    assert r.exit_code == 2 and message in r.stderr, r.output
    no_traceback(r)


def test_no_server_exits_2(tmp_path: Path) -> None:
    r = pull(write_project(tmp_path, PLAIN), tmp_path / "out")
    assert r.exit_code == 2 and "pull needs a server" in r.stderr


def test_a_server_that_is_down_is_named_as_unreachable(tmp_path: Path) -> None:
    from tests.server.conftest import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    r = pull(write_project(tmp_path, PLAIN), tmp_path / "out", svc=Service(closed))
    assert r.exit_code == 1, r.output
    assert (
        r.stderr.startswith(f"tilec: {closed}: cannot reach the server: ") and "0 unreachable" not in r.stderr
    )
    no_traceback(r)


# ---- load_index -------------------------------------------------------------------------------------


def test_load_index_launches_without_a_server(pulled: tuple[Path, str], loads: list[str]) -> None:
    out, keys = pulled
    idx = load_index(out, trusted_keys=keys)
    assert sorted(idx) == ["add_kernel", "vadd"] and len(idx) == 2
    rng = np.random.default_rng(0)
    x, y = rng.random(2048, dtype=np.float32), rng.random(2048, dtype=np.float32)
    out_ = np.zeros(2048, np.float32)
    idx["add_kernel"][add_grid](x, y, out_, 2048)
    np.testing.assert_array_equal(out_, x + y)
    idx.vadd[add_grid](x, y, out_, 2048)
    np.testing.assert_array_equal(out_, x * 2 + y)
    idx["add_kernel"][add_grid](x[:1000], y[:1000], out_[:1000], 1000)  # plain: any n
    assert len(loads) == 3 and len(set(loads)) == 2

    with pytest.raises(ArgumentError, match=r"no build of vadd in the index fits this call") as exc:
        idx.vadd[add_grid](x[:1000], y[:1000], out_[:1000], 1000)  # tuned for n=2048 (divisible by 16)
    assert "n=1000 does not have the build's hints" in str(exc.value)
    with pytest.raises(ArgumentError, match=r"x_ptr is \*fp64, the build takes \*fp32"):
        idx["add_kernel"][add_grid](x.astype(np.float64), y, out_, 2048)
    with pytest.raises(ArgumentError, match=r"BLOCK=128, the build has 256"):
        idx["add_kernel"][add_grid](x, y, out_, 2048, BLOCK=128)
    with pytest.raises(KeyError, match="holds no kernel 'mul'"):
        idx["mul"]
    with pytest.raises(AttributeError):
        _ = idx.mul


def _raw(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _resign(path: Path, private: Ed25519PrivateKey | None, **changes: object) -> None:
    """Rewrite a pulled manifest: its body changed, then signed with `private` (None: left unsigned)."""
    public = ManifestPublic.model_validate_json(path.read_bytes())
    body = public.manifest.model_copy(update=changes)
    signature = key = None
    if private is not None:
        signature = base64.b64encode(private.sign(canonical_json(body.model_dump(mode="json")))).decode()
        key = key_id(_raw(private))
    path.write_text(ManifestPublic(manifest=body, key_id=key, signature=signature).model_dump_json())


def _sha(out: Path, name: str) -> str:
    entries = json.loads((out / "index.json").read_text())["entries"]
    return next(e["sha256"] for e in entries if e["name"] == name)


@pytest.mark.parametrize("case", ["flipped byte", "re-signed", "unsigned", "other target"])
def test_tampered_builds_are_refused_before_loading(
    pulled: tuple[Path, str], loads: list[str], tmp_path: Path, case: str
) -> None:
    out, keys = pulled
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    sha = _sha(copy, "add_kernel")
    manifest = copy / "manifests" / f"{sha}.json"
    mine = Ed25519PrivateKey.generate()
    trusted = keys
    if case == "flipped byte":
        blob = bytearray((copy / "blobs" / sha).read_bytes())
        blob[len(blob) // 2] ^= 0x01
        (copy / "blobs" / sha).write_bytes(bytes(blob))
        error, message = BinaryMismatchError, "the binary's sha256 is"
    elif case == "re-signed":
        _resign(manifest, mine)
        error, message = (
            UntrustedKeyError,
            f"signed by key {key_id(_raw(mine))}, which trusted_keys does not pin",
        )
    elif case == "unsigned":
        _resign(manifest, None)
        error, message = UnsignedManifestError, "the manifest is unsigned"
    else:  # a manifest genuinely signed (by a pinned key) for another target
        _resign(manifest, mine, target="cuda:sm_90")
        trusted = keys + "," + base64.b64encode(_raw(mine)).decode()
        error, message = TargetMismatchError, "is for cuda:sm_90, this device runs cpu"
    idx = load_index(copy, trusted_keys=TrustedKeys.parse(trusted, "trusted_keys"))
    x = np.ones(256, np.float32)
    with pytest.raises(error, match=message):
        idx["add_kernel"][(1,)](x, x, x.copy(), 256)
    assert loads == [], "the loader never saw the refused binary"
    idx.vadd[add_grid](np.ones(2048, np.float32), np.ones(2048, np.float32), np.zeros(2048, np.float32), 2048)
    assert len(loads) == 1, "the untouched build still loads"


def test_an_index_naming_another_build_is_refused(pulled: tuple[Path, str], loads: list[str]) -> None:
    out, keys = pulled
    data = json.loads((out / "index.json").read_text())
    plain = next(e for e in data["entries"] if e["name"] == "add_kernel")
    plain["spec"]["constexprs"]["BLOCK"] = 512  # the index (unsigned) says 512, the signed manifest 256
    (out / "index.json").write_text(json.dumps(data))
    idx = load_index(out, trusted_keys=keys)
    x = np.ones(512, np.float32)
    with pytest.raises(Exception, match="not the build asked for: its specialisation"):
        idx["add_kernel"][(1,)](x, x, x.copy(), 512)
    assert loads == []


def test_a_missing_or_foreign_index_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(IndexFileError, match="does not exist: `tilec pull"):
        load_index(tmp_path)
    (tmp_path / "index.json").write_text('{"entries": []}')
    with pytest.raises(IndexFileError, match="is not a tilec-index/1 index"):
        load_index(tmp_path)
    (tmp_path / "index.json").write_text('{"format": "tilec-index/1", "entries": [{"name": 3}]}')
    with pytest.raises(IndexFileError, match="entry 0 lacks or mistypes name"):
        load_index(tmp_path)


def test_an_unpinned_pull_warns_in_one_line(
    svc: Service, first_pull: tuple[Path, dict, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without TILEC_TRUSTED_KEYS the `tilec` command says so once, as `tilec: warning: ...`, not as
    Python's `path:line: UserWarning:` with a source line."""
    import warnings

    from tilec.cli import _register_all
    from tilec.cli import app as tilec_app
    from tilec.client import _verify

    _register_all()
    monkeypatch.setattr(_verify, "_warned", False)
    env = {"TILEC_URL": svc.url, "TILEC_TOKEN": svc.tokens["read"], "TILEC_TRUSTED_KEYS": None}
    args = [
        "pull",
        "--manifest",
        str(write_project(tmp_path, PLAIN)),
        "--target",
        "cpu",
        "-o",
        str(tmp_path / "o"),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        r = runner.invoke(tilec_app, args, env=env)
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stderr.splitlines() if "TILEC_TRUSTED_KEYS" in line]
    assert len(lines) == 1 and lines[0].startswith("tilec: warning: no TILEC_TRUSTED_KEYS pinned"), r.stderr
    assert "UserWarning" not in r.stderr and ".py:" not in r.stderr, r.stderr

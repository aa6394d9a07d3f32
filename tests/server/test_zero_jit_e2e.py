"""Issue 27 end to end on the cpu target, with a real server (uvicorn, in-process tune jobs) and fresh Python
processes: processes record their launches (TILEC_RECORD, two ranks into one file), CI pulls from the record
(building and tuning what the server lacks), a strict process launches everything offline with zero compiles
(counted by tilec.compile_stats, variants a warm-up never hit included), a new specialisation fails with
StrictError and appears in the server's misses, a pinned config is what every client launches, and a
compiler-version change with TILEC_RETUNE_ON_CHANGE queues exactly the inventory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from sqlalchemy import create_engine, text

from tilec.client._record import entry_identity

ROOT = Path(__file__).resolve().parents[2]
TILEC = ROOT / ".venv" / "bin" / "tilec"

OPS = '''
import tilec
import tilec.language as tl


@tilec.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@tilec.autotune(configs=[tilec.Config({"BLOCK": 64}), tilec.Config({"BLOCK": 256})], key=["n"])
@tilec.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)
'''

# argv: the add sizes, then the scale sizes, then the add BLOCK; prints compile_stats and the configs launched
RUN = '''
import json, sys
import numpy as np
import tilec
import zjops

adds, scales, block = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
out = {"error": None}
try:
    for n, offset in adds:  # offset 1: an array not 16-byte aligned
        x = np.random.rand(n + offset).astype(np.float32)[offset:]
        y = np.random.rand(n).astype(np.float32)
        z = np.empty_like(y)
        zjops.add[(-(-n // block),)](x, y, z, n, BLOCK=block)
        assert np.allclose(z, x + y)
    for n in scales:
        x = np.random.rand(n).astype(np.float32)
        z = np.empty_like(x)
        zjops.scale[lambda m: (-(-n // m["BLOCK"]),)](x, z, n)
        assert np.allclose(z, 2 * x)
except tilec.StrictError as exc:
    out["error"] = {"type": type(exc).__name__, "kernel": exc.kernel, "what": exc.what, "spec": exc.specialisation}
out["stats"] = tilec.compile_stats()
out["launched"] = sorted(c.kwargs["BLOCK"] for c in zjops.scale.best_configs.values())
print(json.dumps(out))
'''


def run(tmp: Path, env: dict[str, str], adds: list, scales: list, block: int = 256) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TILEC_")}
    base |= {"PYTHONPATH": str(tmp), "TILEC_CACHE_DIR": str(tmp / f"cache-{time.monotonic_ns()}"), **env}
    done = subprocess.run([sys.executable, "-W", "ignore", str(tmp / "run.py"), json.dumps(adds), json.dumps(scales),
                           str(block)], env=base, capture_output=True, text=True, timeout=300, cwd=tmp)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def tilec(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEC_")}
    return subprocess.run([str(TILEC), *args], env=env, capture_output=True, text=True, timeout=300, cwd=tmp)


def pull(tmp: Path, url: str, out: str) -> list[dict]:
    done = tilec(tmp, "pull", "--manifest", "rec.json", "--target", "cpu", "-o", out, "--server", url,
                 "--compile-missing", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["missing"] == []
    return report["entries"]


def test_record_pull_strict_pin_retune(tmp_path: Path, uvicorn_server: Callable, database_url: str) -> None:
    (tmp_path / "zjops.py").write_text(textwrap.dedent(OPS))
    (tmp_path / "run.py").write_text(RUN)
    server = uvicorn_server(TILEC_LOOKUP_CACHE_TTL_S="0")
    url = server.url

    # 1. two ranks record into one file; they compile and tune here (no server)
    rec = {"TILEC_RECORD": str(tmp_path / "rec.json")}
    first = run(tmp_path, rec, [[4096, 0]], [4096])
    second = run(tmp_path, rec, [[4096, 0]], [8192])
    assert first["stats"]["compiles"] > 0 and first["stats"]["tunes"] == 1 and second["stats"]["tunes"] == 1
    record = json.loads((tmp_path / "rec.json").read_text())
    launched = [e for e in record["entries"] if not e["variant"]]
    assert sorted((e["name"], (e["tuning"] or {}).get("key")) for e in launched) == [
        ("add", None), ("scale", '{"n":4096}'), ("scale", '{"n":8192}')]
    assert all(e["launch"] is not None for e in launched if e["name"] == "scale")  # a tune job can run them
    assert any(e["variant"] and "n" not in e["hints"] for e in record["entries"])  # n not divisible by 16
    # records kept apart merge into the same manifest
    run(tmp_path, {"TILEC_RECORD": str(tmp_path / "rank2.json")}, [[4096, 0]], [8192])
    merged = tilec(tmp_path, "manifest", "merge", "rank2.json", "rec.json", "-o", "merged.json")
    assert merged.returncode == 0, merged.stderr
    same = lambda entries: sorted(entry_identity(e) for e in entries)  # noqa: E731 - a tuned entry's config is the server's to pick
    assert same(json.loads((tmp_path / "merged.json").read_text())["entries"]) == same(record["entries"])

    # 2. CI pulls from the record: the server builds and tunes what it lacks
    entries = pull(tmp_path, url, "pulled")
    assert {e["name"] for e in entries} == {"add", "scale"} and len(entries) == len(record["entries"])

    # 3. strict, offline: every launch (unaligned, n % 16 != 0, n == 1) runs a pulled build; zero compiles
    strict = {"TILEC_STRICT": "1", "TILEC_INDEX": str(tmp_path / "pulled")}
    offline = run(tmp_path, strict, [[4096, 0], [4095, 1], [1, 1], [32, 0]], [4096, 8192])
    assert offline["error"] is None and offline["stats"] == {"compiles": 0, "tunes": 0, "misses": 0}

    # 4. a specialisation nobody recorded fails with the typed error, and the server hears of it
    new = run(tmp_path, {**strict, "TILEC_URL": url}, [[4096, 0]], [], block=512)
    assert new["error"]["type"] == "StrictError" and new["error"]["what"] == "compile"
    assert new["error"]["spec"]["constexprs"] == {"BLOCK": 512} and new["stats"]["compiles"] == 0
    misses = httpx.get(f"{url}/v1/misses").json()
    assert [(m["name"], m["what"], m["specialisation"]["constexprs"], m["count"]) for m in misses] == [
        ("add", "compile", {"BLOCK": 512}, 1)]
    # an unseen tune fails the same way (a key no record named)
    tune = run(tmp_path, {**strict, "TILEC_URL": url}, [], [2048])
    assert tune["error"]["what"] == "tune" and tune["error"]["spec"]["tuning"]["key"] == '{"n":2048}'
    assert sorted(m["what"] for m in httpx.get(f"{url}/v1/misses").json()) == ["compile", "tune"]

    # 5. a pinned config is what every client launches: from a pull, and from the server directly
    results = {r["key"]: r for r in httpx.get(f"{url}/v1/tuning-results").json()}
    measured = results['{"n":4096}']
    other = 64 if measured["config"]["kwargs"]["BLOCK"] == 256 else 256
    pin = {"config": {"kwargs": {"BLOCK": other}, "num_warps": 4, "num_stages": 3}, "reason": "team choice"}
    done = tilec(tmp_path, "pin", "set", measured["tuning_key"], "--config", f"BLOCK={other},num_warps=4,num_stages=3",
                 "--reason", pin["reason"], "--server", url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = tilec(tmp_path, "misses", "ls", "--json", "--server", url)
    assert sorted(m["what"] for m in json.loads(listed.stdout)) == ["compile", "tune"]
    entries = pull(tmp_path, url, "pinned")
    assert {e["config"]["kwargs"]["BLOCK"] for e in entries if e.get("tuning", {}).get("key") == '{"n":4096}'} == {other}
    assert all(e["pinned"] for e in entries if e.get("tuning", {}).get("key") == '{"n":4096}')
    from_pull = run(tmp_path, {"TILEC_STRICT": "1", "TILEC_INDEX": str(tmp_path / "pinned")}, [], [4096])
    from_server = run(tmp_path, {"TILEC_URL": url}, [], [4096])
    assert from_pull["launched"] == from_server["launched"] == [other]
    assert from_pull["stats"]["compiles"] == 0 and from_server["stats"]["tunes"] == 0

    # 6. a new compiler version (simulated: the one the server last ran is another) retunes the inventory
    server.stop()
    held = {r["tuning_key"] for r in results.values()}
    engine = create_engine(database_url)
    with engine.begin() as conn:
        inventory = {row[0] for row in conn.execute(text("SELECT tuning_key FROM tuning_results WHERE target = 'cpu'"))}
        before = conn.execute(text("SELECT max(id) FROM tune_jobs")).scalar()
        conn.execute(text("UPDATE server_facts SET value = :v WHERE name = 'compiler_version'"), {"v": json.dumps("0" * 32)})
    engine.dispose()
    assert inventory == held and len(held) == 2  # the two tuning keys (n=4096, n=8192), each tuned by a pull's job
    again = uvicorn_server(TILEC_RETUNE_ON_CHANGE="true")
    deadline = time.monotonic() + 60  # the server notes its compiler version just after it starts
    jobs = httpx.get(f"{again.url}/v1/tune-jobs").json()
    while not any(j["id"] > before for j in jobs):  # one transaction queues them all
        assert time.monotonic() < deadline, "no retune job was queued"
        time.sleep(0.2)
        jobs = httpx.get(f"{again.url}/v1/tune-jobs").json()
    narrowed = tilec(tmp_path, "retune", "--target", "cpu", "--kernel", "nope", "--json", "--server", again.url)
    assert narrowed.returncode == 0 and json.loads(narrowed.stdout) == {"queued": [], "skipped": []}
    new_jobs = [j for j in jobs if j["id"] > before]
    assert sorted(j["tuning_key"] for j in new_jobs) == sorted(inventory)
    deadline = time.monotonic() + 120  # let them finish before the database goes
    while any(j["state"] in ("queued", "running") for j in jobs) and time.monotonic() < deadline:
        time.sleep(0.3)
        jobs = httpx.get(f"{again.url}/v1/tune-jobs").json()

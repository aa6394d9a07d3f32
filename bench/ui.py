"""The web page's speed on a large cache: an SQLite cache of 10,000 kernels (one artifact each), 20,000 tuning
results with 100,000 trials and 2,000 tune jobs is written directly through the ORM (bulk inserts), a real
`tilec serve` (auth on) is started on it, and every page and every JSON call the pages make is timed
over loopback: p50/p95 of sequential keep-alive requests, filtered and deep pages included. An artifact's
IR after each pass is a compile (it runs in the compile pool once per artifact, then comes from memory):
its first calls are timed apart.

    .venv/bin/python bench/ui.py [--kernels 10000] [--trials 100000] [--requests 50] [--db PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
VADD = (ROOT / "tests/kernels/vector_add.py").read_text()
SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
NAMES = ("add_kernel", "matmul_kernel", "softmax_kernel", "layer_norm_fwd", "attention_fwd", "rms_norm", "gelu",
         "fused_adam", "conv2d_nhwc", "reduce_sum", "cross_entropy", "rotary_embedding")  # fmt: skip
TARGETS = ("cuda:sm_90", "cuda:sm_80", "cpu")
GPUS = {"cuda:sm_90": ("NVIDIA H100 80GB HBM3", "NVIDIA H200"), "cuda:sm_80": ("NVIDIA A100-SXM4-80GB",)}
RARE_GPU = "NVIDIA L4"  # on 1 result in 200: the filter that finds few rows
BLOCKS = (64, 128, 256, 512, 1024, 2048)
START = datetime(2026, 1, 1, tzinfo=UTC)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the cache


def _config(block: int) -> dict:
    return {"kwargs": {"BLOCK_SIZE": block}, "num_warps": 4, "num_stages": 3}


def _kernel(i: int, rng: random.Random) -> dict:
    name = f"{NAMES[i % len(NAMES)]}_{i}"
    source = VADD.replace("add_kernel", name) + f"\n# revision {i}\n"
    return {
        "key": sha(f"kernel {i}"), "name": name, "kind": "source", "source": source,
        "ir": None, "input_sha256": sha(f"input {i}"),
        "info": {"params": [{"name": n, "constexpr": False} for n in SIGNATURE] + [{"name": "BLOCK_SIZE", "constexpr": True}]},
        "submitted_by": 1 + i % 3, "created_at": START + timedelta(seconds=i * 600 + rng.randint(0, 500)),
    }  # fmt: skip


def _artifact(i: int, kernel: dict, rng: random.Random) -> dict:
    from tilec.server.db.artifacts import sha256, text_digests

    target = TARGETS[i % len(TARGETS)]
    cuda = target.startswith("cuda")
    binary = rng.randbytes(4096)
    texts = {"tir": f"// tir of {kernel['name']}\n" * 40, "llir": f"; llir of {kernel['name']}\n" * 120,
             "ptx": f"// ptx of {kernel['name']}\n" * 200 if cuda else ""}  # fmt: skip
    meta = {"threads_per_block": 128, "shared_bytes": 0, "registers": rng.randint(16, 128), "spill_stores": 0,
            "spill_loads": 0} if cuda else {"slot_bytes": 8}  # fmt: skip
    values = {
        "key": sha(f"artifact {i}"), "kernel_key": kernel["key"], "kernel_name": kernel["name"], "target": target,
        "emit": "cubin" if cuda else "object", "compiler_version": sha("compiler")[:16],
        "spec": {"signature": SIGNATURE, "constexprs": {}, "hints": {}, "emit": "cubin" if cuda else "object"},
        "config": _config(1024), "binary": binary, "meta": meta, "sha256": sha256(binary), "size": len(binary),
        "created_at": kernel["created_at"] + timedelta(seconds=5), **texts,
    }  # fmt: skip
    values.update(text_digests(values))
    return values


def _result_and_trials(
    kernel: dict, artifact: dict, j: int, n_trials: int, rng: random.Random
) -> tuple[dict, list[dict]]:
    from tilec.server.db.crud import stable_hash, tuning_key

    target = artifact["target"]
    key = f'{{"n_elements":{1 << (12 + j)}}}'
    dtypes = "fp32,fp32,fp32,i32"
    tkey = tuning_key(kernel_key=kernel["key"], key=key, dtypes=dtypes, target=target)
    models = GPUS.get(target)
    gpu = None if models is None else (RARE_GPU if rng.random() < 0.005 else rng.choice(models))
    when = kernel["created_at"] + timedelta(minutes=10 + j)
    trials = []
    for t in range(n_trials):
        block = BLOCKS[t % len(BLOCKS)]
        time_ms = rng.uniform(0.05, 2.0)
        config = _config(block)
        trials.append({
            "tuning_key": tkey, "config_hash": stable_hash(config), "config": config, "time_ms": time_ms,
            "lo_ms": time_ms * 0.98, "hi_ms": time_ms * 1.03, "reps": 100, "status": "ok" if t < 4 else "stopped",
            "artifact_key": artifact["key"] if block == 1024 else None, "gpu_model": gpu,
            "driver_version": "560.35.03" if gpu else None, "sm_clock_mhz": 1980 if gpu else None,
            "mem_clock_mhz": 2619 if gpu else None, "created_at": when,
        })  # fmt: skip
    best = min((t for t in trials if t["status"] == "ok"), key=lambda t: t["time_ms"])
    result = {
        "tuning_key": tkey, "kernel_key": kernel["key"], "key_values": key, "dtypes": dtypes, "target": target,
        "best_config": best["config"], "best_time_ms": best["time_ms"], "artifact_key": best["artifact_key"],
        "updated_at": when,
    }  # fmt: skip
    return result, trials


def _job(i: int, result: dict, trials: list[dict], rng: random.Random) -> dict:
    state = "done" if i % 100 >= 4 else ("queued", "running", "failed", "cancelled")[i % 100]
    outcomes = [
        {"config": t["config"], "status": t["status"], "time_ms": t["time_ms"], "reason": None}
        for t in trials
    ]
    outcomes.append({"config": _config(4096), "status": "pruned", "reason": "needs 80 KiB of shared memory"})
    done = len(outcomes) if state in ("done", "failed") else rng.randint(0, len(outcomes))
    return {
        "kernel_key": result["kernel_key"], "tuning_key": result["tuning_key"],
        "active_key": result["tuning_key"] if state in ("queued", "running") else None,
        "key_values": result["key_values"], "dtypes": result["dtypes"], "target": result["target"],
        "strategy": "halving", "request": {"signature": SIGNATURE}, "state": state, "trials": outcomes[:done],
        "trials_done": done, "trials_planned": len(outcomes), "worker": f"gpu{i % 8}:4242:w" if state != "queued" else None,
        "deliveries": 1, "error": "no config could be timed" if state == "failed" else None,
        "best_config": result["best_config"], "best_time_ms": result["best_time_ms"], "submitted_by": 2,
        "created_at": result["updated_at"],
    }  # fmt: skip


def populate(url: str, *, n_kernels: int, n_trials: int, n_jobs: int, seed: int = 0) -> tuple[str, dict]:
    """Write the cache; the admin token and sample keys (a kernel, an artifact, a tuning key) to time."""
    from sqlalchemy import insert
    from sqlalchemy.orm import Session

    from tilec.server.db import crud
    from tilec.server.db.engine import make_engine
    from tilec.server.db.migrate import upgrade
    from tilec.server.db.models import Artifact, Kernel, Trial, TuneJob, TuningResult

    rng = random.Random(seed)
    kept = _kept_pass_dumps()
    upgrade(url)
    engine = make_engine(url)
    per_result = 5
    n_results = n_trials // per_result
    with Session(engine) as session, session.begin():
        token, _ = crud.create_token(session, scopes=["admin"], description="bench")
        for scope in ("read", "submit"):
            crud.create_token(session, scopes=[scope], description=f"bench {scope}")
        kernels, artifacts = [], []
        for i in range(n_kernels):
            kernels.append(_kernel(i, rng))
            artifacts.append(_artifact(i, kernels[-1], rng))
            # as `tilec serve` keeps them now; the last 12 stand for rows without (recomputed on demand)
            artifacts[-1]["pass_dumps"] = kept if i < n_kernels - 12 else None
        for batch in range(0, n_kernels, 2000):
            session.execute(insert(Kernel), kernels[batch : batch + 2000])
            session.execute(insert(Artifact), artifacts[batch : batch + 2000])
        results, trials, jobs = [], [], []
        for r in range(n_results):
            i = r % n_kernels
            result, rows = _result_and_trials(kernels[i], artifacts[i], r // n_kernels, per_result, rng)
            results.append(result)
            trials.extend(rows)
            if r < n_jobs:
                jobs.append(_job(r, result, rows, rng))
        for batch in range(0, len(results), 5000):
            session.execute(insert(TuningResult), results[batch : batch + 5000])
        for batch in range(0, len(trials), 10000):
            session.execute(insert(Trial), trials[batch : batch + 10000])
        session.execute(insert(TuneJob), jobs)
    engine.dispose()
    cuda = next(i for i in range(n_kernels) if artifacts[i]["target"] == "cuda:sm_90")
    sample = {"kernel": kernels[cuda]["key"], "artifact": artifacts[cuda]["key"],
              "tkey": next(r["tuning_key"] for r in results if r["kernel_key"] == kernels[cuda]["key"]),
              "cold_artifacts": [a["key"] for a in artifacts[-12:]], "n_results": len(results),
              "kept_artifacts": [a["key"] for a in artifacts[-24:-12]]}  # fmt: skip
    return token, sample


def _kept_pass_dumps() -> bytes | None:
    """The per-pass dumps a compile of the bench's kernel keeps, packed as the artifacts row holds them."""
    from tilec.compiler.artifact import CompileOptions
    from tilec.compiler.pipeline import compile_request
    from tilec.compiler.request import CompileRequest
    from tilec.server.db.artifacts import pack_pass_dumps

    request = CompileRequest(text=VADD, name="add_kernel", signature=SIGNATURE, constexprs={"BLOCK_SIZE": 1024},
                             options=CompileOptions(target="cpu"), emit="llir", pass_dumps=True)  # fmt: skip
    return pack_pass_dumps(compile_request(request).pass_dumps)


# timing


def start_server(url: str, data_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "TILEC_DATABASE_URL": url, "TILEC_DATA_DIR": str(data_dir), "TILEC_PORT": str(port),
           "TILEC_AUTH": "true", "TILEC_COMPILE_WORKERS": "1"}  # fmt: skip
    tilec = Path(sys.executable).parent / "tilec"
    proc = subprocess.Popen([str(tilec), "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"tilec serve did not start: {proc.stderr.read().decode() if proc.stderr else ''}")


def timed(client: httpx.Client, path: str, n: int, *, warm: int = 3) -> list[float]:
    for _ in range(warm):
        client.get(path).raise_for_status()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        r = client.get(path)
        out.append((time.perf_counter() - start) * 1000)
        r.raise_for_status()
    return out


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[18] if len(values) > 1 else values[0]


def calls(sample: dict, n_kernels: int) -> list[tuple[str, str]]:
    k, a, t = sample["kernel"], sample["artifact"], sample["tkey"]
    last_kernels = max(0, n_kernels - 50)
    last_results = max(0, sample["n_results"] - 50)
    return [
        ("page: kernels", "/ui/kernels"),
        ("page: a kernel", f"/ui/kernels/{k}"),
        ("page: an artifact", f"/ui/artifacts/{a}"),
        ("page: tuning results", "/ui/tuning"),
        ("page: a tuning result", f"/ui/tuning/{t}"),
        ("page: tune jobs", "/ui/jobs"),
        ("page: a tune job", "/ui/jobs/1"),
        ("static: ui.js", "/ui/static/ui.js"),
        ("static: ui.css", "/ui/static/ui.css"),
        ("static: d3.min.js", "/ui/static/vendor/d3.min.js"),
        ("static: plot.umd.min.js", "/ui/static/vendor/plot.umd.min.js"),
        ("json: whoami", "/v1/ui/whoami"),
        ("json: facets", "/v1/ui/facets"),
        ("json: kernels, page 1", "/v1/ui/kernels?limit=50"),
        ("json: kernels, last page", f"/v1/ui/kernels?limit=50&offset={last_kernels}"),
        ("json: kernels, name=matmul", "/v1/ui/kernels?limit=50&name=matmul"),
        (
            "json: kernels, name=matmul last page",
            f"/v1/ui/kernels?limit=50&name=matmul&offset={n_kernels // 12 - 50}",
        ),
        ("json: kernels, name matches none", "/v1/ui/kernels?limit=50&name=no_such_kernel"),
        ("json: kernels, target=cuda:sm_90", "/v1/ui/kernels?limit=50&target=cuda:sm_90"),
        (
            "json: kernels, target, last page",
            f"/v1/ui/kernels?limit=50&target=cuda:sm_90&offset={n_kernels // 3 - 50}",
        ),
        ("json: a kernel", f"/v1/ui/kernels/{k}"),
        ("json: an artifact", f"/v1/ui/artifacts/{a}"),
        ("text: its PTX", f"/v1/artifacts/{a}/ptx"),
        ("json: tuning results, page 1", "/v1/ui/tuning-results?limit=50"),
        ("json: tuning results, last page", f"/v1/ui/tuning-results?limit=50&offset={last_results}"),
        ("json: tuning results, name=softmax", "/v1/ui/tuning-results?limit=50&name=softmax"),
        ("json: tuning results, name none", "/v1/ui/tuning-results?limit=50&name=no_such_kernel"),
        ("json: tuning results, target=cpu", "/v1/ui/tuning-results?limit=50&target=cpu"),
        ("json: tuning results, gpu=H200", "/v1/ui/tuning-results?limit=50&gpu=NVIDIA%20H200"),
        (
            "json: tuning results, gpu=L4 (rare)",
            f"/v1/ui/tuning-results?limit=50&gpu={RARE_GPU.replace(' ', '%20')}",
        ),
        ("json: tuning results, gpu none", "/v1/ui/tuning-results?limit=50&gpu=no%20such%20gpu"),
        ("json: a tuning result + trials", f"/v1/ui/tuning-results/{t}"),
        ("json: tune jobs, page 1", "/v1/ui/tune-jobs?limit=50"),
        ("json: tune jobs, last page", "/v1/ui/tune-jobs?limit=50&offset=1950"),
        ("json: tune jobs, state=running", "/v1/ui/tune-jobs?limit=50&state=running"),
        ("json: tune jobs, name=gelu", "/v1/ui/tune-jobs?limit=50&name=gelu"),
        ("json: tune jobs, state=queued", "/v1/ui/tune-jobs?limit=50&state=queued"),
        ("json: a tune job + trials", "/v1/ui/tune-jobs/1"),
        ("json: passes (warm, in memory)", f"/v1/ui/artifacts/{a}/passes"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", type=int, default=10_000)
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=2_000)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--db", type=Path, help="the SQLite file (default: a temporary directory)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tilec-bench-ui-"))
    db = args.db or tmp / "tilec.db"
    url = f"sqlite:///{db}"
    start = time.perf_counter()
    token, sample = populate(url, n_kernels=args.kernels, n_trials=args.trials, n_jobs=args.jobs)
    print(f"populated {db} in {time.perf_counter() - start:.1f} s: {args.kernels} kernels and artifacts, "
          f"{sample['n_results']} tuning results, {args.trials} trials, {args.jobs} tune jobs "
          f"({db.stat().st_size / 2**20:.0f} MiB)")  # fmt: skip
    proc, base = start_server(url, tmp)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            cold, kept = [], []
            for keys, times in ((sample["cold_artifacts"], cold), (sample["kept_artifacts"], kept)):
                for key in keys:
                    begin = time.perf_counter()
                    client.get(f"/v1/ui/artifacts/{key}/passes").raise_for_status()
                    times.append((time.perf_counter() - begin) * 1000)
            rows = [
                (name, path, timed(client, path, args.requests)) for name, path in calls(sample, args.kernels)
            ]
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"\n{args.requests} sequential requests each, keep-alive, over loopback; auth on (admin token)\n")
    print(f"{'call':40} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    worst = 0.0
    for name, _path, times in rows:
        worst = max(worst, p95(times))
        print(f"{name:40} {statistics.median(times):8.2f} {p95(times):8.2f} {max(times):8.2f}")
    print(f"\nworst p95: {worst:.2f} ms ({'under' if worst < 100 else 'OVER'} 100 ms)")
    print(f"passes, first call per artifact, kept by its compile, {len(kept)} artifacts: "
          f"p50 {statistics.median(kept):.1f} ms, max {max(kept):.1f} ms")  # fmt: skip
    print(f"passes, first call per artifact stored without them (recomputed: a compile in the pool), "
          f"{len(cold)} artifacts: p50 {statistics.median(cold):.0f} ms, max {max(cold):.0f} ms")  # fmt: skip


if __name__ == "__main__":
    main()

"""tilec under torch.compile on a GPU, in one call (bash bench/gpu_run.sh inductor):

1. check: every model of tests/inductor/models.py compiled twice in this process, by Inductor's default
   path and with backend=tilec.inductor.backend, on the same random inputs; outputs compared within the
   model's tolerance (as the corpus tests), and how many kernels tilec ran / left to Inductor.
2. cold: for one model, the time of a fresh process from start to its first compiled result (imports,
   torch.compile and the first call, synchronized), side by side:
     inductor  empty caches | Inductor's caches warm
     tilec     empty caches | Inductor's caches warm | tilec's shared cache warm (a new machine: Inductor's
               and tilec's local caches empty, the server holds the builds) | all warm
   Each row is the median of --runs fresh processes.

    python3 bench/inductor_cold.py [--model layer_norm] [--runs 3] [--json out.json] [--skip-check]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch
sys.path.insert(0, os.environ["TILEC_ROOT"])
from tests.inductor.models import by_name, make_inputs
t_import = time.perf_counter()
mode, name = sys.argv[1], sys.argv[2]
model = by_name(name)
inputs = [t.cuda() for t in make_inputs(model, seed=3)]
torch.cuda.synchronize()
t_ctx = time.perf_counter()
if mode == "tilec":
    import functools
    import tilec.inductor
    be = functools.partial(tilec.inductor.backend, options=dict(model.options)) if model.options else tilec.inductor.backend
    fn = torch.compile(model.fn, backend=be, dynamic=False)
else:
    fn = torch.compile(model.fn, options=dict(model.options) or None, dynamic=False)
out = fn(*inputs)
torch.cuda.synchronize()
t_first = time.perf_counter()
stats = tilec.inductor.stats() if mode == "tilec" else {}
print(json.dumps({"import_s": t_import - t0, "cuda_init_s": t_ctx - t_import, "compile_and_first_call_s": t_first - t_ctx,
                  "total_s": t_first - t0, "stats": stats}))
"""


def flat(out) -> list:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat(o)]
    return [out]


def check(only: list[str] | None, deadline: float = float("inf")) -> list[dict]:
    """Every model under Inductor's default path and under tilec, compared."""
    import functools

    import torch

    import tilec.inductor
    from tests.inductor.models import make_inputs, models

    rows = []
    for model in models():
        if only and model.name not in only:
            continue
        if time.perf_counter() > deadline:
            rows.append(
                {"model": model.name, "ok": None, "error": "not run: the call's time budget was spent"}
            )
            continue
        torch._dynamo.reset()
        inputs = [t.cuda() for t in make_inputs(model, seed=5)]
        row: dict = {"model": model.name}
        try:
            t0 = time.perf_counter()
            ref = flat(torch.compile(model.fn, options=dict(model.options) or None, dynamic=False)(*inputs))
            torch.cuda.synchronize()
            row["inductor_s"] = round(time.perf_counter() - t0, 2)
            torch._dynamo.reset()
            before = tilec.inductor.stats()
            be = functools.partial(tilec.inductor.backend, options=dict(model.options))
            t0 = time.perf_counter()
            compiled = torch.compile(model.fn, backend=be, dynamic=False)
            got = flat(compiled(*inputs))
            torch.cuda.synchronize()
            row["tilec_s"] = round(time.perf_counter() - t0, 2)
            got2 = flat(compiled(*inputs))  # a second call: tilec's in-memory fast path
            after = tilec.inductor.stats()
            row["tilec_kernels"] = after["tilec"] - before["tilec"]
            row["fallbacks"] = after["fallback_kernels"][len(before["fallback_kernels"]) :]
            errs = []
            for a, b in zip(got + got2, ref + ref, strict=True):
                if a.dtype.is_floating_point:
                    torch.testing.assert_close(a, b, rtol=model.rtol, atol=model.atol)
                    errs.append(float((a.double() - b.double()).abs().max()) if a.numel() else 0.0)
                else:
                    assert torch.equal(a, b), "integer/bool outputs differ"
            row["max_abs_err"] = max(errs, default=0.0)
            row["ok"] = True
        except Exception as exc:  # a model's failure is a row, not the end of the check
            row["ok"] = False
            row["error"] = f"{type(exc).__name__}: {exc}"[:800]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def child(mode: str, model: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, model], env=env, capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median_row(rows: list[dict]) -> dict:
    keys = ("import_s", "cuda_init_s", "compile_and_first_call_s", "total_s")
    out = {k: round(statistics.median(r[k] for r in rows), 3) for k in keys}
    out["runs"] = [round(r["total_s"], 3) for r in rows]
    out["stats"] = rows[-1].get("stats", {})
    return out


def cold(model: str, runs: int, on_row=lambda table: None) -> dict:
    """The cold-start table for one model (see the module docstring)."""
    base = {**os.environ, "TILEC_ROOT": str(ROOT), "PYTHONUNBUFFERED": "1"}
    base.pop("TILEC_URL", None)

    def fresh(prefix: str) -> str:
        return tempfile.mkdtemp(prefix=prefix)

    table: dict[str, dict] = {}

    def measure(label: str, mode: str, make_env, warm=None) -> None:
        """`warm(env)`: a first process that fills the caches this row says are warm; it returns the
        environment of the measured process."""
        rows = []
        for _ in range(runs):
            env = make_env()
            if warm is not None:
                env = warm(env)
            rows.append(child(mode, model, env))
        table[label] = median_row(rows)
        on_row(table)  # written out at once: a call cut short keeps the rows it measured
        print(f"{label:48s} {table[label]['total_s']:8.2f} s  (compile+first call "
              f"{table[label]['compile_and_first_call_s']:.2f} s)  {table[label]['stats']}", flush=True)  # fmt: skip

    def inductor_env() -> dict:
        return {**base, "TORCHINDUCTOR_CACHE_DIR": fresh("ind-"), "TRITON_CACHE_DIR": fresh("tri-")}

    def same(mode: str):
        def warm(env: dict) -> dict:
            child(mode, model, env)
            return env

        return warm

    def inductor_only(env: dict) -> dict:  # Inductor's caches warm, tilec's local cache empty
        child("tilec", model, env)
        return {**env, "TILEC_CACHE_DIR": fresh("tilec-")}

    measure("inductor, empty caches", "inductor", inductor_env)
    measure("inductor, Inductor's caches warm", "inductor", inductor_env, same("inductor"))

    def tilec_env(url: str | None = None, key: str | None = None) -> dict:
        env = {**inductor_env(), "TILEC_CACHE_DIR": fresh("tilec-")}
        if url:
            env.update({"TILEC_URL": url, "TILEC_TRUSTED_KEYS": key or ""})
        return env

    measure("tilec, empty caches (no server)", "tilec", tilec_env)
    measure("tilec, Inductor's caches warm, tilec's empty", "tilec", tilec_env, inductor_only)
    measure("tilec, Inductor's and tilec's local caches warm", "tilec", tilec_env, same("tilec"))
    server = _server()
    if server is None:
        table["tilec, shared cache warm"] = {"skipped": "tilec serve could not start here"}
        return table
    proc, url, key = server
    try:
        warmed = {"done": False}

        def first_machine(env: dict) -> dict:
            if not warmed["done"]:  # compiles through the server, which keeps the builds and tuning results
                child("tilec", model, tilec_env(url, key))
                warmed["done"] = True
            return env  # a new machine: Inductor's and tilec's local caches empty

        measure("tilec, shared cache warm (new machine)", "tilec", lambda: tilec_env(url, key), first_machine)
    finally:
        proc.terminate()
        proc.wait(30)
    return table


def _server():
    try:
        import httpx

        sys.path.insert(0, str(ROOT / "bench"))
        from tune import free_port, start_server

        port = free_port()
        proc = start_server(port, tempfile.mkdtemp(prefix="tilec-serve-"))
        url = f"http://127.0.0.1:{port}"
        key = httpx.get(f"{url}/v1/keys", timeout=10).json()[0]["public_key"]
        return proc, url, key
    except Exception as exc:  # the server extra's wheels are not on every GPU machine
        print(f"no tilec server: {type(exc).__name__}: {exc}", flush=True)
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="layer_norm")
    ap.add_argument("--runs", type=int, default=3)  # gpu_run.sh uses 1 to fit one device call
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--json")
    ap.add_argument(
        "--budget-s", type=float, default=float("inf"), help="start no check model after this long"
    )
    ns = ap.parse_args()
    start = time.perf_counter()
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="ind-check-"))
    os.environ.setdefault("TILEC_CACHE_DIR", tempfile.mkdtemp(prefix="tilec-check-"))
    os.environ.pop("TILEC_URL", None)
    import torch

    result: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    if not ns.skip_cold:
        result["cold_model"] = ns.model
        result["cold"] = {}

        def save(table: dict) -> None:
            result["cold"] = dict(table)
            if ns.json:
                Path(ns.json).write_text(json.dumps(result, indent=1) + "\n")

        cold(ns.model, ns.runs, save)
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=1) + "\n")
    if not ns.skip_check:
        t0 = time.perf_counter()
        result["check"] = check(ns.only, start + ns.budget_s)
        result["check_s"] = round(time.perf_counter() - t0, 1)
        ok = sum(bool(r["ok"]) for r in result["check"])
        print(f"check: {ok}/{len(result['check'])} models match Inductor's outputs under tilec "
              f"({result['check_s']} s)", flush=True)  # fmt: skip
    if ns.json:
        Path(ns.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

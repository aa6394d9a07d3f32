"""The autotuner: compile a kernel's configs in parallel on the CPU cores, benchmark them one at a time
on the target, and pick the fastest, recording every config's outcome (timed, stopped early by the
strategy, taken from an earlier tune, pruned, or failed) with its reason.

How each strategy spends its time:
- exhaustive: every config compiles and is timed to full precision (the 1% confidence interval of its
  median, or the repetition/time cap).
- random: a seeded sample of `budget` configs (all when the budget is larger), each as exhaustive does;
  the configs left out are not compiled and not recorded.
- halving (successive halving): every config is timed briefly (a loose interval, few repetitions);
  the fastest third go on to a longer round, and so on until at most two remain, which are timed to
  full precision. The configs a round drops keep their brief time, marked "stopped".
All configs compile (in parallel) before the first is timed: the spill rule compares them. What overlaps
the compiles is the caller's bench start-up (runtime/tune.py starts its bench child first).

Benchmarking is the caller's: `bench.time(artifact, config, rel=, min_reps=, max_reps=, max_seconds=)`
returns a compiler.tune.stats.Timing or raises (a faulting kernel fails its trial, not the tune).
"""

from __future__ import annotations

import math
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import random
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..artifact import Artifact
from ..errors import CompileError
from ..request import CompileRequest
from .space import config_hash, prune_after_compile, prune_before_compile, prune_shared, spills

STRATEGIES = ("exhaustive", "random", "halving")


@dataclass(frozen=True)
class Effort:
    """How hard one benchmark tries: the relative width of the median's confidence interval to reach,
    and the caps on repetitions and seconds."""

    rel: float
    min_reps: int
    max_reps: int
    max_seconds: float

    def kwargs(self) -> dict[str, Any]:
        return {"rel": self.rel, "min_reps": self.min_reps, "max_reps": self.max_reps, "max_seconds": self.max_seconds}


FULL = Effort(rel=0.01, min_reps=10, max_reps=1000, max_seconds=2.0)
BRIEF = Effort(rel=0.05, min_reps=5, max_reps=50, max_seconds=0.25)
KEEP = 3  # successive halving keeps the fastest 1/KEEP of a round


@dataclass
class Trial:
    config: dict
    status: str  # ok | stopped | cached | pruned | failed
    reason: str | None = None
    time_ms: float | None = None
    lo_ms: float | None = None
    hi_ms: float | None = None
    reps: int | None = None
    artifact: Artifact | None = field(default=None, repr=False)

    @property
    def hash(self) -> str:
        return config_hash(self.config)

    def public(self) -> dict[str, Any]:
        """The trial as plain data (the artifact left out)."""
        return {k: getattr(self, k) for k in ("config", "status", "reason", "time_ms", "lo_ms", "hi_ms", "reps")}


@dataclass
class Outcome:
    trials: list[Trial]
    cancelled: bool = False
    # seconds of wall time per phase: compile (until the last config compiled), wait (the first timing call,
    # which waits for the bench child to be ready), timing (the other timing calls), record (on_trial calls)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def best(self) -> Trial | None:
        timed = [t for t in self.trials if t.status in ("ok", "cached") and t.time_ms is not None]
        return min(timed, key=lambda t: t.time_ms) if timed else None


class Bench(Protocol):
    def time(self, art: Artifact, config: dict, **effort: Any) -> Any: ...


_SHARED_REFUSAL = "bytes of shared memory"  # in the cuda lowering's CompileError (backends/cuda/memory.py)


class Pruned(Exception):
    """A config stopped during its compile because the target cannot run it."""


def config_request(base: CompileRequest, config: Mapping[str, Any]) -> CompileRequest:
    """The compile of one config: its kwargs bound as constexprs, its warps and stages as options."""
    options = replace(base.options, num_warps=config["num_warps"], num_stages=config["num_stages"])
    return replace(base, constexprs={**base.constexprs, **config["kwargs"]}, options=options)


def compile_config(request: CompileRequest) -> Artifact | str:
    """In a compile worker: the Artifact, or the reason the config was pruned."""
    from ..pipeline import compile_request

    target = request.options.target

    def check(stage: str, meta: dict) -> None:
        if stage == "llir":
            reason = prune_shared(meta, target)
            if reason:
                raise Pruned(reason)

    try:
        art = compile_request(request, after_stage=check)
    except Pruned as exc:
        return str(exc)
    except CompileError as exc:
        # the cuda lowering refuses a block past the shared memory of every arch while it plans it, before
        # after_stage sees the plan: such a config is past the target's resources like the ones above
        if _SHARED_REFUSAL in exc.message:
            return exc.message
        raise
    return prune_after_compile(art.metadata) or art


Compiled = Artifact | str | BaseException
Compiler = Callable[[list[CompileRequest]], Iterator[tuple[int, Compiled]]]


def process_pool_compiler(workers: int | None = None) -> Compiler:
    """Compile in a pool of `workers` processes (default: the CPU cores), yielding as each ends."""

    def run(requests: list[CompileRequest]) -> Iterator[tuple[int, Compiled]]:
        if not requests:
            return
        n = max(1, min(len(requests), workers or os.cpu_count() or 1))
        pool = ProcessPoolExecutor(n, mp_context=mp.get_context("forkserver"), initializer=_follow_parent,
                                   initargs=(os.getpid(),))  # fmt: skip
        try:
            pending: dict[Future, int] = {pool.submit(compile_config, r): i for i, r in enumerate(requests)}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    index = pending.pop(fut)
                    exc = fut.exception()
                    yield index, exc if exc is not None else fut.result()
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    return run


class CompileLimitError(Exception):
    """A config's compile stopped by its limits: it ran past its time or out of its memory."""


def limited_compiler(
    workers: int | None = None,
    *,
    timeout_s: float = 60.0,
    memory_mb: int = 4096,
    cancelled: Callable[[], bool] = lambda: False,
) -> Compiler:
    """Compile each config in a child of its own (at most `workers` at once, default the CPU cores) under an
    address-space limit (`memory_mb`, which its ptxas inherits) and a wall-clock limit (`timeout_s`), in a
    process group of its own with a private temporary directory: a child past its time, or every child once
    `cancelled()` says so, is killed with its group (ptxas too) and its directory removed. A cancel ends the
    iteration early; the tuner then sees `cancelled()` itself."""

    def run(requests: list[CompileRequest]) -> Iterator[tuple[int, Compiled]]:
        todo = list(enumerate(requests))
        running: dict[Any, tuple[int, Any, str, float]] = {}  # connection -> (index, process, tmpdir, deadline)
        n = max(1, workers or os.cpu_count() or 1)
        try:
            while todo or running:
                if cancelled():
                    return
                while todo and len(running) < n:
                    index, request = todo.pop(0)
                    conn, proc, tmpdir = start_limited(compile_config, (request,), memory_mb)
                    running[conn] = (index, proc, tmpdir, time.monotonic() + timeout_s)
                ready = mp_connection.wait(list(running), timeout=0.2)
                now = time.monotonic()
                for conn in list(running):
                    index, proc, tmpdir, deadline = running[conn]
                    if conn in ready:
                        result = limited_result(conn, proc, memory_mb)
                    elif now > deadline:
                        result = CompileLimitError(f"ran past its limit of {timeout_s:g} s")
                    else:
                        continue
                    del running[conn]
                    end_limited(conn, proc, tmpdir)
                    yield index, result
        finally:
            for conn, (_, proc, tmpdir, _) in running.items():
                end_limited(conn, proc, tmpdir)

    return run


def start_limited(fn: Callable[..., Any], args: tuple, memory_mb: int) -> tuple[Any, Any, str]:
    """Start `fn(*args)` in a limited child (see limited_compiler): (its connection, process, tmpdir)."""
    ctx = mp.get_context("forkserver")
    tmpdir = tempfile.mkdtemp(prefix="tilec-compile-")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_limited_child, args=(child, fn, args, memory_mb, tmpdir, os.getpid()), daemon=True)
    proc.start()
    child.close()
    return parent, proc, tmpdir


def run_limited(fn: Callable[..., Any], args: tuple, *, timeout_s: float, memory_mb: int) -> Any:
    """`fn(*args)` in a limited child: its result, or the exception it raised, raised here
    (CompileLimitError past its time or memory)."""
    conn, proc, tmpdir = start_limited(fn, args, memory_mb)
    try:
        result = limited_result(conn, proc, memory_mb) if conn.poll(timeout_s) else None
    finally:
        end_limited(conn, proc, tmpdir)
    if result is None:
        raise CompileLimitError(f"ran past its limit of {timeout_s:g} s")
    if isinstance(result, BaseException):
        raise result
    return result


def _limited_child(conn: Any, fn: Callable[..., Any], args: tuple, memory_mb: int, tmpdir: str, parent: int) -> None:
    """In a limited child: its own process group and temporary directory, its memory limit, then fn."""
    import resource

    os.setpgid(0, 0)
    tempfile.tempdir = tmpdir
    os.environ["TMPDIR"] = tmpdir  # ptxas's own temporary files
    _follow_parent(parent, tmpdir)
    _preload()  # before the limit: the limit is the compile's, not the imports'
    if memory_mb > 0:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_mb << 20 if hard == resource.RLIM_INFINITY else min(memory_mb << 20, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        result: Any = fn(*args)
    except MemoryError:
        result = None
    except Exception as exc:  # noqa: BLE001 - a config's compile error is its trial's outcome
        result = exc
    try:
        try:
            conn.send(("memory", None) if result is None else ("ok", result))
        except (BrokenPipeError, ConnectionError):
            raise
        except Exception as exc:  # noqa: BLE001 - an error that does not pickle goes back as its text
            conn.send(("ok", RuntimeError(f"{type(exc).__name__}: {exc}")))
    except (BrokenPipeError, ConnectionError):  # the parent died while this compile ran: clean up here
        _orphaned(tmpdir)


def _preload() -> None:
    import importlib

    for name in ("pipeline", "backends.cpu.target", "backends.cuda.target", "backends.cuda.lower"):
        try:
            importlib.import_module(f"{__package__.rsplit('.', 1)[0]}.{name}")
        except Exception:  # noqa: BLE001, S112 - a missing piece is reported by the compile itself
            continue


def limited_result(conn: Any, proc: Any, memory_mb: int) -> Compiled:
    try:
        status, value = conn.recv()
    except (EOFError, OSError):
        proc.join(1)
        return CompileLimitError(f"its process died (exit code {proc.exitcode})")
    if status == "memory":
        return CompileLimitError(f"ran out of its memory limit of {memory_mb} MB")
    return value


def end_limited(conn: Any, proc: Any, tmpdir: str) -> None:
    """Kill a compile child's process group (it, and any ptxas it started) and remove its directory."""
    conn.close()
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.join(5)
    shutil.rmtree(tmpdir, ignore_errors=True)


def _follow_parent(parent: int, tmpdir: str | None = None) -> None:
    """In a compile worker: exit when the process that started the pool is gone (a tune worker killed
    mid-job), instead of compiling on for nobody. Its parent is the forkserver, so watch the pid."""
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(1.0)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                if tmpdir is not None:  # a limited child: its group's others (its ptxas), its directory, then itself
                    _orphaned(tmpdir)
                os._exit(0)
            except PermissionError:  # alive, another user's (cannot happen for our own parent)
                pass

    threading.Thread(target=watch, daemon=True, name="tilec-follow-parent").start()


def _orphaned(tmpdir: str) -> None:
    """A limited child whose parent is gone (nobody else will clean up): its group's other processes (ptxas)
    first; then its directory, removed again until it is gone (a file made while it is being removed, by this
    process's own compile going on meanwhile, leaves it behind; once it is gone nothing more can be made in
    it); then the group, itself included."""
    _kill_group_but_me()
    for _ in range(100):
        shutil.rmtree(tmpdir, ignore_errors=True)
        if not os.path.exists(tmpdir):
            break
    os.killpg(0, signal.SIGKILL)


def _kill_group_but_me() -> None:
    """SIGKILL every other process of this process group (read from /proc; nothing where there is none)."""
    me, group = os.getpid(), os.getpgid(0)
    try:
        pids = [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                pgrp = int(f.read().rsplit(")", 1)[1].split()[2])  # after "(comm)": state, ppid, pgrp
            if pgrp == group:
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue


def in_process_compiler(requests: list[CompileRequest]) -> Iterator[tuple[int, Compiled]]:
    """Compile one after another in this process (tests, and machines with one core)."""
    for i, r in enumerate(requests):
        try:
            yield i, compile_config(r)
        except Exception as exc:  # noqa: BLE001 - a config's compile error is its trial's outcome
            yield i, exc


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text[:2000]


@dataclass
class Tuner:
    """One tune: `base` is the compile request without a config; `configs` the normalised config dicts."""

    base: CompileRequest
    configs: list[dict]
    bench: Bench
    strategy: str = "halving"
    budget: int | None = None
    seed: int = 0
    known: Mapping[str, Trial] = field(default_factory=dict)  # config hash -> an earlier tune's trial, not rerun
    compiler: Compiler = field(default_factory=process_pool_compiler)
    on_trial: Callable[[Trial], None] = lambda t: None
    cancelled: Callable[[], bool] = lambda: False
    full: Effort = FULL
    brief: Effort = BRIEF
    graph: bool = False  # time replays of a CUDA graph of the launch (less launch overhead in the figure)
    _phases: dict[str, float] = field(default_factory=dict, init=False, repr=False)  # the last run's Outcome.phases

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; expected one of {', '.join(STRATEGIES)}")

    def plan(self) -> tuple[list[Trial], list[dict]]:
        """The trials settled without compiling (cached, pruned) and the configs to compile and time."""
        settled, todo = [], []
        for config in self.configs:
            cached = self.known.get(config_hash(config))
            reason = prune_before_compile(config, self.base.options.target)
            if cached is not None:  # status "cached" (timed in full before) or "stopped" (dropped before)
                settled.append(replace(cached, config=config, artifact=None))
            elif reason is not None:
                settled.append(Trial(config, "pruned", reason))
            else:
                todo.append(config)
        if self.strategy == "random" and self.budget is not None and self.budget < len(todo):
            todo = random.Random(self.seed).sample(todo, self.budget)
        return settled, todo

    def planned(self) -> int:
        settled, todo = self.plan()
        return len(settled) + len(todo)

    def run(self) -> Outcome:
        self._phases = dict.fromkeys(("compile", "wait", "timing", "record"), 0.0)
        out = self._run()
        # the first timing's wait, split: on the bench's start (a bench child's imports, context and arrays,
        # where the bench says) and the rest (the module's load and the first timing)
        start = min(float(getattr(self.bench, "start_wait_s", 0.0) or 0.0), self._phases["wait"])
        self._phases = {"compile": self._phases["compile"], "start": start, "wait": self._phases["wait"] - start,
                        **{k: v for k, v in self._phases.items() if k not in ("compile", "wait")}}  # fmt: skip
        out.phases = {k: round(v, 3) for k, v in self._phases.items()}
        return out

    def _run(self) -> Outcome:
        start = time.perf_counter()
        settled, todo = self.plan()
        trials: list[Trial] = []
        for t in settled:
            self._record(trials, t)
        halving = self.strategy == "halving"
        first = self.brief if halving else self.full
        built: list[Trial] = []  # compiled, waiting for the spill check or timed
        requests = [config_request(self.base, c) for c in todo]
        for index, result in self.compiler(requests):
            config = todo[index]
            if isinstance(result, BaseException):
                self._record(trials, Trial(config, "failed", f"compile: {_reason(result)}"))
            elif isinstance(result, str):
                self._record(trials, Trial(config, "pruned", result))
            else:
                built.append(Trial(config, "ok", artifact=result))
        self._phases["compile"] = time.perf_counter() - start
        # a config that spills when another does not is pruned before it is timed
        clean = any(spills(t.artifact.metadata) == 0 for t in built if t.artifact is not None)
        timed: list[Trial] = []  # halving: briefly timed, waiting for the rounds
        for t in built:
            n = spills(t.artifact.metadata) if t.artifact is not None else 0
            if clean and n:
                t.status, t.reason = "pruned", f"spills {n} bytes of registers where other configs do not"
                self._record(trials, t)
            elif self.cancelled():
                return Outcome(trials, cancelled=True)
            elif self._time(t, first) and halving:
                timed.append(t)
            else:  # failed, or timed in full: recorded now (progress shows it, and a cancel keeps it)
                self._record(trials, t)
        if halving and not self._halve(trials, timed):
            return Outcome(trials, cancelled=True)
        return Outcome(trials)

    def _halve(self, trials: list[Trial], alive: list[Trial]) -> bool:
        """Rounds of brief timings, each keeping the fastest third, then full timings for the last two."""
        rounds = 0
        while len(alive) > 2:
            alive.sort(key=lambda t: t.time_ms)
            keep = max(2, math.ceil(len(alive) / KEEP))
            for t in alive[keep:]:
                t.status = "stopped"
                t.reason = f"stopped after round {rounds + 1}: not among the {keep} fastest of {len(alive)}"
                self._record(trials, t)
            alive = alive[:keep]
            rounds += 1
            if len(alive) > 2:  # another brief round, a little longer
                effort = replace(self.brief, max_seconds=self.brief.max_seconds * 2**rounds)
                alive = self._retime(trials, alive, effort)
        if self.cancelled():
            return False
        for t in self._retime(trials, alive, self.full):
            self._record(trials, t)
        return True

    def _retime(self, trials: list[Trial], group: list[Trial], effort: Effort) -> list[Trial]:
        kept = []
        for t in group:
            if self._time(t, effort):
                kept.append(t)
            else:
                self._record(trials, t)
        return kept

    def _time(self, t: Trial, effort: Effort) -> bool:
        """Benchmark one trial; False (with the trial failed) when its kernel faulted."""
        phase = "wait" if not self._phases.get("wait") else "timing"
        start = time.perf_counter()
        try:
            timing = self.bench.time(t.artifact, t.config, graph=self.graph, **effort.kwargs())
        except Exception as exc:  # noqa: BLE001 - a fault fails this trial only
            kind, text = getattr(exc, "kind", "error"), _reason(exc)
            reason = text if text.startswith(f"{kind}: ") else f"{kind}: {text}"  # TrialFault names its kind
            t.status, t.reason, t.time_ms = "failed", reason, None
            return False
        finally:
            self._phases[phase] = self._phases.get(phase, 0.0) + time.perf_counter() - start
        t.time_ms, t.lo_ms, t.hi_ms, t.reps = timing.median_ms, timing.lo_ms, timing.hi_ms, timing.reps
        return True

    def _record(self, trials: list[Trial], t: Trial) -> None:
        trials.append(t)
        start = time.perf_counter()
        self.on_trial(t)
        self._phases["record"] = self._phases.get("record", 0.0) + time.perf_counter() - start

"""Compiles off the event loop: one child process per task, forked from a preloaded forkserver.

Each child gets an address-space limit (RLIMIT_AS, which its ptxas inherits), a wall-clock limit, a
process group of its own and a private temporary directory: one that runs over is killed with its whole
group (ptxas included) and its directory removed. Its answer is bounded (MAX_ANSWER_BYTES). A bounded
number run at once. Identical concurrent tasks share one run (single flight by key).
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import multiprocessing.forkserver
import os
import pickle
import resource
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from . import errors as E

_CTX = mp.get_context("forkserver")
_CTX.set_forkserver_preload(["tilec.server._preload"])


class TaskFailed(Exception):
    """A child ended without a result: kind is 'timeout', 'memory', 'crash', 'compile', 'tool', 'internal'."""

    def __init__(self, kind: str, info: Any) -> None:
        super().__init__(f"{kind}: {info}")
        self.kind = kind
        self.info = info


MAX_ANSWER_BYTES = 64 << 20  # a compile's answer (artifact, texts, pass dumps) past this is refused


def enter_group(tmpdir: str) -> None:
    """In a compile child: lead a process group of its own (so that a kill reaches the tools it starts)
    and keep every temporary file in `tmpdir` (the parent removes it, whatever happened)."""
    os.setpgid(0, 0)
    tempfile.tempdir = tmpdir
    os.environ["TMPDIR"] = tmpdir  # the tools' own temporary files


def kill_group(proc: Any, tmpdir: str | None) -> None:
    """Kill a compile child's whole process group (the child and its ptxas) and remove its directory."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.join(5)
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _child_main(conn: Any, task: str, kwargs: dict, memory_mb: int, tmpdir: str = "") -> None:
    if tmpdir:
        enter_group(tmpdir)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if memory_mb > 0:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard < 0 else min(limit, hard), hard))
    try:
        answer = pickle.dumps(("ok", _run_task(task, kwargs)))
        if len(answer) > MAX_ANSWER_BYTES:
            answer = pickle.dumps(("internal", f"the answer is {len(answer)} bytes, over {MAX_ANSWER_BYTES}"))
        conn.send_bytes(answer)
    except MemoryError:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        conn.send(("memory", None))
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent as data
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        conn.send(_describe(exc))
    finally:
        conn.close()


def _noop() -> None:
    pass


def _run_task(task: str, kwargs: dict) -> Any:
    from tilec.server.worker import TASKS

    return TASKS[task](**kwargs)


def _describe(exc: BaseException) -> tuple[str, Any]:
    from tilec.compiler.errors import CompileError, ToolError

    if isinstance(exc, CompileError):
        return "compile", exc.to_dict()
    if isinstance(exc, ToolError):
        return "tool", {"tool": exc.tool, "stderr": exc.stderr[-4000:], "repro": exc.repro}
    if isinstance(exc, RecursionError):
        return "compile", {"message": "the input nests too deeply", "file": "<source>", "line": None, "col": None}
    return "internal", f"{type(exc).__name__}: {exc}"[:2000]


@contextmanager
def _main_not_rerun() -> Iterator[None]:
    """multiprocessing re-runs the parent's __main__ script in every child it starts (for pickled
    functions defined there); ours live in server.pool, so tell it the main module is unnamed."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = main.__dict__.get("__spec__")
    main.__spec__ = SimpleNamespace(name="__main__")  # type: ignore[assignment]
    try:
        yield
    finally:
        main.__spec__ = saved


def _wait(proc: Any, conn: Any, timeout: float, tmpdir: str | None = None) -> tuple[str, Any]:
    try:
        if not conn.poll(timeout):
            return "timeout", None
        return pickle.loads(conn.recv_bytes(MAX_ANSWER_BYTES + 4096))
    except (EOFError, OSError):
        proc.join(1)
        return "crash", f"exit code {proc.exitcode}"
    finally:
        kill_group(proc, tmpdir)  # a child past its time, and whatever it started; its temporary files
        conn.close()


@dataclass
class CompilePool:
    workers: int = 2
    timeout_s: float = 60.0
    memory_mb: int = 4096
    max_waiting: int = 256
    on_waiting: Callable[[int], None] = lambda n: None
    _sem: asyncio.Semaphore | None = None
    _threads: ThreadPoolExecutor | None = None
    _inflight: dict[str, asyncio.Future] = field(default_factory=dict)
    waiting: int = 0

    def warm(self) -> None:
        """Start the forkserver (it imports the compiler once) so the first compile does not wait for it."""
        multiprocessing.forkserver.ensure_running()
        with _main_not_rerun():
            proc = _CTX.Process(target=_noop, daemon=True)
            proc.start()
        proc.join(60)

    def _start(self) -> None:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.workers)
            self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="tilec-compile")

    async def run(self, task: str, kwargs: dict, *, timeout_s: float | None = None) -> Any:
        self._start()
        if self.waiting >= self.max_waiting:
            raise E.ApiError(503, E.NOT_AVAILABLE, "too many compiles waiting", headers={"Retry-After": "5"})
        self.waiting += 1
        self.on_waiting(self.waiting)
        try:
            await self._sem.acquire()
        finally:
            self.waiting -= 1
            self.on_waiting(self.waiting)
        try:
            return await self._run_child(task, kwargs, timeout_s or self.timeout_s)
        finally:
            self._sem.release()

    async def _run_child(self, task: str, kwargs: dict, timeout: float) -> Any:
        parent, child = _CTX.Pipe(duplex=False)
        tmpdir = tempfile.mkdtemp(prefix="tilec-compile-")
        proc = _CTX.Process(
            target=_child_main, args=(child, task, kwargs, self.memory_mb, tmpdir), daemon=True
        )
        with _main_not_rerun():
            proc.start()
        child.close()
        loop = asyncio.get_running_loop()
        status, value = await loop.run_in_executor(self._threads, _wait, proc, parent, timeout, tmpdir)
        if status != "ok":
            raise TaskFailed(status, value)
        return value

    async def shared(self, key: str, make: Callable[[], Awaitable[Any]]) -> tuple[Any, bool]:
        """Run make() once for all concurrent callers with this key; (result, True if we joined one)."""
        fut = self._inflight.get(key)
        if fut is not None:
            return await asyncio.shield(fut), True
        fut = asyncio.ensure_future(make())
        self._inflight[key] = fut
        fut.add_done_callback(lambda _f: self._inflight.pop(key, None))
        return await asyncio.shield(fut), False

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)

"""The bench child's side (runtime/bench.py BenchProcess is the parent's): run in a sandboxed process
(runtime/sandbox.py: a fresh exec, limits and namespaces already applied), it makes its bench from the
parent's spec, locks itself down, then answers each request with JSON: {"ok": value} or {"fault": kind,
"message": text}. A stranger's code runs only after the lockdown."""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tilec.compiler.tune.stats import Timing

from .bench import TrialFault, make_bench
from .sandbox import per_call


def sandboxed_bench(conn, profile: Any, lockdown: Callable[[], dict]) -> None:
    """The child's life: an optional warm-up ("warm": imports and the GPU's context ahead of the launch), the
    first launch's bench, the lockdown, then its requests; after a "reset" (a GPU child kept for its owner's
    next job) the next launch's bench, under the lockdown already in place."""

    def reply(data: dict) -> None:
        conn.send_bytes(json.dumps(data).encode())

    try:
        first = conn.recv()
        if first[0] == "warm":  # a standby child: the imports and the device's context now, the launch later
            _warm(first[1], first[2])
            first = conn.recv()
    except (EOFError, OSError):  # the parent is gone
        return
    bench = _start(first, reply)
    if bench is None:
        return
    layers = lockdown()
    reply({"ok": layers})
    while (spec := _serve(conn, profile, bench, reply)) is not None:
        if spec[0] == "close":  # the parent did not keep it after all
            return
        bench = _start(spec, reply, gpu_only=True)
        if bench is None:
            return
        reply({"ok": layers})


def _start(spec: tuple, reply: Callable[[dict], None], *, gpu_only: bool = False) -> Any:
    """The bench of a launch spec (target, resolved, seed, device), or None once the failure is replied."""
    try:
        target, resolved, seed, device = spec
        if gpu_only and not target.startswith("cuda"):
            raise TrialFault("launch", "a kept bench serves GPU launches only")
        if target == "cpu":
            from . import cpu as _runtime_cpu

            _runtime_cpu.prepare()  # LLVM, libm and the JIT's pieces loaded before the filesystem goes away
        return make_bench(target, resolved, seed, device=device)
    except TrialFault as exc:
        reply({"fault": exc.kind, "message": f"the bench cannot start: {exc.message}"})
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it as a TrialFault
        reply({"fault": "crash", "message": f"the bench cannot start: {type(exc).__name__}: {exc}"})
    return None


def _serve(conn, profile: Any, bench: Any, reply: Callable[[dict], None]) -> tuple | None:
    """One launch's requests; after a "reset" (its GPU memory freed, the context healthy) the next message,
    the next launch's spec (or a close); None when the child is to end."""
    while True:
        try:
            op, *rest = conn.recv()
        except (EOFError, OSError):
            return None
        if op == "close":
            return None
        per_call(profile.limits)
        if op == "reset":
            try:
                bench.release()  # the launch's buffers, module and events freed; raises if the context died
            except Exception as exc:  # noqa: BLE001 - the parent kills a child that cannot be reset
                reply({"fault": "crash", "message": f"the bench cannot be reset: {type(exc).__name__}: {exc}"})
                return None
            reply({"ok": True})
            try:
                return conn.recv()
            except (EOFError, OSError):
                return None
        try:
            value = bench.time(rest[0], rest[1], **rest[2]) if op == "time" else bench.device_info()
        except TrialFault as exc:
            reply({"fault": exc.kind, "message": exc.message})
            continue
        except Exception as exc:  # noqa: BLE001 - any other error fails the trial; the process is replaced
            where = traceback.extract_tb(exc.__traceback__)[-1]
            reply(
                {"fault": "crash", "message": f"{type(exc).__name__}: {exc} (at {where.name}:{where.lineno})"}
            )
            continue
        reply({"ok": asdict(value) if isinstance(value, Timing) else value})


def _warm(kind: str, device: int) -> None:
    """What every bench of `kind` needs before its launch is known: the runtime's imports and, on a GPU, the
    device's primary context (the slowest part of a start). An error here is left to the real start to raise."""
    try:
        import numpy  # noqa: F401 - host_arrays' inputs

        if kind == "cpu":
            from . import cpu as _runtime_cpu

            _runtime_cpu.prepare()
        else:
            from . import cuda as rt

            rt._context(device)
    except Exception:  # noqa: BLE001 - the start that follows reports it as the bench's
        pass

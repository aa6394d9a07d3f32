"""Bench children started ahead of need (a tune worker's setting): each has done its imports and made its GPU
context (runtime/bench.py `_warm`, in the child) while the jobs before ran, and waits for a launch. A child
still serves one BenchProcess only, one job's kernels, as without them: it is only started earlier."""

from __future__ import annotations

import atexit
import threading
from dataclasses import asdict

from .sandbox import Child, Limits, Profile

ENTRY = "tilec.runtime.bench:sandboxed_bench"


class Standby:
    """Bench children started ahead of need (a tune worker's setting, keep_standby): each has done its imports
    and made its GPU context while the last job ran, and waits for a launch. A child still serves one
    BenchProcess only (one job's kernels; a fresh process per job, as without standby): it is only started
    earlier. Keyed by target kind, device and limits, since the child's sandbox is fixed when it starts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.ready: dict[tuple, list[Child]] = {}

    @staticmethod
    def spawn(kind: str, device: int, limits: Limits) -> Child:
        child = Child(ENTRY, Profile(kind=kind, limits=limits))
        child.send(("warm", kind, device))
        return child

    def take(self, kind: str, device: int, limits: Limits) -> Child:
        with self.lock:
            kept = self.ready.setdefault(self.key(kind, device, limits), []) if self.count else []
            child = kept.pop(0) if kept else None
            self._fill(kept, kind, device, limits)  # the next jobs' children start now
        if child is not None and child.alive():
            return child
        if child is not None:
            child.kill()
        return self.spawn(kind, device, limits)

    @staticmethod
    def key(kind: str, device: int, limits: Limits) -> tuple:
        return (kind, device, tuple(sorted(asdict(limits).items())))

    def _fill(self, kept: list[Child], kind: str, device: int, limits: Limits) -> None:
        while self.count and len(kept) < self.count:
            kept.append(self.spawn(kind, device, limits))

    def fill(self, kind: str, device: int, limits: Limits) -> None:
        with self.lock:
            if self.count:
                self._fill(self.ready.setdefault(self.key(kind, device, limits), []), kind, device, limits)

    def set(self, count: int) -> None:
        with self.lock:
            self.count = max(0, count)
            dropped = [c for kept in self.ready.values() for c in kept[self.count:]]
            for kept in self.ready.values():
                del kept[self.count:]
        for child in dropped:
            child.kill()


standby = Standby()


def keep_standby(count: int = 1, *, kind: str | None = None, device: int = 0, limits: Limits | None = None) -> None:
    """Keep `count` bench children started ahead for each kind of bench this process starts (0: none, the
    default); with `kind` ("cpu" or "cuda"), those of that kind, device and limits start now, so that a fresh
    worker's first job finds them too. A tune worker sets it: a job's bench is then ready when its compiles end,
    instead of a process start, the imports and a GPU context later (about 0.8 s of a 1.8 s job on an H100
    host); and a bench's close no longer waits for its child to exit."""
    standby.set(count)
    if count and kind is not None:
        standby.fill(kind, device, limits or Limits())


atexit.register(standby.set, 0)  # the children waiting end with the process (none unless keep_standby asked)

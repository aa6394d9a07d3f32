"""Bench children started ahead of need (a tune worker's setting): each has done its imports and made its GPU
context (runtime/bench_child.py `_warm`, in the child) while the jobs before ran, and waits for a launch. A child
still serves one BenchProcess only, one job's kernels, as without them: it is only started earlier."""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from dataclasses import asdict
from typing import Any

from .sandbox import Child, Limits, Profile, cpu_seconds

ENTRY = "tilec.runtime.bench_child:sandboxed_bench"


class Standby:
    """Bench children started ahead of need (a tune worker's setting, keep_standby): each has done its imports
    and made its GPU context while the last job ran, and waits for a launch. A child still serves one
    BenchProcess only (one job's kernels; a fresh process per job, as without standby): it is only started
    earlier. Keyed by target kind, device and limits, since the child's sandbox is fixed when it starts."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.ready: dict[tuple, list[Child]] = {}
        # children kept after a GPU job for the next job of the same owner (a submit token): a context costs
        # ~0.5 s to make and a host makes ~2 a second whatever its number of GPUs, so a fresh one per job caps
        # a host's jobs; never handed to another owner. keep_max in all, least recently used dropped first
        self.keep_max = 0
        self.keep_uses = 200  # a child serves at most this many jobs
        self.kept: OrderedDict[tuple, Child] = OrderedDict()

    @staticmethod
    def spawn(kind: str, device: int, limits: Limits) -> Child:
        child = Child(ENTRY, Profile(kind=kind, limits=limits, device=device if kind == "cuda" else None))
        child.send(("warm", kind, child.local(device)))
        return child

    def take(self, kind: str, device: int, limits: Limits, owner: Any = None) -> Child:
        if owner is not None:
            kept = self._kept(self.key(kind, device, limits), owner)
            if kept is not None:
                return kept
        with self.lock:
            kept = self.ready.setdefault(self.key(kind, device, limits), []) if self.count else []
            child = kept.pop(0) if kept else None
            self._fill(kept, kind, device, limits)  # the next jobs' children start now
        if child is not None and child.alive():
            return child
        if child is not None:
            child.kill()
        return self.spawn(kind, device, limits)

    def _kept(self, key: tuple, owner: Any) -> Child | None:
        """The owner's kept child for this kind of bench (a live one), taken out of the keep; or None."""
        with self.lock:
            child = self.kept.pop((key, owner), None)
        if child is not None and not child.alive():
            child.kill()
            return None
        return child

    def keep(self, child: Child, kind: str, device: int, limits: Limits, owner: Any) -> bool:
        """Keep a child that has been reset after its job for `owner`'s next job; False (the caller kills
        it) when keeping is off, the child has served its share (jobs, or half the CPU seconds of its life:
        past the rest its limit would kill it in a later job's timing, failing a trial that did nothing
        wrong), or the owner has one kept already."""
        if child.jobs >= self.keep_uses or cpu_seconds(child.pid) * 2 > limits.life_cpu_s:
            return False
        dropped: list[Child] = []
        with self.lock:
            slot = (self.key(kind, device, limits), owner)
            if self.keep_max <= 0 or slot in self.kept:
                return False
            self.kept[slot] = child
            while len(self.kept) > self.keep_max:
                dropped.append(self.kept.popitem(last=False)[1])
        for old in dropped:
            old.kill()
        return True

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

    def set(self, count: int, keep: int | None = None) -> None:
        with self.lock:
            self.count = max(0, count)
            dropped = [c for kept in self.ready.values() for c in kept[self.count:]]
            for kept in self.ready.values():
                del kept[self.count:]
            if keep is not None:
                self.keep_max = max(0, keep)
            while len(self.kept) > self.keep_max:
                dropped.append(self.kept.popitem(last=False)[1])
        for child in dropped:
            child.kill()


standby = Standby()


def keep_standby(count: int = 1, *, kind: str | None = None, device: int = 0, limits: Limits | None = None,
                 keep: int | None = None) -> None:  # fmt: skip
    """Keep `count` bench children started ahead for each kind of bench this process starts (0: none, the
    default); with `kind` ("cpu" or "cuda"), those of that kind, device and limits start now, so that a fresh
    worker's first job finds them too. A tune worker sets it: a job's bench is then ready when its compiles end,
    instead of a process start, the imports and a GPU context later (about 0.8 s of a 1.8 s job on an H100
    host); and a bench's close no longer waits for its child to exit. `keep`: GPU bench children kept after a
    job for the next job of the same owner (BenchProcess's `owner`), at most that many in all (0: none)."""
    standby.set(count, keep)
    if count and kind is not None:
        standby.fill(kind, device, limits or Limits())


atexit.register(standby.set, 0, 0)  # the children waiting end with the process (none unless keep_standby asked)

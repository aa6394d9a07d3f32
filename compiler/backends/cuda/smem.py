"""The block's shared memory during one kernel's lowering, owned by one object that the lowering's mixins
ask instead of keeping flags of their own.

Layout: from byte 0, the rings (and staged loop-invariant tiles, and TMA mbarriers) of the pipelined loops
being lowered; from `base` on, scratch, which one op owns at a time (a layout conversion, a reduction's
warp partials, staged mma operands), so every user's scratch starts at `base` and the kernel needs the
largest extent any of them reached (`size`).

The barrier rule: scratch that a user has written and read may still be being read by a slower warp when
the next user writes it. So a user `claim`s its bytes before writing (a barrier first when the previous
user `released` them and no barrier has come since), syncs between its own writes and reads itself, and
`released` after its reads. Where control flow joins or a region begins, the previous user is unknown:
`control_flow` assumes one. Every barrier the lowering emits is reported (`synced`).

`epoch` counts reservations: a tile staged at some epoch is still where it was while the epoch is unchanged
(wgmma.py reads a loop-invariant tile that an earlier loop staged instead of staging it again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ...errors import OutOfResourcesError

MAX_SMEM = 227 * 1024  # per block on sm_80 / sm_90 (the opt-in maximum, less the 1 KiB the driver keeps)


class SharedMemory:
    def __init__(self, barrier: Callable[[], None], limit: int = MAX_SMEM) -> None:
        self._barrier = barrier  # emits a block-wide barrier where the lowering is (it then calls synced)
        self.limit = limit
        self.size = 0  # bytes the kernel needs: the largest extent reserved
        self.base = 0  # scratch starts here; below lie the rings of the pipelined loops being lowered
        self.epoch = 0  # bumped by every reservation
        self._dirty = False  # a released user's reads may be in flight: the next writer syncs first

    # ---- space ---------------------------------------------------------------------------------

    def reserve(self, nbytes: int) -> None:
        """`nbytes` from `base` are in use (no barrier implied: `claim` is reserve + the barrier rule)."""
        if nbytes > self.limit:
            raise OutOfResourcesError(
                f"cuda: needs {nbytes} bytes of shared memory, more than the {self.limit} a block has",
                required=nbytes, limit=self.limit,
            )  # fmt: skip
        if self.base + nbytes > self.limit:
            raise OutOfResourcesError(f"cuda: needs {self.base + nbytes} bytes of shared memory (a pipelined loop's "
                                      f"ring takes {self.base}), more than the {self.limit} a block has",
                                      required=self.base + nbytes, limit=self.limit)  # fmt: skip
        self.size = max(self.size, self.base + nbytes)
        self.epoch += 1  # whatever an earlier loop left in shared memory may be overwritten now

    @contextmanager
    def scoped(self, base: int) -> Iterator[None]:
        """Scratch starts at `base` inside the block (a pipelined loop's body, above its rings; or 0 for
        code that writes at absolute offsets), and where it started before after it."""
        saved, self.base = self.base, base
        try:
            yield
        finally:
            self.base = saved

    # ---- the barrier rule ----------------------------------------------------------------------

    def claim(self, nbytes: int) -> None:
        """Reserve `nbytes` of scratch for a user about to write it, after a barrier where the previous
        user's reads may still be in flight."""
        self.reserve(nbytes)
        if self._dirty:
            self._barrier()

    def released(self) -> None:
        """The current user has issued its reads: the next writer must sync first."""
        self._dirty = True

    def control_flow(self) -> None:
        """A region begins or control flow joins: a user on some path may still be reading."""
        self._dirty = True

    def synced(self) -> None:
        """A block-wide barrier was emitted here: every earlier read has completed."""
        self._dirty = False

    @property
    def needs_barrier(self) -> bool:
        return self._dirty

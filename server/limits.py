"""Per-token limits on work in flight: how many compiles one token waits on at once in this process
(TILEC_MAX_COMPILES_PER_TOKEN). A request past the limit is a 429 with Retry-After, before any work.
(Tune jobs are counted in the database instead: jobs/service.py.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from . import errors as E

COMPILE_RETRY_S = "5"


class CompileSlots:
    def __init__(self, per_token: int) -> None:
        self.per_token = per_token
        self.held: dict[int, int] = {}

    @asynccontextmanager
    async def hold(self, token_id: int | None) -> AsyncIterator[None]:
        """One of the token's compile slots for the duration (none for anonymous requests: auth off)."""
        if token_id is None or self.per_token <= 0:
            yield
            return
        held = self.held.get(token_id, 0)
        if held >= self.per_token:
            detail = E.MSG_TOO_MANY_COMPILES.format(limit=self.per_token)
            raise E.ApiError(429, E.TOO_MANY_COMPILES, detail, headers={"Retry-After": COMPILE_RETRY_S})
        self.held[token_id] = held + 1
        try:
            yield
        finally:
            left = self.held[token_id] - 1
            if left:
                self.held[token_id] = left
            else:
                del self.held[token_id]

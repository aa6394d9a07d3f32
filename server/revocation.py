"""The revocation watch, a task of each API process: every revocation_poll_s it reads how many tokens
are revoked (one small count) and, when that moved, forgets every cached token. A revoke made through
any uvicorn worker, replica or `tilec token revoke` thus takes effect on all of them within about that
time, where the token cache alone would have kept a revoked token for token_cache_ttl_s.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.exc import SQLAlchemyError

from .db import crud
from .state import AppState

log = logging.getLogger("tilec.server")


async def watch_revocations(state: AppState) -> None:
    while True:
        try:
            state.note_revocations(await state.query(crud.revoked_tokens))
        except SQLAlchemyError:  # the database is down: cached tokens answer until it is back, as lookups do
            log.debug("revocation watch: the database is unavailable", exc_info=True)
        except asyncio.CancelledError:
            return
        try:
            await asyncio.sleep(state.settings.revocation_poll_s)
        except asyncio.CancelledError:
            return

"""Small in-process caches in front of the database: an LRU with a TTL (lookups, tokens) and a
byte-bounded LRU for immutable artifact downloads. Stale entries stay to answer during outages.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class TTLCache:
    def __init__(self, size: int, ttl_s: float) -> None:
        self.size = size
        self.ttl_s = ttl_s
        self._data: OrderedDict[Any, tuple[float, Any]] = OrderedDict()

    def get(self, key: Any, *, allow_stale: bool = False) -> Any | None:
        item = self._data.get(key)
        if item is None:
            return None
        stored, value = item
        if not allow_stale and time.monotonic() - stored > self.ttl_s:
            return None
        self._data.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        self._data[key] = (time.monotonic(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)

    def drop(self, key: Any) -> None:
        self._data.pop(key, None)

    def drop_where(self, matches: Callable[[Any], bool]) -> None:
        """Drop every entry whose value matches (a scan: for rare events such as a token revoked)."""
        for key in [k for k, (_stored, value) in self._data.items() if matches(value)]:
            del self._data[key]

    def clear(self) -> None:
        self._data.clear()


class BytesLRU:
    """Immutable blobs (artifact forms already verified against their sha256), bounded in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self._data: OrderedDict[Any, tuple[bytes, str]] = OrderedDict()

    def get(self, key: Any) -> tuple[bytes, str] | None:
        item = self._data.get(key)
        if item is not None:
            self._data.move_to_end(key)
        return item

    def put(self, key: Any, body: bytes, sha256: str) -> None:
        if len(body) > self.max_bytes // 4 or key in self._data:
            return
        self._data[key] = (body, sha256)
        self.used += len(body)
        while self.used > self.max_bytes:
            _, (old, _sha) = self._data.popitem(last=False)
            self.used -= len(old)

    def drop(self, key: Any) -> None:
        item = self._data.pop(key, None)
        if item is not None:
            self.used -= len(item[0])

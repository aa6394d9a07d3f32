"""Attacks on the HTTP edge, run against a real server on loopback: stalled request bodies (with the
server's resident memory sampled throughout) and the delay before a revoked token is refused by every
uvicorn worker. Used by tests/server/test_edge.py and bench/http_edge.py."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx


def rss_mb(pid: int) -> float:
    """A process's resident set size in MB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


@dataclass
class StallResult:
    before_mb: float
    peak_mb: float
    connections: int
    refused: int  # connections the server answered or closed before the whole body was sent
    bytes_sent: int
    seconds: float


def stall_bodies(port: int, pid: int, *, connections: int, body_bytes: int, seconds: float,
                 path: str = "/v1/tune-jobs", token: str | None = None) -> StallResult:  # fmt: skip
    """Open `connections` connections that each declare a body of `body_bytes` bytes, send all of it but
    the last byte as fast as the server takes it, and stall; sample the server's RSS every 50 ms for
    `seconds`, then close them all. The sender never copies the body (one buffer, memoryviews)."""
    payload = memoryview(b"x" * (body_bytes - 1))
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {body_bytes}\r\n\r\n").encode()  # fmt: skip
    before = rss_mb(pid)
    sel = selectors.DefaultSelector()
    socks: list[socket.socket] = []
    todo: dict[socket.socket, list[memoryview]] = {}
    refused = sent = 0
    start = time.monotonic()
    for _ in range(connections):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        socks.append(s)
        todo[s] = [memoryview(head), payload]
        sel.register(s, selectors.EVENT_WRITE)
    peak, last_sample = before, 0.0
    try:
        while time.monotonic() - start < seconds:
            for key, _ in sel.select(timeout=0.05):
                s = key.fileobj
                parts = todo[s]  # type: ignore[index]
                try:
                    n = s.send(parts[0])  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                except OSError:  # the server closed it (refused before the body)
                    refused += 1
                    sel.unregister(s)
                    continue
                sent += n
                parts[0] = parts[0][n:]
                if not len(parts[0]):
                    parts.pop(0)
                if not parts:
                    sel.unregister(s)  # all but the last byte is out: stall
            if time.monotonic() - last_sample >= 0.05:
                peak, last_sample = max(peak, rss_mb(pid)), time.monotonic()
    finally:
        sel.close()
        for s in socks:
            s.close()
    return StallResult(before, peak, connections, refused, sent, time.monotonic() - start)


def revocation_delay(url: str, *, admin: str, victim: str, victim_id: int, probe_s: float,
                     threads: int = 8) -> float:  # fmt: skip
    """Seconds from the revoke's answer to the last request the victim token still got a 200 for, with
    `threads` clients sending requests on fresh connections (so every worker process serves some)."""
    headers = {"Authorization": f"Bearer {victim}"}

    def probe(_i: int) -> tuple[float, int]:
        status = httpx.get(f"{url}/v1/kernels?limit=1", headers=headers, timeout=10).status_code
        return time.monotonic(), status

    with ThreadPoolExecutor(threads) as pool:
        warm = list(pool.map(probe, range(20 * threads)))  # every worker caches the token
        assert all(status == 200 for _, status in warm), warm
        stop = threading.Event()
        seen: list[tuple[float, int]] = []

        def loop() -> None:
            while not stop.is_set():
                seen.append(probe(0))

        loops = [pool.submit(loop) for _ in range(threads)]
        time.sleep(0.2)
        r = httpx.delete(
            f"{url}/v1/tokens/{victim_id}", headers={"Authorization": f"Bearer {admin}"}, timeout=10
        )
        revoked = time.monotonic()
        assert r.status_code == 200, r.text
        time.sleep(probe_s)
        stop.set()
        for f in loops:
            f.result()
    after = [(t, status) for t, status in seen if t > revoked]
    assert after and all(status in (200, 401) for _, status in after), after[:5]
    last_ok = max((t for t, status in after if status == 200), default=revoked)
    return last_ok - revoked

"""Figures for the HTTP edge (issue 20): the server's memory under a stalled-body attack and the delay
before a revoked token is refused by every worker of `tilec serve --workers N`.

    python3 bench/http_edge.py --connections 1500 --probe-s 35

starts `tilec serve` on a fresh SQLite database in a temporary directory, on loopback with auth on,
and prints JSON. Run it with PYTHONPATH pointing at an older checkout's package to measure "before".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.server.conftest import free_port  # noqa: E402
from tests.server.edge_attacks import revocation_delay, stall_bodies  # noqa: E402


def serve(data: Path, workers: int) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILEC_")}
    env.update({"TILEC_DATA_DIR": str(data), "TILEC_AUTH": "true"})
    exe = Path(sys.executable).with_name("tilec")
    cmd = [str(exe), "serve", "--port", str(port), "--workers", str(workers)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc, port
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("tilec serve did not become healthy")


def tokens(data: Path, *scopes: str) -> list[tuple[int, str]]:
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    from tilec.server.db import crud

    engine = create_engine(f"sqlite:///{data / 'tilec.db'}")
    with Session(engine) as session, session.begin():
        made = [crud.create_token(session, scopes=[s]) for s in scopes]
        out = [(row.id, plain) for plain, row in made]
    engine.dispose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1500)
    parser.add_argument("--body-bytes", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--probe-s", type=float, default=35.0)
    args = parser.parse_args()
    result: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        proc, port = serve(data, 1)
        try:
            for _ in range(20):
                httpx.post(f"http://127.0.0.1:{port}/v1/tune-jobs", json={}, timeout=10)
            got = stall_bodies(port, proc.pid, connections=args.connections, body_bytes=args.body_bytes,
                               seconds=args.seconds)  # fmt: skip
            result["stalled_bodies"] = {"connections": got.connections, "body_bytes": args.body_bytes,
                                        "bytes_sent": got.bytes_sent, "rss_before_mb": round(got.before_mb, 1),
                                        "rss_peak_mb": round(got.peak_mb, 1), "seconds": round(got.seconds, 1)}  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(30)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        proc, port = serve(data, args.workers)
        try:
            (_, admin), (victim_id, victim) = tokens(data, "admin", "read")
            delay = revocation_delay(f"http://127.0.0.1:{port}", admin=admin, victim=victim, victim_id=victim_id,
                                     probe_s=args.probe_s)  # fmt: skip
            result["revocation"] = {
                "workers": args.workers,
                "delay_s": round(delay, 3),
                "window_s": args.probe_s,
            }
        finally:
            proc.terminate()
            proc.wait(30)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

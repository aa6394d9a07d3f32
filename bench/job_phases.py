"""Where a tune job's time goes, from the workers' logs of a GPU drill (bench/cluster_gpu.py --logs): each job's
line `job N: done in T s (prepare …, tune … [compile …, wait …, timing …, record …, close …], store …)`, averaged
per scaling round (the rounds' jobs are numbered in order: --jobs x 1, x 2, x 4 ...).

    python3 bench/job_phases.py cluster_logs.tar.gz --jobs 16 --workers 1,2,4
"""

from __future__ import annotations

import argparse
import re
import statistics
import tarfile
from pathlib import Path

LINE = re.compile(r"job (\d+): done in ([\d.]+) s \(prepare ([\d.]+) s, tune ([\d.]+) s \[(.*?)\], store ([\d.]+) s\)")


def jobs(tarball: Path) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    with tarfile.open(tarball) as tar:
        for member in tar.getmembers():
            if not (member.isfile() and Path(member.name).name.startswith("worker")):
                continue
            for line in tar.extractfile(member).read().decode(errors="replace").splitlines():
                m = LINE.search(line)
                if m is None:
                    continue
                row = {"total": float(m[2]), "prepare": float(m[3]), "tune": float(m[4]), "store": float(m[6])}
                row.update((k, float(v)) for k, v in (p.split() for p in m[5].split(", ") if p))
                out[int(m[1])] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", type=Path, help="the drill's --logs tarball")
    ap.add_argument("--jobs", type=int, default=16, help="the drill's --jobs (per worker, per round)")
    ap.add_argument("--workers", default="1,2,4", help="the drill's --workers")
    args = ap.parse_args()
    rows = jobs(args.logs)
    cols = ["total", "prepare", "tune", "compile", "start", "wait", "timing", "record", "close", "store"]
    print(f"{'workers':>7} {'jobs':>5} " + " ".join(f"{c:>8}" for c in cols) + "   (mean seconds per job)")
    first = 1
    for n in (int(x) for x in args.workers.split(",")):
        ids = range(first, first + args.jobs * n)
        sel = [rows[i] for i in ids if i in rows]
        first += args.jobs * n
        if sel:
            print(f"{n:>7} {len(sel):>5} " + " ".join(f"{statistics.mean(r.get(c, 0.0) for r in sel):8.2f}" for c in cols))


if __name__ == "__main__":
    main()

"""Without a server, a build made in one process is kept in the local cache and the next process launches it
with no compile, as Triton's ~/.triton/cache does: each process here is a fresh Python, on the cpu target.
TILEC_ALWAYS_COMPILE=1 compiles every time; a corrupt cached build is compiled again and replaced; another
num_warps is another build; a strict process (TILEC_STRICT=1) launches from that cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

KERNELS = """
import tilec
import tilec.language as tl


@tilec.jit
def axpy(x_ptr, out_ptr, n, a, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * a + 1.0, mask=m)
"""

RUN = """
import json, sys
import numpy as np
import tilec
import lbk

warps = int(sys.argv[1])
x = np.arange(1000, dtype=np.float32)
out = np.zeros_like(x)
lbk.axpy[(4,)](x, out, 1000, 2.0, BLOCK=256, num_warps=warps)
print(json.dumps({"ok": bool(np.array_equal(out, x * 2 + 1)), "stats": tilec.compile_stats(),
                  "obtained": lbk.axpy.obtained}))
"""


def _run(tmp_path: Path, cache: Path, warps: int = 4, **env: str) -> dict:
    (tmp_path / "lbk.py").write_text(textwrap.dedent(KERNELS))
    (tmp_path / "run.py").write_text(textwrap.dedent(RUN))
    full = {**os.environ, "TILEC_CACHE_DIR": str(cache), "PYTHONPATH": str(tmp_path), **env}
    for name in ("TILEC_SERVER", "TILEC_INDEX", "TILEC_STRICT", "TILEC_ALWAYS_COMPILE"):
        if name not in env:
            full.pop(name, None)
    done = subprocess.run([sys.executable, str(tmp_path / "run.py"), str(warps)], env=full, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ok"], out
    return out


def test_the_next_process_launches_the_build_without_compiling(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run(tmp_path, cache)
    assert first["stats"]["compiles"] == 1 and first["obtained"]["here"] == 1
    second = _run(tmp_path, cache)
    assert second["stats"]["compiles"] == 0 and second["obtained"] == {"here": 0, "disk": 1, "server": 0}
    strict = _run(tmp_path, cache, TILEC_STRICT="1")  # a build from the cache is no miss
    assert strict["stats"]["compiles"] == 0
    other = _run(tmp_path, cache, warps=2)  # num_warps is part of the build
    assert other["stats"]["compiles"] == 1


def test_always_compile_reads_and_writes_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    for _ in range(2):
        assert _run(tmp_path, cache, TILEC_ALWAYS_COMPILE="1")["stats"]["compiles"] == 1
    assert not (cache / "index").exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_damaged_build_is_compiled_again_and_replaced(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    _run(tmp_path, cache)
    (blob,) = [p for p in (cache / "blobs").rglob("*") if p.is_file()]
    data = blob.read_bytes()
    mid = len(data) // 2
    blob.write_bytes(
        data[:mid] if damage == "truncate" else data[:mid] + bytes([data[mid] ^ 1]) + data[mid + 1 :]
    )
    again = _run(tmp_path, cache)
    assert again["stats"]["compiles"] == 1
    assert _run(tmp_path, cache)["stats"]["compiles"] == 0


def test_a_cache_entry_naming_another_target_is_dropped(tmp_path: Path) -> None:
    """An entry whose artifact is not for the build's target (written by hand, or by another tool) is never
    launched: it is dropped and the kernel compiled."""
    from tilec.client._cache import LocalBuilds, LocalCache
    from tilec.compiler.artifact import Artifact, CompileOptions

    class FakeBuild:
        target = "cpu"

        @staticmethod
        def index_key() -> str:
            return json.dumps({"build": "k"})

    local = LocalBuilds(LocalCache(tmp_path / "c"))
    opts = CompileOptions()
    local.put(FakeBuild, opts, Artifact(target="cuda:sm_90", kernel_name="k", binary=b"\x7fELF"))
    assert local.get(FakeBuild, opts) is None
    assert local.cache.get_index(LocalBuilds.key(FakeBuild, opts)) is None
    art = Artifact(target="cpu", kernel_name="k", binary=b"obj")
    local.put(FakeBuild, opts, art)
    assert local.get(FakeBuild, opts).binary == b"obj"

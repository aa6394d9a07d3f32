"""The client's side of issue 27 without a server: what a record lists (variants from the kernel's
parameters, a tune job's launch description with its grid as expressions), how records merge (from the
command line too), TILEC_STRICT's two modes on a real compile, and records that cannot be used."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

import tilec
from tilec.client import _record
from tilec.client._record import RecordFileError, _grid_exprs, merge, read_record, variants

ROOT = Path(__file__).resolve().parents[2]
TILEC = ROOT / ".venv" / "bin" / "tilec"

KERNEL = """
import triton
import triton.language as tl


@triton.jit
def addc(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + {c}, mask=m)
"""


def test_variants_flip_one_parameter_at_a_time_and_add_the_generic_build() -> None:
    entry = {"signature": {"x": "*fp32", "n": "i32", "s": "fp32"}, "hints": {"x": {"divisibility": 16}, "n": {"divisibility": 16}}}
    got = variants(entry)
    assert {"n": {"divisibility": 16}} in got  # x not aligned
    assert {"x": {"divisibility": 16}, "n": {"equal_to_1": True}} in got
    assert {"x": {"divisibility": 16}} in got  # n neither divisible by 16 nor 1
    assert {} in got and len(got) == 4  # and the build with no hints; a float has none to vary
    assert entry["hints"] not in got


def test_a_grid_is_written_as_expressions_that_give_every_configs_grid() -> None:
    grids = [({"BM": 64, "BN": 32}, (32 * 4, 1, 1)), ({"BM": 128, "BN": 32}, (16 * 4, 1, 1))]
    assert _grid_exprs(grids, {"M": 2048, "N": 128}) == ["cdiv(M, BM) * cdiv(N, BN)"]
    assert _grid_exprs([({"B": 64}, (16, 3, 1)), ({"B": 128}, (8, 3, 1))], {"n": 1024}) == ["cdiv(n, B)", 3]
    assert _grid_exprs([({"B": 64}, (7, 1, 1)), ({"B": 128}, (5, 1, 1))], {"n": 1024}) is None  # no expression fits


def test_records_merge_launched_over_variants(tmp_path: Path) -> None:
    base = {"name": "k", "kernel_key": "a" * 64, "source": "s", "target": "cpu", "signature": {"n": "i32"},
            "constexprs": {}, "hints": {}, "config": {"kwargs": {}}, "tuning": None, "launch": None}  # fmt: skip
    one = {"format": _record.RECORD_FORMAT, "sources": {"s": {"kind": "source", "text": "x"}},
           "entries": [{**base, "variant": True}]}  # fmt: skip
    two = {**one, "entries": [{**base, "variant": False}, {**base, "hints": {"n": {"equal_to_1": True}}, "variant": True}]}
    merged = merge([one, two])
    assert [(e["hints"], e["variant"]) for e in merged["entries"]] == [({}, False), ({"n": {"equal_to_1": True}}, True)]
    # the command line refuses a record whose source does not match its sha256 (exit 2, the file named)
    (tmp_path / "bad.json").write_text(json.dumps(one))
    done = subprocess.run([str(TILEC), "manifest", "merge", "bad.json", "-o", "m.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "does not match its sha256" in done.stderr
    with pytest.raises(RecordFileError, match="not a tilec-record/1"):
        (tmp_path / "other.json").write_text("{}")
        read_record(tmp_path / "other.json")


def test_record_writes_the_launches_of_a_process(tmp_path: Path) -> None:
    k = tilec.jit(KERNEL.format(c="1.0"), "addc")
    x = np.random.rand(1000).astype(np.float32)
    out = np.empty_like(x)
    tilec.record(tmp_path / "rec.json")
    try:
        k[(4,)](x, out, 1000, BLOCK=256)
        k[(4,)](x, out, 1000, BLOCK=256)  # once in the record
    finally:
        tilec.record(None)
    record = read_record(tmp_path / "rec.json")
    launched = [e for e in record["entries"] if not e["variant"]]
    assert len(launched) == 1 and launched[0]["constexprs"] == {"BLOCK": 256} and launched[0]["kernel_key"] == k.ks.key
    assert "n" not in launched[0]["hints"]  # 1000 is not a multiple of 16
    assert {"n": {"divisibility": 16}} in [{n: h for n, h in e["hints"].items() if n == "n"} for e in record["entries"]]


def test_strict_raises_and_warn_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TILEC_URL", raising=False)
    x = np.random.rand(64).astype(np.float32)
    out = np.empty_like(x)
    monkeypatch.setenv("TILEC_STRICT", "1")
    k = tilec.jit(KERNEL.format(c="2.0"), "addc")
    before = tilec.compile_stats()
    with pytest.raises(tilec.StrictError) as caught:
        k[(1,)](x, out, 64, BLOCK=64)
    assert caught.value.kernel == "addc" and caught.value.what == "compile" and caught.value.target == "cpu"
    assert caught.value.specialisation["constexprs"] == {"BLOCK": 64}
    assert "addc would compile on cpu" in str(caught.value) and "BLOCK=64" in str(caught.value)
    after = tilec.compile_stats()
    assert after["compiles"] == before["compiles"] and after["misses"] == before["misses"] + 1
    monkeypatch.setenv("TILEC_STRICT", "warn")
    k = tilec.jit(KERNEL.format(c="3.0"), "addc")
    with pytest.warns(RuntimeWarning, match="TILEC_STRICT=warn"):
        k[(1,)](x, out, 64, BLOCK=64)
    assert np.allclose(out, x + 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        k[(1,)](x, out, 64, BLOCK=64)  # the same specialisation: in memory, no second warning
    assert tilec.compile_stats()["compiles"] == after["compiles"] + 1

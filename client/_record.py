"""TILEC_RECORD=FILE (or `tilec.record(path)`): every specialisation this process launches, written as a
pull manifest (`tilec pull --manifest FILE`). Many processes and ranks may record into one file: each
new entry is merged into it under a lock; `tilec manifest merge` joins files recorded apart.

The file is JSON: {"format": "tilec-record/1", "sources": {sha256: {"kind", "text"}}, "entries": [...]}.
An entry names its kernel (name, kernel key, the sha256 of its source or bundle in `sources`), the target,
the build (signature, constexprs, hints, config) and, for an autotuned kernel, its tuning key's parts and a
launch description a tune job can run (None where the grid could not be written as one). Entries a run
never hit but a later one may (a pointer not 16-byte aligned, an int not divisible by 16, or equal to 1)
are listed too, with `variant: true`: a strict run must not meet them as misses.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

RECORD_FORMAT = "tilec-record/1"
_STATE: dict[str, Any] = {"recorder": None, "env_read": False}
_LOCK = threading.Lock()


class RecordFileError(ValueError):
    """A record file that cannot be read or is not one this version writes."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def entry_identity(entry: dict[str, Any]) -> str:
    """What makes two entries the same build to pull: a tuned entry is its tuning key and specialisation
    (the config is the server's to choose); a plain one its whole build."""
    keep = ("kernel_key", "target", "signature", "constexprs", "hints", "tuning")
    body = {k: entry.get(k) for k in keep}
    if entry.get("tuning") is None:
        body["config"] = entry.get("config")
    return _canonical(body)


class Recorder:
    """Entries recorded by this process, flushed (merged) into `path` as each new one comes."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.seen: set[str] = set()

    def add(self, kernel: Any, build: Any, *, tuning: dict | None, launch: dict | None) -> None:
        """Record one launched build of `kernel` (a client Build) and its variants."""
        sha = hashlib.sha256(kernel.source.encode()).hexdigest()
        base = {"name": kernel.name, "kernel_key": build.kernel_key, "source": sha, "target": build.target,
                "signature": dict(build.signature), "constexprs": dict(build.constexprs),
                "hints": {k: dict(v) for k, v in build.hints.items()}, "config": dict(build.config),
                "tuning": tuning, "launch": launch, "variant": False}  # fmt: skip
        entries = [base] + [{**base, "hints": h, "variant": True, "launch": None} for h in variants(base)]
        new = [e for e in entries if entry_identity(e) not in self.seen]
        if not new:
            return
        self.seen.update(entry_identity(e) for e in new)
        self.flush({"format": RECORD_FORMAT, "sources": {sha: {"kind": kernel.kind, "text": kernel.source}},
                    "entries": new})  # fmt: skip

    def flush(self, record: dict[str, Any]) -> None:
        """Merge `record` into the file, under an exclusive lock (other processes record into it too)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _LOCK, open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                held = read_record(self.path) if self.path.exists() else None
                write_record(self.path, merge([held, record] if held else [record]))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def variants(entry: dict[str, Any]) -> list[dict[str, dict]]:
    """The hint sets of the specialisations a warm-up may not hit: each runtime parameter taken alone to
    the other hints it can have (a pointer aligned or not; an int divisible by 16, equal to 1, or neither),
    the others as launched, and the build with no hints at all. One parameter at a time (the product of every
    parameter's would be 3^n): a call that differs in several runs the pulled build whose hints it has."""
    hints = entry["hints"]
    out = []
    for name, ty in entry["signature"].items():
        if ty.startswith("*"):
            choices: list[dict] = [{"divisibility": 16}, {}]
        elif ty in ("i32", "i64", "u64"):
            choices = [{"divisibility": 16}, {"equal_to_1": True}, {}]
        else:
            continue
        for choice in choices:
            if choice == hints.get(name, {}):
                continue
            changed = {k: dict(v) for k, v in hints.items() if k != name}
            if choice:
                changed[name] = choice
            out.append(changed)
    if hints and {} not in [h for h in out]:
        out.append({})  # the build with no hints runs any call of the specialisation (client/_pulled.py)
    return out


def merge(records: list[dict[str, Any]]) -> dict[str, Any]:
    """One record of several: sources joined, entries deduplicated (a launched entry wins over a variant,
    and one with a launch description over one without), in a stable order."""
    sources: dict[str, Any] = {}
    entries: dict[str, dict] = {}
    for record in records:
        sources.update(record["sources"])
        for e in record["entries"]:
            ident = entry_identity(e)
            held = entries.get(ident)
            if held is None:
                entries[ident] = dict(e)
                continue
            held["variant"] = held["variant"] and e["variant"]
            if held.get("launch") is None and e.get("launch") is not None:
                held["launch"] = e["launch"]
    ordered = sorted(entries.values(), key=lambda e: (e["name"], e["variant"], entry_identity(e)))
    return {"format": RECORD_FORMAT, "sources": dict(sorted(sources.items())), "entries": ordered}


_ENTRY_FIELDS = {"name": str, "kernel_key": str, "source": str, "target": str, "signature": dict,
                 "constexprs": dict, "hints": dict, "config": dict, "variant": bool}  # fmt: skip


def is_record(text: str) -> bool:
    """Whether a manifest's text is a record (JSON of this format) rather than a hand-written TOML one."""
    return text.lstrip().startswith("{")


def read_record(path: Path) -> dict[str, Any]:
    """A record file, checked (RecordFileError naming the file and the entry)."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise RecordFileError(f"{path}: cannot read it as JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        raise RecordFileError(f"{path}: not a {RECORD_FORMAT} record")
    sources, entries = data.get("sources"), data.get("entries")
    if not isinstance(sources, dict) or not isinstance(entries, list):
        raise RecordFileError(f"{path}: a record has 'sources' (an object) and 'entries' (a list)")
    for sha, src in sources.items():
        if not isinstance(src, dict) or src.get("kind") not in ("source", "bundle") or not isinstance(src.get("text"), str):
            raise RecordFileError(f"{path}: source {sha[:16]} is not {{kind, text}}")
        if hashlib.sha256(src["text"].encode()).hexdigest() != sha:
            raise RecordFileError(f"{path}: source {sha[:16]} does not match its sha256")
    for number, e in enumerate(entries):
        bad = [k for k, t in _ENTRY_FIELDS.items() if not isinstance(e, dict) or not isinstance(e.get(k), t)]
        if bad:
            raise RecordFileError(f"{path}: entry {number} lacks or mistypes {', '.join(bad)}")
        if e["source"] not in sources:
            raise RecordFileError(f"{path}: entry {number} ({e['name']}) names a source the record lacks")
        if e.get("tuning") is not None and not isinstance(e["tuning"], dict):
            raise RecordFileError(f"{path}: entry {number} ({e['name']}): 'tuning' is not an object")
    return data


def write_record(path: Path, record: dict[str, Any]) -> None:
    from ._cache import write_atomic

    write_atomic(path, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())


def record(path: str | os.PathLike | None) -> Recorder | None:
    """Record every specialisation this process launches from now on into `path` (None: stop)."""
    with _LOCK:
        _STATE["env_read"] = True
        _STATE["recorder"] = Recorder(path) if path is not None else None
        return _STATE["recorder"]


def recorder() -> Recorder | None:
    """The active recorder: tilec.record()'s, else TILEC_RECORD's (read once)."""
    if not _STATE["env_read"]:
        with _LOCK:
            if not _STATE["env_read"]:
                _STATE["env_read"] = True
                path = os.environ.get("TILEC_RECORD")
                _STATE["recorder"] = Recorder(path) if path else None
    return _STATE["recorder"]


# a tune job's launch description, from the arguments of a launch

def launch_description(kernel: Any, grid: Any, bound: dict[str, Any], configs: list[Any]) -> dict | None:
    """The launch as data for a tune job: tensors by shape, strides and dtype (random floats, zero ints: an
    int tensor may index), scalars by value, the grid as expressions over the scalars and each config's
    parameters found to give every config's grid. None when an argument or the grid cannot be written so."""
    from tilec.runtime.grid import check_grid

    full = kernel.complete_loose(bound)
    args: dict[str, Any] = {}
    scalars: dict[str, int] = {}
    for p in kernel.params:
        if p.constexpr or full.get(p.name) is None:
            continue
        value = full[p.name]
        spec = _tensor(value)
        if spec is not None:
            args[p.name] = spec
            continue
        v = value.item() if hasattr(value, "item") and not hasattr(value, "shape") else value
        if not isinstance(v, bool | int | float):
            return None
        args[p.name] = v
        if isinstance(v, int) and not isinstance(v, bool):
            scalars[p.name] = v
    grids = []
    for cfg in configs:
        try:
            cfull, _ = kernel._config_args(bound, cfg)
            grids.append((dict(cfg.kwargs), tuple(check_grid(grid, cfull))))
        except Exception:  # noqa: BLE001 - a grid this config cannot compute: no description
            return None
    exprs = _grid_exprs(grids, scalars)
    return None if exprs is None else {"grid": exprs, "args": args}


def _tensor(value: Any) -> dict | None:
    import numpy as np

    from tilec.runtime.launch import BF16Array

    if isinstance(value, BF16Array):
        value = value.bits
    if isinstance(value, np.ndarray):
        shape, strides, kind = list(value.shape), [s // value.itemsize for s in value.strides], value.dtype.kind
    elif hasattr(value, "shape") and hasattr(value, "stride") and hasattr(value, "dtype"):  # torch
        shape, strides = [int(d) for d in value.shape], [int(s) for s in value.stride()]
        kind = "f" if value.dtype.is_floating_point else "i"
    else:
        return None
    return {"init": "randn" if kind == "f" else "zeros", "shape": shape, "strides": strides}


def _grid_exprs(grids: list[tuple[dict, tuple]], scalars: dict[str, int]) -> list[str | int] | None:
    """Per axis, the first expression that gives every config's grid: a constant, a scalar, cdiv(s, P),
    or a product of two cdivs (P a config parameter); trailing axes of 1 dropped."""
    params = sorted({k for kw, _ in grids for k, v in kw.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0})
    terms = [(f"cdiv({s}, {p})", lambda kw, s=s, p=p: -(-scalars[s] // kw[p]) if p in kw else None)
             for s in sorted(scalars) for p in params]  # fmt: skip
    terms += [(s, lambda kw, s=s: scalars[s]) for s in sorted(scalars)]
    out: list[str | int] = []
    for axis in range(3):
        want = [g[axis] for _, g in grids]
        if len(set(want)) == 1:
            out.append(want[0])
            continue
        found = next((text for text, f in terms if [f(kw) for kw, _ in grids] == want), None)
        if found is None:
            found = next((f"{a} * {b}" for a, fa in terms for b, fb in terms
                          if [_mul(fa(kw), fb(kw)) for kw, _ in grids] == want), None)  # fmt: skip
        if found is None:
            return None
        out.append(found)
    while len(out) > 1 and out[-1] == 1:
        out.pop()
    return out


def _mul(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b

"""Decisions a team can audit: how a tuning key's best is declared (a winner only where its interval is
clear of the runner-up's, else a stable rule, recorded with the result), pinned configs that beat measured
ones, the history of each key's best by GPU model and compiler version, and the misses clients report.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.orm import Session

from .models import Artifact, Miss, ServerFact, Trial, TuningHistory, TuningPin, TuningResult, utcnow

TIE_RULE = "fewest stages, then fewest warps, then the smallest meta-parameters"
SLOWER_BY = 0.05  # a key is slower when its newest best is over 5% above the one before, on one GPU model


def _stable_order(config: dict[str, Any]) -> tuple:
    kwargs = sorted((k, (0, v) if isinstance(v, int | float) else (1, str(v))) for k, v in (config.get("kwargs") or {}).items())
    return (config.get("num_stages") or 0, config.get("num_warps") or 0, kwargs)


def decide(rows: list[Any]) -> tuple[Any, dict[str, Any]]:
    """The winner of timed trials (objects with config, time_ms, lo_ms, hi_ms) and the decision: "measured"
    when the fastest's interval lies below the runner-up's (or no intervals were measured), else "tie": of
    the trials whose interval overlaps the fastest's, the first by TIE_RULE."""
    ranked = sorted(rows, key=lambda r: r.time_ms)
    best = ranked[0]
    if len(ranked) == 1:
        return best, {"rule": "measured", "runner_up_ms": None}
    runner = ranked[1]
    if best.hi_ms is None or runner.lo_ms is None or best.hi_ms < runner.lo_ms:
        return best, {"rule": "measured", "runner_up_ms": runner.time_ms, "intervals": best.hi_ms is not None}
    tied = [r for r in ranked if r.lo_ms is not None and r.lo_ms <= best.hi_ms] or [best, runner]
    winner = min(tied, key=lambda r: _stable_order(r.config))
    return winner, {"rule": "tie", "by": TIE_RULE, "fastest_ms": best.time_ms,
                    "tied": [{"config": r.config, "time_ms": r.time_ms, "lo_ms": r.lo_ms, "hi_ms": r.hi_ms}
                             for r in tied]}  # fmt: skip


def set_decision(session: Session, *, tkey: str, decision: dict[str, Any]) -> None:
    session.execute(update(TuningResult).where(TuningResult.tuning_key == tkey).values(decision=decision))


# pins


def get_pin(session: Session, *, tkey: str) -> TuningPin | None:
    return session.get(TuningPin, tkey)


def pinned_clause() -> Any:
    """SQL: the tuning result's key has a pin (a measured upsert must not replace a pinned best)."""
    return exists(select(TuningPin.tuning_key).where(TuningPin.tuning_key == TuningResult.tuning_key))


def pin(session: Session, *, tkey: str, config: dict[str, Any], config_hash: str, reason: str,
        token_id: int | None) -> TuningPin | None:  # fmt: skip
    """Pin `config` for a held tuning key: the result serves it (with the build of its trial, when one was
    timed) until unpinned. None when the server holds no result for the key."""
    result = session.get(TuningResult, tkey)
    if result is None:
        return None
    trial = session.scalar(select(Trial).where(Trial.tuning_key == tkey, Trial.config_hash == config_hash))
    row = session.get(TuningPin, tkey) or TuningPin(tuning_key=tkey)
    row.config, row.reason, row.pinned_by, row.pinned_at = config, reason, token_id, utcnow()
    session.add(row)
    measured = result.best_config if (result.decision or {}).get("rule") != "pinned" else (result.decision or {}).get("measured")
    result.best_config = config
    result.artifact_key = trial.artifact_key if trial is not None else None
    result.best_time_ms = trial.time_ms if trial is not None else result.best_time_ms
    result.decision = {"rule": "pinned", "reason": reason, "pinned_by": token_id, "measured": measured}
    result.updated_at = utcnow()
    session.flush()
    return row


def unpin(session: Session, *, tkey: str) -> bool:
    """Remove the pin; the result goes back to the decision over its trials (all GPU models' "ok" rows)."""
    if session.execute(delete(TuningPin).where(TuningPin.tuning_key == tkey)).rowcount == 0:
        return False
    result = session.get(TuningResult, tkey)
    rows = [r for r in session.scalars(select(Trial).where(Trial.tuning_key == tkey)) if r.status == "ok"]
    if result is not None and rows:
        best, decision = decide(rows)
        result.best_config, result.best_time_ms, result.artifact_key = best.config, best.time_ms, best.artifact_key
        result.decision = decision
        result.updated_at = utcnow()
    elif result is not None:
        result.decision = None
    return True


# history


def add_history(session: Session, *, tkey: str, gpu_model: str | None, compiler_version: str, best: dict) -> None:
    session.add(TuningHistory(tuning_key=tkey, gpu_model=gpu_model, compiler_version=compiler_version,
                              best_time_ms=best["time_ms"], config=best["config"]))  # fmt: skip
    session.flush()


def history(session: Session, *, tkey: str, limit: int = 500) -> list[TuningHistory]:
    q = select(TuningHistory).where(TuningHistory.tuning_key == tkey).order_by(TuningHistory.recorded_at, TuningHistory.id)
    return list(session.scalars(q.limit(limit)).all())


def slower_keys(session: Session, *, target: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Keys whose newest best on a GPU model is slower (by SLOWER_BY) than the best that model had under
    the compiler version before: one row per (key, GPU model), the largest slow-down first."""
    q = select(TuningHistory, TuningResult).join(TuningResult, TuningResult.tuning_key == TuningHistory.tuning_key)
    if target is not None:
        q = q.where(TuningResult.target == target)
    q = q.order_by(TuningHistory.tuning_key, TuningHistory.recorded_at, TuningHistory.id).limit(50_000)
    series: dict[tuple, list[tuple[TuningHistory, TuningResult]]] = {}
    for h, r in session.execute(q):
        series.setdefault((h.tuning_key, h.gpu_model), []).append((h, r))
    out = []
    for (tkey, model), points in series.items():
        newest, result = points[-1]
        before = [h for h, _ in points if h.compiler_version != newest.compiler_version]
        if not before:
            continue
        prev = before[-1]
        if newest.best_time_ms > prev.best_time_ms * (1 + SLOWER_BY):
            out.append({"tuning_key": tkey, "kernel_key": result.kernel_key, "key": result.key_values,
                        "dtypes": result.dtypes, "target": result.target, "gpu_model": model,
                        "before_ms": prev.best_time_ms, "after_ms": newest.best_time_ms,
                        "before_version": prev.compiler_version, "after_version": newest.compiler_version})  # fmt: skip
    out.sort(key=lambda d: d["after_ms"] / d["before_ms"], reverse=True)
    return out[:limit]


# misses


def count_misses(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Miss)) or 0


def find_miss(session: Session, *, miss_key: str) -> Miss | None:
    return session.scalar(select(Miss).where(Miss.miss_key == miss_key))


def note_miss(session: Session, *, values: dict[str, Any], seen: datetime) -> Miss:
    """Count a reported miss: a new row, or the same specialisation's count and last sighting."""
    row = find_miss(session, miss_key=values["miss_key"])
    if row is None:
        row = Miss(**values, count=1, first_seen=seen, last_seen=seen)
        session.add(row)
    else:
        session.execute(update(Miss).where(Miss.id == row.id).values(count=Miss.count + 1, last_seen=seen))
        session.refresh(row)
    session.flush()
    return row


def list_misses(session: Session, *, target: str | None, limit: int, offset: int) -> list[Miss]:
    q = select(Miss).order_by(Miss.last_seen.desc(), Miss.id.desc())
    if target is not None:
        q = q.where(Miss.target == target)
    return list(session.scalars(q.limit(limit).offset(offset)).all())


def get_miss(session: Session, *, miss_id: int) -> Miss | None:
    return session.get(Miss, miss_id)


# facts and the inventory


def get_fact(session: Session, name: str) -> Any:
    row = session.get(ServerFact, name)
    return None if row is None else row.value


def set_fact(session: Session, name: str, value: Any) -> None:
    row = session.get(ServerFact, name)
    if row is None:
        session.add(ServerFact(name=name, value=value))
    else:
        row.value = value
    session.flush()


def inventory(session: Session, *, target: str, gpu_model: str | None = None, kernel: str | None = None,
              compiler_version: str | None = None, tkey: str | None = None) -> list[TuningResult]:  # fmt: skip
    """Every tuning result held for `target`, narrowed: a trial on `gpu_model`; kernel key or name `kernel`;
    a best build made by compiler `compiler_version` (or a prefix of it); one key."""
    from .models import Kernel

    q = select(TuningResult).where(TuningResult.target == target)
    if tkey is not None:
        q = q.where(TuningResult.tuning_key == tkey)
    if gpu_model is not None:
        q = q.where(exists(select(Trial.id).where(Trial.tuning_key == TuningResult.tuning_key, Trial.gpu_model == gpu_model)))
    if kernel is not None:
        names = select(Kernel.key).where(Kernel.name == kernel)
        q = q.where((TuningResult.kernel_key == kernel) | TuningResult.kernel_key.in_(names))
    if compiler_version is not None:
        built = select(Artifact.key).where(Artifact.compiler_version.startswith(compiler_version, autoescape=True))
        q = q.where(TuningResult.artifact_key.in_(built))
    return list(session.scalars(q.order_by(TuningResult.tuning_key).limit(10_000)).all())

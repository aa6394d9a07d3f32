"""The tables: kernels, artifacts (binary + metadata in one row), tuning results, their trials, tune
jobs, tokens. Tuning results are written by the tuning-results route (a client that tuned on its own
arguments) and by tune jobs (a worker that tuned from a launch description) alike.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from .base import Base

KEY = String(64)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Kernel(Base):
    __tablename__ = "kernels"
    # the web page lists kernels newest first, and by part of their name, from this index alone (migration 0005)
    __table_args__ = (Index("ix_kernels_created_at_key_name", "created_at", "key", "name"),)

    key: Mapped[str] = mapped_column(KEY, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(8))  # "source" | "ir"
    source: Mapped[str | None] = mapped_column(Text)
    ir: Mapped[str | None] = mapped_column(Text)
    input_sha256: Mapped[str] = mapped_column(KEY, index=True)  # of (kind, requested name, text) as sent
    info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # params, autotune, heuristics
    submitted_by: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Artifact(Base):
    __tablename__ = "artifacts"
    # kernels built for a target, and the targets there are (the web page's filter; migration 0005)
    __table_args__ = (Index("ix_artifacts_target_kernel_key", "target", "kernel_key"),)

    key: Mapped[str] = mapped_column(KEY, primary_key=True)
    kernel_key: Mapped[str] = mapped_column(ForeignKey("kernels.key", ondelete="CASCADE"), index=True)
    kernel_name: Mapped[str] = mapped_column(String(200))
    target: Mapped[str] = mapped_column(String(32))
    emit: Mapped[str] = mapped_column(String(8))
    compiler_version: Mapped[str] = mapped_column(String(64))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)  # signature, constexprs, hints: enough to rebuild
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    binary: Mapped[bytes] = mapped_column(LargeBinary)
    tir: Mapped[str] = mapped_column(Text, default="")
    llir: Mapped[str] = mapped_column(Text, default="")
    ptx: Mapped[str] = mapped_column(Text, default="")
    meta: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # launch metadata
    sha256: Mapped[str] = mapped_column(KEY)  # of the binary
    size: Mapped[int] = mapped_column(Integer)
    # each text form is verified against its own sha256 (of its UTF-8 bytes) before it is served
    tir_sha256: Mapped[str] = mapped_column(KEY)
    llir_sha256: Mapped[str] = mapped_column(KEY)
    ptx_sha256: Mapped[str] = mapped_column(KEY)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # the tile IR after each pass, as the compile made it: zlib-compressed JSON [{"name", "ir"}] (the web
    # page shows it; migration 0006). None for builds that did not keep them (tune trials, older rows).
    pass_dumps: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True, deferred=True)
    # the builder's Ed25519 signature (base64) over the build manifest, made when the row was stored and
    # served as is (migration 0007); NULL for rows stored before: their manifests are unsigned
    signature: Mapped[str | None] = mapped_column(String(100), nullable=True)
    signing_key_id: Mapped[str | None] = mapped_column(String(16), nullable=True)


class TuningResult(Base):
    """The best config for a tuning key; a cache of the minimum over its trials."""

    __tablename__ = "tuning_results"
    # the web page lists results most recently improved first, of all targets or of one, and of kernels by
    # name: a page's keys come from these indexes alone (migration 0005)
    __table_args__ = (
        Index("ix_tuning_results_updated_at_tuning_key", "updated_at", "tuning_key", "kernel_key"),
        Index("ix_tuning_results_target_updated_at", "target", "updated_at", "tuning_key", "kernel_key"),
    )

    tuning_key: Mapped[str] = mapped_column(KEY, primary_key=True)
    kernel_key: Mapped[str] = mapped_column(ForeignKey("kernels.key", ondelete="CASCADE"), index=True)
    key_values: Mapped[str] = mapped_column(String(1000))
    dtypes: Mapped[str] = mapped_column(String(1000))
    target: Mapped[str] = mapped_column(String(32))
    best_config: Mapped[dict[str, Any]] = mapped_column(JSON)
    best_time_ms: Mapped[float] = mapped_column(Float)
    artifact_key: Mapped[str | None] = mapped_column(ForeignKey("artifacts.key", ondelete="SET NULL"), index=True)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # how the best was declared (migration 0009): {"rule": "measured" | "tie" | "pinned", ...}; NULL: measured
    # before decisions were recorded, or published by a client without intervals
    decision: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class TuningPin(Base):
    """A team's config for a tuning key (admin scope): it beats any measured one until removed."""

    __tablename__ = "tuning_pins"

    tuning_key: Mapped[str] = mapped_column(ForeignKey("tuning_results.tuning_key", ondelete="CASCADE"), primary_key=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    reason: Mapped[str] = mapped_column(String(500), default="")
    pinned_by: Mapped[int | None] = mapped_column(Integer)
    pinned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TuningHistory(Base):
    """Each tune's best for a tuning key, by GPU model and compiler version: the page charts it and lists
    the keys that got slower."""

    __tablename__ = "tuning_history"
    __table_args__ = (Index("ix_tuning_history_tuning_key_recorded_at", "tuning_key", "recorded_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tuning_key: Mapped[str] = mapped_column(ForeignKey("tuning_results.tuning_key", ondelete="CASCADE"))
    gpu_model: Mapped[str | None] = mapped_column(String(200))
    compiler_version: Mapped[str] = mapped_column(String(64))
    best_time_ms: Mapped[float] = mapped_column(Float)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Miss(Base):
    """A specialisation a client launched and found nowhere (it would compile or tune in its process):
    counted per (kernel, what, target, specialisation), with the kernel's text so its build can be queued."""

    __tablename__ = "misses"
    __table_args__ = (Index("ix_misses_last_seen", "last_seen"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    miss_key: Mapped[str] = mapped_column(KEY, unique=True)  # sha256 of (kernel key, what, target, specialisation)
    kernel_key: Mapped[str] = mapped_column(KEY, index=True)
    name: Mapped[str] = mapped_column(String(200))
    what: Mapped[str] = mapped_column(String(8))  # "compile" | "tune"
    target: Mapped[str] = mapped_column(String(32))
    specialisation: Mapped[dict[str, Any]] = mapped_column(JSON)
    kind: Mapped[str] = mapped_column(String(8))  # of `text`: "source" | "bundle"
    text: Mapped[str] = mapped_column(Text)
    launch: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    count: Mapped[int] = mapped_column(Integer, default=1)
    first_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ServerFact(Base):
    """What the server has seen, by name: the compiler version it last ran, the GPU models its workers had."""

    __tablename__ = "server_facts"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)


class Trial(Base):
    """One benchmark of one config for one tuning key; re-runs keep the best time."""

    __tablename__ = "trials"
    __table_args__ = (
        UniqueConstraint("tuning_key", "config_hash"),
        Index("ix_trials_gpu_model_tuning_key", "gpu_model", "tuning_key"),  # the GPU filter (migration 0005)
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tuning_key: Mapped[str] = mapped_column(ForeignKey("tuning_results.tuning_key", ondelete="CASCADE"))
    config_hash: Mapped[str] = mapped_column(KEY)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    time_ms: Mapped[float] = mapped_column(Float)
    artifact_key: Mapped[str | None] = mapped_column(ForeignKey("artifacts.key", ondelete="SET NULL"), index=True)
    gpu_model: Mapped[str | None] = mapped_column(String(200))
    driver_version: Mapped[str | None] = mapped_column(String(100))
    sm_clock_mhz: Mapped[int | None] = mapped_column(Integer)
    mem_clock_mhz: Mapped[int | None] = mapped_column(Integer)
    # "ok": timed to full precision; "stopped": a strategy dropped it after a brief timing (never the best)
    status: Mapped[str] = mapped_column(String(16), default="ok", server_default="ok")
    lo_ms: Mapped[float | None] = mapped_column(Float)  # the median's confidence interval
    hi_ms: Mapped[float | None] = mapped_column(Float)
    reps: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TuneJob(Base):
    """A tune of one tuning key, run by a worker: queued -> running -> done | failed | cancelled.

    `active_key` is the tuning key while the job is queued or running and NULL after: its unique index
    makes a second job for the same key at once attach to the first. `worker` and `heartbeat_at` are the
    lease of the worker running it; `deliveries` counts the times a worker took it up; `sent_at` and `sends`
    the messages that named it."""

    __tablename__ = "tune_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kernel_key: Mapped[str] = mapped_column(ForeignKey("kernels.key", ondelete="CASCADE"), index=True)
    tuning_key: Mapped[str] = mapped_column(KEY, index=True)
    active_key: Mapped[str | None] = mapped_column(KEY, unique=True)
    key_values: Mapped[str] = mapped_column(String(1000))
    dtypes: Mapped[str] = mapped_column(String(1000))
    target: Mapped[str] = mapped_column(String(32), index=True)
    strategy: Mapped[str] = mapped_column(String(16))
    request: Mapped[dict[str, Any]] = mapped_column(JSON)  # signature, constexprs, launch, configs, budget, seed
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    trials: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)  # every config's outcome so far
    trials_done: Mapped[int] = mapped_column(Integer, default=0)
    trials_planned: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(200))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    deliveries: Mapped[int] = mapped_column(Integer, default=0)
    # the broker's side: when the last message naming the job was sent, and how many were (the reaper sends
    # a queued job again when no worker took it in time: its message was lost)
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    sends: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    error: Mapped[str | None] = mapped_column(Text)
    best_config: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    best_time_ms: Mapped[float | None] = mapped_column(Float)
    submitted_by: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Token(Base):
    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(KEY, unique=True)
    scopes: Mapped[list[str]] = mapped_column(JSON)
    description: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

"""The answers of the /v1/ui routes: what the /ui pages show, in the shape they show it. Read models of
the web page only (the client never reads them), so they live with the server rather than in tilec.wire.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from tilec.wire import JobState, TrialStatus, TuneTrialPublic, UtcDatetime


class WhoamiPublic(BaseModel):
    auth: bool  # False: the service asks for no token, and every visitor may do everything
    scopes: list[str]
    token_id: int | None = None


class FacetsPublic(BaseModel):
    """The values the filters offer."""

    targets: list[str]
    gpu_models: list[str]


class PagePublic(BaseModel):
    limit: int
    offset: int
    more: bool  # there is a next page
    hidden: int = 0  # rows of this page that could not be read back, left out


class KernelRowPublic(BaseModel):
    key: str
    name: str
    kind: str
    created_at: UtcDatetime
    submitted_by: int | None = None  # the token id; None when auth was off
    submitter: str | None = None  # that token's description
    artifacts: dict[str, int] = Field(default_factory=dict)  # target -> artifacts built for it


class KernelPagePublic(PagePublic):
    items: list[KernelRowPublic]


class ArtifactRowPublic(BaseModel):
    id: str
    kernel_key: str
    kernel_name: str
    target: str
    emit: str
    compiler_version: str
    size: int
    sha256: str
    created_at: UtcDatetime
    config: dict[str, Any] | None = None
    registers: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    shared_bytes: int | None = None
    threads_per_block: int | None = None


class ArtifactDetailPublic(ArtifactRowPublic):
    spec: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    forms: list[str] = Field(default_factory=list)  # the text forms it holds: ptx, llir, tir


class PassDumpPublic(BaseModel):
    name: str  # "input" (the tile IR from the frontend), a pass, or a backend stage
    ir: str


class PassDumpsPublic(BaseModel):
    artifact_id: str
    passes: list[PassDumpPublic]


class ResultRowPublic(BaseModel):
    tuning_key: str
    kernel_key: str
    kernel_name: str
    key: str
    dtypes: str
    target: str
    best_config: dict[str, Any] | None = None
    best_time_ms: float
    artifact_id: str | None = None
    trials: int
    gpu_models: list[str] = Field(default_factory=list)
    updated_at: UtcDatetime
    decision: dict[str, Any] | None = None  # how the best was declared: measured, tie (and the rule) or pinned


class ResultPagePublic(PagePublic):
    items: list[ResultRowPublic]


class IrFromPublic(BaseModel):
    """The build whose specialisation a kernel's page shows the tile IR of (a source kernel's IR is built per
    specialisation: argument types, constexprs)."""

    artifact_id: str
    target: str
    signature: dict[str, Any] = Field(default_factory=dict)
    # the spec's constexprs and the config's (an autotuned build's)
    constexprs: dict[str, Any] = Field(default_factory=dict)


class KernelDetailPublic(KernelRowPublic):
    source: str | None = None
    # the tile IR as the frontend builds it: the kernel's own (IR input, or source whose constexprs all have
    # defaults and was sent with a signature), else that of the build `ir_from` (None here when that build kept no
    # dumps: GET /v1/ui/artifacts/{id}/passes computes them, and its first is this IR)
    ir: str | None = None
    ir_from: IrFromPublic | None = None
    params: list[dict[str, Any]] = Field(default_factory=list)
    autotune: dict[str, Any] | None = None
    artifact_rows: list[ArtifactRowPublic] = Field(default_factory=list)
    artifacts_more: bool = False
    results: list[ResultRowPublic] = Field(default_factory=list)
    results_more: bool = False


class TrialRowPublic(BaseModel):
    id: int
    config: dict[str, Any] | None = None
    status: str
    time_ms: float
    lo_ms: float | None = None  # the median's confidence interval
    hi_ms: float | None = None
    reps: int | None = None
    best: bool = False  # the config the tuning result holds
    artifact_id: str | None = None
    gpu_model: str | None = None
    driver_version: str | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    created_at: UtcDatetime


class UntimedPublic(BaseModel):
    """A config the newest tune job of the key tried without a full timing: why it has no (or only a
    brief) time."""

    config: dict[str, Any]
    status: TrialStatus
    reason: str | None = None
    time_ms: float | None = None


class ResultDetailPublic(ResultRowPublic):
    trial_rows: list[TrialRowPublic] = Field(default_factory=list)
    job_id: int | None = None  # the newest tune job of this key
    untimed: list[UntimedPublic] = Field(default_factory=list)
    hidden: int = 0  # trials that could not be read back, left out


class JobRowPublic(BaseModel):
    id: int
    state: JobState
    kernel_key: str
    kernel_name: str
    tuning_key: str  # the result a done job wrote (/ui/tuning/{tuning_key})
    key: str
    dtypes: str
    target: str
    strategy: str
    trials_done: int
    trials_planned: int
    worker: str | None = None
    deliveries: int = 0
    error: str | None = None
    best_config: dict[str, Any] | None = None
    best_time_ms: float | None = None
    submitted_by: int | None = None
    created_at: UtcDatetime
    started_at: UtcDatetime | None = None
    finished_at: UtcDatetime | None = None
    # a queued job whose target no live worker serves (it waits until one starts), and when a worker of that
    # target was last seen (None: never, as far as the service knows)
    no_worker: bool = False
    worker_last_seen: UtcDatetime | None = None


class JobPagePublic(PagePublic):
    items: list[JobRowPublic]


class JobDetailPublic(JobRowPublic):
    trials: list[TuneTrialPublic] = Field(default_factory=list)  # every config's outcome so far, in order

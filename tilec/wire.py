"""The wire models of the HTTP API (XCreate = request body, XPublic = response), one definition each,
shared by the server and the client. They depend on pydantic only: neither FastAPI nor the server
package, so the client imports this module alone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

# the refusals of the text and number rules below (server/errors.py re-exports them with the others)
MSG_TEXT_NUL = "text may not hold a NUL character (\\u0000)"
MSG_TEXT_SURROGATE = "text may not hold a lone UTF-16 surrogate (\\ud800-\\udfff): it is not Unicode"
MSG_INT_AS_FLOAT = "an integer out of range is not taken as a float"

# The wire rule, decided here once. Text: any string a client sends (body field, dict key, path or query
# parameter) holding a NUL or a lone UTF-16 surrogate is refused with a 422 naming the field — neither
# has a UTF-8 form that PostgreSQL stores, and a surrogate cannot even be hashed or echoed back.
# Integers: every one is bounded by what it lands in, so the database never sees one it cannot hold.
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1  # an Integer column (32-bit on PostgreSQL)
CONST_INT_MIN, CONST_INT_MAX = -(2**63), 2**64 - 1  # a value in a JSON column: a constexpr is i64 or u64, as Triton


def check_text(value: str) -> str:
    if "\x00" in value:
        raise PydanticCustomError("text_nul", MSG_TEXT_NUL)
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise PydanticCustomError("text_surrogate", MSG_TEXT_SURROGATE) from None
    return value


def _check_texts(value: Any) -> None:
    """Every string in a field's value as sent, dict keys included."""
    if isinstance(value, str):
        check_text(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_texts(key)
            _check_texts(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _check_texts(item)


def _holds_model(annotation: Any) -> bool:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_model(arg) for arg in get_args(annotation))


def _not_an_int(value: Any) -> Any:
    # a float field takes ints; an integer past CONST_INT_* must be refused, not silently rounded to a float
    if isinstance(value, int) and not isinstance(value, bool):
        raise PydanticCustomError("int_as_float", MSG_INT_AS_FLOAT)
    return value


Text = Annotated[str, AfterValidator(check_text)]  # for path and query parameters
DbInt = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
ConstInt = Annotated[int, Field(ge=CONST_INT_MIN, le=CONST_INT_MAX)]
ConstFloat = Annotated[float, BeforeValidator(_not_an_int)]
Scope = Literal["read", "submit", "admin"]
Emit = Literal["cubin", "object", "llir", "ptx", "tir"]
ArtifactForm = Literal["cubin", "object", "ptx", "llir", "tir"]
ConstValue = ConstInt | ConstFloat | bool | str
Name = Field(min_length=1, max_length=200)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]  # SQLite hands back the stored UTC times naive


class _Model(BaseModel):
    """The base of every request body: unknown fields, NaN and infinities are refused, and so is any
    string that breaks the text rule above, in any field at any depth (a nested model checks its own)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    _holds_models: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._holds_models = frozenset(name for name, f in cls.model_fields.items() if _holds_model(f.annotation))

    @field_validator("*", mode="before")  # before: pydantic's own checks would refuse a surrogate less clearly
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name not in cls._holds_models:
            _check_texts(value)
        return value


class ErrorPublic(BaseModel):
    error: str
    detail: str
    model_config = ConfigDict(extra="allow")


class KernelCreate(_Model):
    """Triton-language source or tile IR; `name` picks the kernel when the text holds several."""

    source: str | None = None
    ir: str | None = None
    bundle: dict[str, Any] | None = None  # a kernel bundle: modules by name, the kernel, pinned host data
    name: str | None = Field(default=None, min_length=1, max_length=200)
    signature: dict[str, str] | None = None  # with source: builds the IR when every constexpr has a default


class KernelParamPublic(BaseModel):
    name: str
    constexpr: bool = False
    has_default: bool = False
    default: Any = None
    annotation: str | None = None


class ConfigSpec(_Model):
    kwargs: dict[str, ConstValue] = Field(default_factory=dict)
    num_warps: int | None = Field(default=None, ge=1, le=64)
    num_stages: int | None = Field(default=None, ge=1, le=16)


class AutotunePublic(BaseModel):
    configs: list[ConfigSpec] = Field(default_factory=list)
    key: list[str] = Field(default_factory=list)
    reset_to_zero: list[str] = Field(default_factory=list)
    restore_value: list[str] = Field(default_factory=list)


class KernelPublic(BaseModel):
    key: str
    name: str
    kind: Literal["source", "ir", "bundle"]
    params: list[KernelParamPublic] = Field(default_factory=list)
    autotune: AutotunePublic | None = None
    heuristics: dict[str, str] = Field(default_factory=dict)
    ir: str | None = None  # the tile IR, when it could be built (IR input, or source with defaults + signature)
    created: bool = False


class CompileCreate(_Model):
    kernel_key: str | None = Field(default=None, min_length=1, max_length=128)
    source: str | None = None
    ir: str | None = None
    bundle: dict[str, Any] | None = None  # a kernel bundle (see KernelCreate)
    name: str | None = Field(default=None, min_length=1, max_length=200)
    signature: dict[str, str] = Field(default_factory=dict)
    constexprs: dict[str, ConstValue] = Field(default_factory=dict)
    hints: dict[str, dict[str, ConstInt | bool]] = Field(default_factory=dict)
    config: ConfigSpec = Field(default_factory=ConfigSpec)
    target: str = Field(default="cpu", max_length=32)
    emit: Emit | None = None  # None: the target's binary (cubin for cuda, object for cpu)


class ArtifactPublic(BaseModel):
    id: str  # the artifact key
    kernel_key: str
    kernel_name: str
    target: str
    emit: str
    compiler_version: str
    sha256: str
    size: int
    metadata: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    links: dict[str, str] = Field(default_factory=dict)  # form -> URL path
    cached: bool = False


# A published time outside these is not a measurement (no launch completes in under 0.1 us, below the
# timer's resolution; a trial stops long before an hour), and a time that low would stay the best forever.
MIN_TRIAL_MS = 1e-4
MAX_TRIAL_MS = 3.6e6


class TrialCreate(_Model):
    config: ConfigSpec
    time_ms: float = Field(ge=MIN_TRIAL_MS, le=MAX_TRIAL_MS, allow_inf_nan=False)
    artifact_id: str | None = Field(default=None, max_length=128)
    gpu_model: str | None = Field(default=None, max_length=200)
    driver_version: str | None = Field(default=None, max_length=100)
    sm_clock_mhz: DbInt | None = Field(default=None, ge=0)
    mem_clock_mhz: DbInt | None = Field(default=None, ge=0)


class TuningResultCreate(_Model):
    kernel_key: str = Field(min_length=1, max_length=128)
    key: str = Field(default="", max_length=1000)  # the autotune key values (or a shape bucket), as a string
    dtypes: str = Field(default="", max_length=1000)
    target: str = Field(max_length=32)
    trials: list[TrialCreate] = Field(min_length=1)


class TrialPublic(BaseModel):
    config: dict[str, Any]
    time_ms: float
    artifact_id: str | None = None
    gpu_model: str | None = None
    driver_version: str | None = None


class LookupPublic(BaseModel):
    tuning_key: str
    kernel_key: str
    key: str
    dtypes: str
    target: str
    config: dict[str, Any]
    time_ms: float
    artifact: ArtifactPublic | None = None
    trials: int = 0
    # "pinned": a team's pinned config (it beats any measured one); "measured": the fastest trial, separated
    # from the runner-up's interval; "tie": intervals overlap and the stable rule chose (decision says how)
    source: Literal["measured", "tie", "pinned"] = "measured"
    decision: dict[str, Any] | None = None


class TuningResultPublic(LookupPublic):
    recorded: int = 0


class TokenCreate(_Model):
    scopes: list[Scope] = Field(min_length=1)
    description: str = Field(default="", max_length=200)


class TokenPublic(BaseModel):
    id: int
    scopes: list[str]
    description: str = ""
    created_at: UtcDatetime
    revoked_at: UtcDatetime | None = None
    token: str | None = None  # shown once, at creation


class HealthPublic(BaseModel):
    status: str  # "ok", or "degraded" when the database or the broker is unavailable
    database: str  # "ok" | "unavailable"
    compiler_version: str
    broker: str | None = None  # "ok" | "unavailable"; None when jobs run in-process (no broker)


# tune jobs

Strategy = Literal["exhaustive", "random", "halving"]
JobState = Literal["queued", "running", "done", "failed", "cancelled"]
TrialStatus = Literal["ok", "stopped", "cached", "pruned", "failed"]


class ConfigGrid(_Model):
    """A config space as a grid: every combination of the listed values."""

    kwargs: dict[str, list[ConstValue]] = Field(default_factory=dict)
    num_warps: list[Annotated[int, Field(ge=1, le=64)]] = Field(default_factory=lambda: [4], min_length=1)
    num_stages: list[Annotated[int, Field(ge=1, le=16)]] = Field(default_factory=lambda: [3], min_length=1)


class TuneJobCreate(_Model):
    """A tune: the kernel (by key, or its source or IR), how to launch it (the launch description: a
    worker has none of the caller's arguments), the target, and the config space (the kernel's
    @triton.autotune configs unless `configs` or `config_grid` is given)."""

    kernel_key: str | None = Field(default=None, min_length=1, max_length=128)
    source: str | None = None
    ir: str | None = None
    bundle: dict[str, Any] | None = None  # a kernel bundle (see KernelCreate)
    name: str | None = Field(default=None, min_length=1, max_length=200)
    signature: dict[str, str] = Field(default_factory=dict)
    constexprs: dict[str, ConstValue] = Field(default_factory=dict)
    launch: dict[str, Any]  # a LaunchDescription (compiler/tune/launch.py), validated by the service
    target: str = Field(default="cpu", max_length=32)
    strategy: Strategy = "halving"
    budget: int | None = Field(default=None, ge=1, le=4096)  # configs to benchmark (random); None: all
    configs: list[ConfigSpec] | None = None
    config_grid: ConfigGrid | None = None
    seed: DbInt = 0
    cuda_graph: bool = False  # time each config through CUDA graph replays of its launch


class TuneTrialPublic(BaseModel):
    config: dict[str, Any]
    status: TrialStatus
    reason: str | None = None
    time_ms: float | None = None
    lo_ms: float | None = None
    hi_ms: float | None = None
    reps: int | None = None
    artifact_id: str | None = None
    gpu_model: str | None = None


class TuneJobPublic(BaseModel):
    id: int
    state: JobState
    kernel_key: str
    tuning_key: str
    key: str
    dtypes: str
    target: str
    strategy: Strategy
    trials_done: int = 0
    trials_planned: int = 0
    worker: str | None = None
    deliveries: int = 0
    error: str | None = None
    best_config: dict[str, Any] | None = None
    best_time_ms: float | None = None
    created_at: UtcDatetime
    started_at: UtcDatetime | None = None
    finished_at: UtcDatetime | None = None
    attached: bool = False  # this request joined a job already queued or running for the same tuning key
    warning: str | None = None  # at submit: why the job may wait (no live worker serves its target)
    trials: list[TuneTrialPublic] = Field(default_factory=list)


# signed manifests: what the client checks before a binary reaches the loader

MANIFEST_FORMAT = "tilec-manifest/1"


def canonical_json(value: Any) -> bytes:
    """The bytes a manifest's signature covers: sorted keys, no spaces, UTF-8, no NaN."""
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


class ManifestBody(BaseModel):
    """One artifact as the server vouches for it; signed as canonical_json(model_dump(mode="json"))."""

    format: Literal["tilec-manifest/1"] = MANIFEST_FORMAT
    artifact_id: str
    kernel_key: str
    kernel_name: str
    tuning_key: str | None = None  # the tuning key it is the best config of, when asked for one
    config: dict[str, Any]
    spec: dict[str, Any]  # signature, constexprs, hints, emit
    metadata: dict[str, Any]  # launch metadata
    target: str
    compiler_version: str
    sha256: str  # of the binary
    size: int


class ManifestPublic(BaseModel):
    manifest: ManifestBody
    key_id: str | None = None  # sha256 of the raw Ed25519 public key, first 16 hex digits
    signature: str | None = None  # base64 of the Ed25519 signature over canonical_json(manifest)


class KeyPublic(BaseModel):
    key_id: str
    algorithm: Literal["ed25519"] = "ed25519"
    public_key: str  # base64 of the 32 raw bytes


# zero compiles in production (issue 27): misses, pins, the inventory and retunes

MissWhat = Literal["compile", "tune"]


class MissCreate(_Model):
    """A launch that found its build (or tuned config) nowhere and would compile or tune in its process.
    The kernel comes as its source or bundle (kept with the miss, so the page can queue its build)."""

    source: str | None = None
    bundle: dict[str, Any] | None = None
    name: str = Field(min_length=1, max_length=200)
    kernel_key: str = Field(min_length=1, max_length=128)
    what: MissWhat
    target: str = Field(max_length=32)
    specialisation: dict[str, Any]  # signature, constexprs, hints, config; a tune's tuning key parts
    launch: dict[str, Any] | None = None  # a LaunchDescription for a tune, when the client could write one


class MissPublic(BaseModel):
    id: int
    kernel_key: str
    name: str
    what: str
    target: str
    specialisation: dict[str, Any]
    tunable: bool  # a tune miss with a launch description, or a compile miss: the page can queue it
    count: int
    first_seen: UtcDatetime
    last_seen: UtcDatetime


class MissQueuedPublic(BaseModel):
    miss: MissPublic
    artifact: ArtifactPublic | None = None  # a compile miss: the build, made now
    job: TuneJobPublic | None = None  # a tune miss: the job queued (or joined)


class PinCreate(_Model):
    config: ConfigSpec
    reason: str = Field(default="", max_length=500)


class PinPublic(BaseModel):
    tuning_key: str
    config: dict[str, Any]
    reason: str
    pinned_by: int | None = None
    pinned_at: UtcDatetime


class RetuneCreate(_Model):
    """Queue tune jobs for every tuning key the server holds for `target`, narrowed by GPU model (keys with a
    trial on it), kernel (key or name) and compiler version (keys whose best build that version made)."""

    target: str = Field(max_length=32)
    gpu_model: str | None = Field(default=None, min_length=1, max_length=200)
    kernel: str | None = Field(default=None, min_length=1, max_length=200)
    since_compiler_version: str | None = Field(default=None, min_length=4, max_length=64)
    tuning_key: str | None = Field(default=None, min_length=1, max_length=64)  # re-time one decision


class RetuneItemPublic(BaseModel):
    tuning_key: str
    kernel_key: str
    key: str
    dtypes: str
    job_id: int | None = None  # None: skipped (why says why)
    why: str | None = None


class RetunePublic(BaseModel):
    queued: list[RetuneItemPublic] = Field(default_factory=list)
    skipped: list[RetuneItemPublic] = Field(default_factory=list)


class HistoryPointPublic(BaseModel):
    gpu_model: str | None
    compiler_version: str
    best_time_ms: float
    config: dict[str, Any]
    recorded_at: UtcDatetime


class SlowerKeyPublic(BaseModel):
    tuning_key: str
    kernel_key: str
    key: str
    dtypes: str
    target: str
    gpu_model: str | None
    before_ms: float
    after_ms: float
    before_version: str
    after_version: str

"""The wire models of the HTTP API (XCreate = request body, XPublic = response), one definition each.

They depend on pydantic only, so the client (client/_models.py re-exports them) can use them without
the server's runtime: `server/__init__.py` imports nothing, and FastAPI/SQLAlchemy stay unimported.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

Scope = Literal["read", "submit", "admin"]
Emit = Literal["cubin", "object", "llir", "ptx", "tir"]
ArtifactForm = Literal["cubin", "object", "ptx", "llir", "tir"]
ConstValue = int | float | bool | str
Name = Field(min_length=1, max_length=200)


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


UtcDatetime = Annotated[datetime, AfterValidator(_utc)]  # SQLite hands back the stored UTC times naive


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorPublic(BaseModel):
    error: str
    detail: str
    model_config = ConfigDict(extra="allow")


class KernelCreate(_Model):
    """Triton-language source or tile IR; `name` picks the kernel when the text holds several."""

    source: str | None = None
    ir: str | None = None
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
    kind: Literal["source", "ir"]
    params: list[KernelParamPublic] = Field(default_factory=list)
    autotune: AutotunePublic | None = None
    heuristics: dict[str, str] = Field(default_factory=dict)
    ir: str | None = None  # the tile IR, when it could be built (IR input, or source with defaults + signature)
    created: bool = False


class CompileCreate(_Model):
    kernel_key: str | None = Field(default=None, min_length=1, max_length=128)
    source: str | None = None
    ir: str | None = None
    name: str | None = Field(default=None, min_length=1, max_length=200)
    signature: dict[str, str] = Field(default_factory=dict)
    constexprs: dict[str, ConstValue] = Field(default_factory=dict)
    hints: dict[str, dict[str, int | bool]] = Field(default_factory=dict)
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


class TrialCreate(_Model):
    config: ConfigSpec
    time_ms: float = Field(gt=0, allow_inf_nan=False)
    artifact_id: str | None = Field(default=None, max_length=128)
    gpu_model: str | None = Field(default=None, max_length=200)
    driver_version: str | None = Field(default=None, max_length=100)
    sm_clock_mhz: int | None = Field(default=None, ge=0)
    mem_clock_mhz: int | None = Field(default=None, ge=0)


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
    status: str
    database: str
    compiler_version: str

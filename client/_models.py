"""The wire models shared with the server. They are defined once, in tilec/wire.py, which imports
pydantic only (so this pulls in neither FastAPI nor SQLAlchemy); the client re-exports them from here.
"""

from tilec.wire import (
    ArtifactPublic,
    CompileCreate,
    ConfigSpec,
    ErrorPublic,
    HealthPublic,
    KernelCreate,
    KernelPublic,
    LookupPublic,
    MissCreate,
    TokenCreate,
    TokenPublic,
    TrialCreate,
    TrialPublic,
    TuningResultCreate,
    TuningResultPublic,
)

__all__ = [
    "ArtifactPublic",
    "CompileCreate",
    "ConfigSpec",
    "ErrorPublic",
    "HealthPublic",
    "KernelCreate",
    "KernelPublic",
    "LookupPublic",
    "MissCreate",
    "TokenCreate",
    "TokenPublic",
    "TrialCreate",
    "TrialPublic",
    "TuningResultCreate",
    "TuningResultPublic",
]

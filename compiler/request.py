"""One compile, whole: the request that crosses the process boundary from the service and the tuner
to a compile worker. It carries the frontend's budgets, so a limit set in the service's settings
applies in the child that reads the source, and the source is read once per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .artifact import CompileOptions
from .frontend.reader import Budgets


@dataclass(frozen=True)
class CompileRequest:
    """Source (Triton-language Python) or tile IR text, and everything that selects one binary.

    `emit` names the last stage to run (None: the target's last, the binary); `budgets` bounds what
    reading the source may cost. Picklable and built from plain data (`from_dict`), so it can travel
    to a child process or over a queue.
    """

    text: str
    kind: Literal["source", "ir", "bundle"] = "source"  # bundle: `text` is a kernel bundle as JSON
    name: str | None = None
    signature: dict[str, str] = field(default_factory=dict)
    constexprs: dict[str, Any] = field(default_factory=dict)
    hints: dict[str, dict] = field(default_factory=dict)
    options: CompileOptions = field(default_factory=CompileOptions)
    emit: str | None = None
    budgets: Budgets = field(default_factory=Budgets)
    pass_dumps: bool = False  # keep the tile IR after each pass (and cuda's gpu-tir stage) in the Artifact

    def __post_init__(self) -> None:
        if self.kind not in ("source", "ir", "bundle"):
            raise ValueError(f"a compile request's kind is 'source', 'ir' or 'bundle', not {self.kind!r}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompileRequest:
        data = dict(data)
        options = data.pop("options", None) or {}
        budgets = data.pop("budgets", None) or {}
        return cls(
            **data,
            options=options if isinstance(options, CompileOptions) else CompileOptions(**options),
            budgets=budgets if isinstance(budgets, Budgets) else Budgets(**budgets),
        )

"""The backends, one subpackage per target kind (`cpu`, `cuda`): each owns its machine-dependent passes
(`PASSES`), its lowering and its stage list (`stages()`, beginning with the shared `tir` stage).

A backend is imported on its first use, so `import tilec.compiler.pipeline` loads no lowering code.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

Stage = Callable[[Any, dict], Any]

KINDS = ("cpu", "cuda")  # target kind -> the subpackage of the same name
STAGES: dict[str, list[tuple[str, Stage]]] = {}  # filled on first use; register_target overrides


def backend(kind: str) -> ModuleType | None:
    """The backend package of a target kind, imported now; None for a kind no backend serves."""
    if kind not in KINDS:
        return None
    return importlib.import_module(f"{__name__}.{kind}")


def stages(kind: str) -> list[tuple[str, Stage]] | None:
    """The ordered (name, stage) list of a target kind; None when no backend serves it."""
    got = STAGES.get(kind)
    if got is None:
        pkg = backend(kind)
        if pkg is None:
            return None
        got = STAGES[kind] = pkg.stages()
    return got


def register_target(kind: str, stage_list: list[tuple[str, Stage]]) -> None:
    """Install the stage list of a target kind (a bench wraps the stages to time them); "tir" comes first."""
    if not stage_list or stage_list[0][0] != "tir":
        raise ValueError("a target's stages start with 'tir'")
    STAGES[kind] = stage_list


def backend_passes() -> dict[str, type]:
    """The machine-dependent passes of every backend, by name (tilec-opt adds them to its registry)."""
    out: dict[str, type] = {}
    for kind in KINDS:
        out.update(backend(kind).PASSES)  # type: ignore[union-attr]
    return out

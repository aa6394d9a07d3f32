"""Imported once by the compile forkserver, so each forked compile child starts warm.

A part of the compiler that is missing or broken is skipped here; the child reports it per task.
"""

import importlib

_MODULES = (
    "tilec.server.worker",
    "tilec.compiler.frontend",
    "tilec.compiler.passes",
    "tilec.compiler.pipeline",
    "tilec.compiler.backends.cpu.target",
    "tilec.compiler.backends.cuda.target",
    "tilec.compiler.backends.cuda.lower",
    "cuda.bindings.nvjitlink",
)
for _name in _MODULES:
    try:
        importlib.import_module(_name)
    except Exception:  # noqa: BLE001, S112 - a missing piece only costs a slower first compile
        continue

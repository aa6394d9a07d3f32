"""The `tir` stage every target starts with: the machine-independent pass pipeline, then verify and print.

The pipeline and every backend import it from here (a backend's stage list begins with `tir_stage`).
"""

from __future__ import annotations

from .ir import Module, print_module, verify_module
from .passes import PassManager, pipeline


def run_passes(module: Module) -> Module:
    """The machine-independent pipeline ("default")."""
    return PassManager.from_names(pipeline("default")).run(module)


def tir_stage(module: Module, meta: dict) -> Module:
    """Run the default pipeline on `module` in place, verify it and keep its text in meta["tir"]."""
    module = run_passes(module)
    verify_module(module)
    meta["tir"] = print_module(module)
    return module

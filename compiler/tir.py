"""The `tir` stage every target starts with: the machine-independent pass pipeline, then verify and print.

The pipeline and every backend import it from here (a backend's stage list begins with `tir_stage`).
"""

from __future__ import annotations

from .ir import Module, print_module, verify_module
from .passes import PassManager, pipeline

MAX_PASS_DUMPS_CHARS = 8 << 20


def run_passes(module: Module) -> Module:
    """The machine-independent pipeline ("default")."""
    return PassManager.from_names(pipeline("default")).run(module)


def tir_stage(module: Module, meta: dict) -> Module:
    """Run the default pipeline on `module` in place, verify it and keep its text in meta["tir"]; with
    meta["keep_pass_dumps"], also the module's text as it came in and after each pass, in meta["pass_dumps"]
    as [{"name", "ir"}] (the service keeps them with the build, for its web page)."""
    if not meta.get("keep_pass_dumps"):
        module = run_passes(module)
    else:
        dumps = [{"name": "input", "ir": print_module(module)}]
        keep = lambda name, m: dumps.append({"name": name, "ir": print_module(m)})  # noqa: E731
        module = PassManager.from_names(pipeline("default"), after_pass=keep).run(module)
        # a very long kernel's dumps are not kept (its page recomputes them on demand)
        meta["pass_dumps"] = dumps if sum(len(d["ir"]) for d in dumps) <= MAX_PASS_DUMPS_CHARS else None
    verify_module(module)
    meta["tir"] = print_module(module)
    return module

"""The pass manager: runs named passes in order, verifying the module after each one, with optional
per-pass timing and IR dumps. Pass specs are `name` or `name{option=value,...}`; pipeline names
(`default`) expand to their passes. A registry (name -> class) other than PASSES may be given: tilec-opt
adds the backends' passes to it.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any, TextIO

from ..errors import CompileError, VerifyError
from ..ir.core import Module
from ..ir.printer import print_module
from ..ir.verifier import verify_module
from .registry import PASSES, PIPELINES, pipeline


class PassManager:
    def __init__(self, passes: list, *, print_ir_after_all: bool = False, print_ir_after: Iterable[str] = (),
                 timing: bool = False, verify: bool = True, stream: TextIO | None = None,
                 after_pass: Callable[[str, Module], None] | None = None) -> None:
        self.passes = list(passes)
        self.after_pass = after_pass  # called with each pass's name and the module it left (a compile's dumps)
        self.print_ir_after_all = print_ir_after_all
        self.print_ir_after = set(print_ir_after)
        self.timing = timing
        self.verify = verify
        self.stream = stream
        self.timings: list[tuple[str, float]] = []

    @classmethod
    def from_names(cls, names: Iterable[str], *, registry: dict[str, type] | None = None, **kwargs: Any) -> PassManager:
        registry = PASSES if registry is None else registry
        return cls([make_pass(spec, registry) for n in names for spec in _expand(n, registry)], **kwargs)

    def run(self, module: Module) -> Module:
        """Run every pass on `module` in place; a pass that leaves invalid IR raises naming the pass."""
        out = self.stream or sys.stderr
        for p in self.passes:
            start = time.perf_counter()
            p.apply(module)
            self.timings.append((p.name, time.perf_counter() - start))
            if self.verify:
                _verify_after(p.name, module)
            if self.print_ir_after_all or p.name in self.print_ir_after:
                out.write(f"// -----// IR after {p.name} //----- //\n{print_module(module)}")
            if self.after_pass is not None:
                self.after_pass(p.name, module)
        if self.timing:
            out.write(self.timing_report())
        return module

    def timing_report(self) -> str:
        total = sum(t for _, t in self.timings) or 1e-12
        lines = ["// pass timing (wall)", f"//   {'seconds':>10}  {'%':>6}  pass"]
        for name, t in self.timings:
            lines.append(f"//   {t:10.6f}  {100 * t / total:6.1f}  {name}")
        lines.append(f"//   {total:10.6f}  {100.0:6.1f}  total")
        return "\n".join(lines) + "\n"


def _expand(name: str, registry: dict[str, type]) -> list[str]:
    bare = name.split("{", 1)[0].strip()
    if bare in PIPELINES and bare not in registry:
        return pipeline(bare)
    return [name.strip()]


def _verify_after(name: str, module: Module) -> None:
    try:
        verify_module(module)
    except VerifyError as e:
        raise VerifyError(f"IR after pass '{name}' does not verify: {e.message}", filename=e.filename,
                          line=e.line, col=e.col, source_line=e.source_line) from e


def make_pass(spec: str, registry: dict[str, type] | None = None):
    """A pass from `name` or `name{key=value,...}` in `registry` (PASSES when None); values are converted
    to the option's field type."""
    registry = PASSES if registry is None else registry
    name, opts = _split_spec(spec)
    cls = registry.get(name)
    if cls is None:
        known = ", ".join(sorted([*registry, *PIPELINES]))
        raise CompileError(f"unknown pass '{name}' (known: {known})", filename="<passes>")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, text in opts.items():
        f = fields.get(key)
        if f is None:
            raise CompileError(f"pass '{name}' has no option '{key}'", filename="<passes>")
        kwargs[key] = _convert(name, key, text, f.type)
    return cls(**kwargs)


def _split_spec(spec: str) -> tuple[str, dict[str, str]]:
    spec = spec.strip()
    if "{" not in spec:
        return spec, {}
    if not spec.endswith("}"):
        raise CompileError(f"bad pass spec '{spec}': options go in {{key=value,...}}", filename="<passes>")
    name, body = spec[:-1].split("{", 1)
    opts: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in body.split(","))):
        if "=" not in item:
            raise CompileError(f"bad pass option '{item}' in '{spec}': expected key=value", filename="<passes>")
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    return name.strip(), opts


def _convert(name: str, key: str, text: str, ftype: Any) -> Any:
    t = ftype if isinstance(ftype, str) else getattr(ftype, "__name__", str(ftype))
    try:
        if t == "bool":
            if text not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text in ("true", "1")
        if t == "int":
            return int(text)
        if t == "float":
            return float(text)
        return text
    except ValueError:
        raise CompileError(f"option '{key}' of pass '{name}' needs a {t}, got '{text}'", filename="<passes>") from None


def split_pass_list(text: str) -> list[str]:
    """Split `a,b{x=1,y=2},c` at the commas outside braces."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [s.strip() for s in out if s.strip()]

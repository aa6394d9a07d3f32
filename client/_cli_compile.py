"""`tilec compile` (a Triton-language kernel file -> tile IR, LLVM IR, PTX or a binary) and `tilec ir`
(passes over textual tile IR). Errors print the located CompileError and exit 1, without a traceback; so
does an internal compiler error, as one line (TILEC_DEBUG_FRONTEND=1 lets its traceback through).

Argument syntax of `tilec compile`:
  --signature 'x_ptr=*fp32,y_ptr=*fp32,n=i32'
      the type of every runtime parameter, in Triton's spelling (*fp32 *fp16
      *bf16 *i32 *i64 *u8 i1 i32 i64 u32 fp16 fp32 fp64) or the IR's (ptr<f32>)
  --dtype x_ptr=*fp16   (repeatable)
      one parameter at a time (adds to or overrides --signature)
  --constexpr BLOCK=1024   (repeatable)
      a tl.constexpr value: int, float, True/False/None or text
  --config 'BM=128,BN=128,num_warps=4'
      an autotune config: constexprs plus num_warps/num_stages; without it an
      @triton.autotune kernel uses its first config
  --target cpu|cuda:sm_XX   --emit tir|llir|ptx|cubin|object
  -o OUT   (default stdout; binaries need -o)
"""

from __future__ import annotations

import inspect
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tilec.compiler.errors import CompileError, ToolError

EMITS = ("tir", "llir", "ptx", "cubin", "object")


# The syntax blocks of the help texts (here, in _cli_pull.py) keep their lines under 77 columns: rich
# wraps a longer line at the terminal's width (80 when not a terminal) into nonsense.
def help_text(*docs: str) -> str:
    """A command's help from docstrings, as rich prints it (it keeps every line break and wraps long lines
    at the terminal's width): each prose paragraph becomes one line for rich to wrap; a paragraph whose
    later lines are indented (a syntax block) keeps its lines."""
    paragraphs: list[str] = []
    for doc in docs:
        for para in inspect.cleandoc(doc).split("\n\n"):
            lines = para.strip("\n").splitlines()
            literal = any(line[:1].isspace() for line in lines[1:])
            paragraphs.append("\n".join(lines) if literal else " ".join(line.strip() for line in lines))
    return "\n\n".join(p for p in paragraphs if p)


def _fail(msg: str) -> typer.Exit:
    typer.echo(msg, err=True)
    return typer.Exit(1)


def _value(text: str) -> Any:
    t = text.strip()
    if t in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[t]
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    return t


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """'a=1,b=2' -> {'a': '1', 'b': '2'}."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, val = item.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise CompileError(f"{what}: expected NAME=VALUE, got {item!r}")
        out[key.strip()] = val.strip()
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise CompileError(f"cannot read {path}: {exc.strerror}", filename=str(path)) from None


def _specialisation(ks, signature: str | None, dtype: list[str], constexpr: list[str], config: str | None):
    sig = parse_pairs(signature or "", "--signature")
    for d in dtype:
        sig.update(parse_pairs(d, "--dtype"))
    consts: dict[str, Any] = {}
    for c in constexpr:
        consts.update({k: _value(v) for k, v in parse_pairs(c, "--constexpr").items()})
    options: dict[str, int] = {}
    cfg: dict[str, Any] = {}
    if config:
        cfg = {k: _value(v) for k, v in parse_pairs(config, "--config").items()}
    elif ks.autotune is not None and ks.autotune.configs and not set(ks.autotune.configs[0].kwargs) & set(consts):
        first = ks.autotune.configs[0]
        cfg = {**first.kwargs, "num_warps": first.num_warps, "num_stages": first.num_stages}
        typer.echo(f"note: no --config given, using the first autotune config {first.kwargs}", err=True)
    for k in ("num_warps", "num_stages"):
        v = cfg.pop(k, None)
        if v is not None:
            if not isinstance(v, int) or v <= 0:
                raise CompileError(f"--config: {k} must be a positive integer")
            options[k] = v
    return sig, {**cfg, **consts}, options


def compile_cmd(
    file: Annotated[Path, typer.Argument(help="a Triton-language .py file (read, never executed)")],
    kernel: Annotated[str | None, typer.Option("--kernel", "-k", help="kernel name (default: the only one)")] = None,
    signature: Annotated[str | None, typer.Option(help="'x_ptr=*fp32,n=i32,...': types of the runtime params")] = None,
    dtype: Annotated[list[str] | None, typer.Option(help="one param's type, e.g. x_ptr=*fp16 (repeatable)")] = None,
    constexpr: Annotated[list[str] | None, typer.Option(help="a constexpr value, e.g. BLOCK=1024 (repeatable)")] = None,
    config: Annotated[str | None, typer.Option(help="'BM=128,BN=128,num_warps=4': an autotune config")] = None,
    target: Annotated[str, typer.Option(help="cpu or cuda:sm_XX")] = "cpu",
    emit: Annotated[str, typer.Option(help="tir, llir, ptx, cubin (cuda) or object (cpu)")] = "tir",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="output file (default stdout)")] = None,
) -> None:
    """Compile one kernel of FILE for one specialisation and print (or write) the chosen stage."""
    from tilec.compiler.artifact import parse_target

    try:
        parse_target(target)  # before any work: tir does not depend on it, yet a typo is no target
    except ValueError as exc:
        raise _fail(f"tilec: --target: {exc}") from None
    try:
        out = _compile(file, kernel, signature, dtype or [], constexpr or [], config, target, emit)
    except (CompileError, ToolError) as exc:
        raise _fail(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a compiler bug is reported in one line, not as a traceback
        raise _fail(internal_error(file, exc)) from None
    _write(out, output)


def internal_error(file: Path, exc: Exception) -> str:
    """One line for an exception the compiler did not turn into a CompileError (a compiler bug)."""
    if os.environ.get("TILEC_DEBUG_FRONTEND") == "1":
        raise exc
    if isinstance(exc, RecursionError):
        return f"{file}: error: the kernel nests too deeply to compile (out of recursion depth)"
    if isinstance(exc, MemoryError):
        return f"{file}: error: compiling this kernel ran out of memory"
    detail = " ".join(str(exc).split())[:200]
    what = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
    return f"{file}: internal compiler error ({what}); please report it"


def _compile(file: Path, kernel, signature, dtype, constexpr, config, target, emit) -> str | bytes:
    from tilec.compiler.frontend import build_ir, read_kernel

    if emit not in EMITS:
        raise CompileError(f"--emit must be one of {', '.join(EMITS)}, got {emit!r}")
    source = _read(file)
    ks = read_kernel(source, kernel, filename=str(file))
    sig, consts, options = _specialisation(ks, signature, dtype, constexpr, config)
    if emit == "tir":
        module = build_ir(ks, sig, consts)
        return _run_default_pipeline(module)
    try:
        from tilec.compiler.artifact import CompileOptions
        from tilec.compiler.pipeline import compile_kernel
    except ImportError:
        raise CompileError(f"emit {emit} arrives with the {target.split(':')[0]} backend") from None
    art = compile_kernel(source, ks.name, signature=sig, constexprs=consts,
                         options=CompileOptions(target=target, **options), emit=emit)
    return {"llir": art.llir, "ptx": art.ptx}.get(emit, art.binary)


def _run_default_pipeline(module) -> str:
    from tilec.compiler.ir import print_module

    try:
        from tilec.compiler.passes import PassManager, pipeline
    except ImportError:
        return print_module(module)
    PassManager.from_names(pipeline("default")).run(module)
    return print_module(module)


def _write(out: str | bytes, output: Path | None) -> None:
    if output is not None:
        try:
            if isinstance(out, bytes):
                output.write_bytes(out)
            else:
                output.write_text(out)
        except OSError as exc:
            raise _fail(f"tilec: cannot write {output}: {exc.strerror or exc}") from None
        return
    if isinstance(out, bytes):
        raise _fail("binary output needs -o FILE")
    sys.stdout.write(out if out.endswith("\n") else out + "\n")


def ir_cmd(
    file: Annotated[Path, typer.Argument(help="a textual tile IR file (.tir), or - for stdin")],
    passes: Annotated[str, typer.Option(help="comma-separated pass names, e.g. canonicalize,cse,dce")] = "",
    print_ir_after_all: Annotated[bool, typer.Option(help="print the IR after every pass (to stderr)")] = False,
) -> None:
    """Parse and verify tile IR, run passes on it, print the result."""
    from tilec.compiler.ir import parse_module, print_module, verify_module

    try:
        text = sys.stdin.read() if str(file) == "-" else _read(file)
        module = parse_module(text)
        verify_module(module)
        names = [p.strip() for p in passes.split(",") if p.strip()]
        if names:
            from tilec.compiler.passes import PassManager

            PassManager.from_names(names, print_ir_after_all=print_ir_after_all).run(module)
    except CompileError as exc:
        raise _fail(str(exc)) from None
    except (KeyError, ValueError) as exc:  # an unknown pass name or bad pass option
        raise _fail(f"error: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a compiler bug is reported in one line, not as a traceback
        raise _fail(internal_error(file, exc)) from None
    sys.stdout.write(print_module(module))


def register(app: typer.Typer) -> None:
    app.command("compile", help=help_text(compile_cmd.__doc__, __doc__.split("\n\n", 1)[1]))(compile_cmd)
    app.command("ir", help=help_text(ir_cmd.__doc__))(ir_cmd)

"""`tilec pull`: the builds a CI job needs, from the service into a directory that load_index launches from
with no server. Every signed manifest and binary is verified before it is written. Exit 0 when every
kernel was pulled, 1 when the server lacks some (listed with why), refused one, or failed, 2 for bad input.

MANIFEST is a record (TILEC_RECORD=FILE, or `tilec manifest merge`: JSON, kernels inline) or a TOML
file, one [[kernel]] table per build, paths relative to it:
  [[kernel]]
  file = "kernels/add.py"
  name = "add_kernel"
  signature = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"
  launch = "add.launch.toml"     a tuned build: its tuning key is looked up
  constexpr = { BLOCK = 1024 }   constexprs (a plain build without launch)
  hints = { x_ptr = { divisibility = 16 } }   optional, plain builds
  num_warps = 4                               optional, plain builds
  num_stages = 3                              optional, plain builds
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from tilec.compiler.errors import CompileError, ToolError


def _exit(code: int, message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def pull_cmd(
    manifest: Annotated[Path, typer.Option("--manifest", "-m", help="the kernel manifest (TOML)")],
    target: Annotated[str, typer.Option(help="cpu or cuda:sm_XX")],
    output: Annotated[Path, typer.Option("--output", "-o", help="the directory to write")],
    server: Annotated[
        str | None, typer.Option(envvar="TILEC_URL", help="the service's URL (default TILEC_URL)")
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="TILEC_TOKEN", help="a token (default TILEC_TOKEN); read suffices")
    ] = None,
    compile_missing: Annotated[
        bool, typer.Option(help="have the server build plain compiles and tune the rest (a submit token)")
    ] = False,
    trusted_keys: Annotated[
        str | None,
        typer.Option(help="pinned keys: a file or a list (default TILEC_TRUSTED_KEYS)"),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print one JSON object instead of the table")
    ] = False,
) -> None:
    """Pull the builds of MANIFEST's kernels for TARGET into OUTPUT (blobs/, manifests/, index.json)."""
    from ._exceptions import VerificationError
    from ._pull import PullInputError

    if not server:
        raise _exit(2, "tilec: pull needs a server: --server URL or TILEC_URL")
    try:
        planned, trusted = _setup(manifest, target, trusted_keys)
    except (PullInputError, CompileError, VerificationError) as exc:
        raise _exit(2, f"tilec: {exc}" if not isinstance(exc, CompileError) else str(exc)) from None
    except ToolError as exc:
        raise _exit(2, str(exc)) from None
    report = _pull(planned, server, token, target, output, trusted, compile_missing)
    _print(report, json_out)
    if report.missing:
        lines = [f"  {m.name} ({m.file}): {m.why}" for m in report.missing]
        hint = "" if compile_missing else "\n(--compile-missing asks the server to build and tune them)"
        raise _exit(
            1, f"tilec: the server does not have {len(report.missing)} build(s):\n" + "\n".join(lines) + hint
        )


def _setup(manifest: Path, target: str, trusted_keys: str | None) -> tuple[list[Any], Any]:
    from tilec.compiler.artifact import parse_target

    from ._pull import PullInputError, plan, read_manifest
    from ._pull import trusted_keys as pinned

    try:
        parse_target(target)
    except ValueError as exc:
        raise PullInputError(f"--target: {exc}") from None
    from ._record import is_record

    try:
        text = manifest.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PullInputError(f"{manifest}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    if is_record(text):  # TILEC_RECORD's JSON: kernels carried inline, builds named by their keys
        from ._pull import plan_record

        return plan_record(manifest, target), pinned(trusted_keys)
    entries = read_manifest(manifest)
    planned = [plan(e, manifest.parent, target) for e in entries]
    return planned, pinned(trusted_keys)


def _pull(planned: list[Any], server: str, token: str | None, target: str, output: Path, trusted: Any,
          compile_missing: bool) -> Any:  # fmt: skip
    from ._client import Client, ServiceError
    from ._exceptions import VerificationError
    from ._pull import Puller, Recorded, RecordPuller, write_index

    kind = RecordPuller if planned and isinstance(planned[0], Recorded) else Puller
    with Client(server, token) as client, _progress(len(planned)) as (step, job):
        puller = kind(
            client, output, target, trusted, compile_missing=compile_missing, on_step=step, on_job=job
        )
        try:
            report = puller.pull(planned)
        except VerificationError as exc:
            raise _exit(1, f"tilec: refused: {exc}") from None
        except ServiceError as exc:
            raise _exit(1, f"tilec: {server}: {exc}") from None
        except KeyboardInterrupt:
            raise _exit(130, "\ntilec: interrupted; queued tune jobs keep running on the server") from None
    write_index(output, target, report.entries)
    return report


@contextmanager
def _progress(total: int) -> Iterator[tuple[Callable[[str], None], Callable[[Any], None]]]:
    """A progress display on stderr: the kernel being pulled, and a bar per tune job."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        main = progress.add_task("pulling", total=total)
        seen: set[str] = set()
        jobs: dict[int, Any] = {}

        def step(description: str) -> None:
            name = description.split(":", 1)[0]
            if name not in seen:
                seen.add(name)
                progress.update(main, completed=len(seen) - 1)
            progress.update(main, description=description)

        def job(j: Any) -> None:
            if j.id not in jobs:
                jobs[j.id] = progress.add_task(f"tune job {j.id}", total=j.trials_planned or None)
            progress.update(jobs[j.id], total=j.trials_planned or None, completed=j.trials_done,
                            description=f"tune job {j.id} ({j.state})")  # fmt: skip

        yield step, job


def _print(report: Any, json_out: bool) -> None:
    if json_out:
        out = {"downloaded": report.downloaded, "up_to_date": report.up_to_date, "entries": report.entries,
               "missing": [vars(m) for m in report.missing]}  # fmt: skip
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    if not report.entries:
        return
    from rich.console import Console
    from rich.table import Table

    from ._cli_tune import config_text

    table = Table(
        title=f"{report.downloaded} downloaded, {report.up_to_date} up to date", title_justify="left"
    )
    for column in ("kernel", "kind", "config", "sha256", "key"):
        table.add_column(column)
    for e in report.entries:
        table.add_row(e["name"], e["kind"], config_text(e["config"]), e["sha256"][:16], e["key"] or "-")
    console = Console() if sys.stdout.isatty() else Console(width=200, no_color=True)
    console.print(table)


def register(app: typer.Typer) -> None:
    from ._cli_compile import help_text

    text = help_text(pull_cmd.__doc__, __doc__)
    app.command("pull", help=text.replace("[[", "\\[\\["))(pull_cmd)  # not rich markup

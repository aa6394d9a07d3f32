"""Zero compiles in production from the command line: `tilec manifest merge` (records of many processes
into one), `tilec retune` (tune jobs for the server's inventory), `tilec misses ls|queue` and `tilec pin
set|rm`. Exit 0 when done, 1 when the server refused or could not be reached, 2 for bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._cli_compile import help_text
from ._cli_ls import JsonOut, Server, Token, _connect, _console, _dump, _guarded, _table
from ._cli_tune import BadInput


def merge_cmd(
    records: Annotated[list[Path], typer.Argument(help="record files (TILEC_RECORD) to merge")],
    output: Annotated[Path, typer.Option("--output", "-o", help="the merged record to write")],
) -> None:
    """Merge records of many processes or ranks into one pull manifest (entries deduplicated)."""
    from ._record import RecordFileError, merge, read_record, write_record

    try:
        merged = merge([read_record(p) for p in records])
    except RecordFileError as exc:
        typer.echo(f"tilec: {exc}", err=True)
        raise typer.Exit(2) from None
    write_record(output, merged)
    launched = sum(1 for e in merged["entries"] if not e["variant"])
    typer.echo(f"{output}: {len(merged['entries'])} entries ({launched} launched, "
               f"{len(merged['entries']) - launched} variants) from {len(records)} record(s)")  # fmt: skip


def retune_cmd(
    target: Annotated[str, typer.Option(help="cpu or cuda:sm_XX")],
    gpu_model: Annotated[str | None, typer.Option(help="only keys with a trial on this GPU model")] = None,
    kernel: Annotated[str | None, typer.Option(help="only this kernel (key or name)")] = None,
    since_compiler_version: Annotated[
        str | None, typer.Option(help="only keys whose best build this compiler version (or prefix) made")
    ] = None,
    tuning_key: Annotated[str | None, typer.Option(help="re-time one decision")] = None,
    json_out: JsonOut = False,
    server: Server = None,
    token: Token = None,
) -> None:
    """Queue tune jobs for every tuning key the server holds for TARGET (a submit token)."""
    from tilec.wire import RetuneCreate

    def work() -> None:
        try:
            body = RetuneCreate(target=target, gpu_model=gpu_model, kernel=kernel,
                                since_compiler_version=since_compiler_version, tuning_key=tuning_key)  # fmt: skip
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        with _connect(server, token) as client:
            out = client.retune(body)
        if json_out:
            _dump(out.model_dump(mode="json"))
            return
        rows = [(i.tuning_key[:16], i.kernel_key[:16], i.key or "-", str(i.job_id)) for i in out.queued]
        rows += [(i.tuning_key[:16], i.kernel_key[:16], i.key or "-", f"skipped: {i.why}") for i in out.skipped]
        _console().print(_table(f"{len(out.queued)} queued, {len(out.skipped)} skipped",
                                ("tuning key", "kernel", "key", "job"), rows))  # fmt: skip

    _guarded(work, server)


def misses_ls_cmd(
    target: Annotated[str | None, typer.Option(help="only this target")] = None,
    json_out: JsonOut = False,
    server: Server = None,
    token: Token = None,
) -> None:
    """The launches clients reported as misses (they would compile or tune), most recent first."""

    def work() -> None:
        with _connect(server, token) as client:
            misses = client.misses(target)
        if json_out:
            _dump([m.model_dump(mode="json") for m in misses])
            return
        rows = [(str(m.id), m.name, m.what, m.target, str(m.count), m.last_seen.isoformat(timespec="seconds"))
                for m in misses]  # fmt: skip
        _console().print(_table(f"{len(misses)} misses", ("id", "kernel", "what", "target", "count", "last seen"), rows))

    _guarded(work, server)


def misses_queue_cmd(
    miss_id: Annotated[int, typer.Argument(metavar="ID", min=1, max=2**31 - 1)],
    server: Server = None,
    token: Token = None,
) -> None:
    """Have the server build (a compile miss) or tune (a tune miss) what a miss lacked (a submit token)."""

    def work() -> None:
        with _connect(server, token) as client:
            out = client.queue_miss(miss_id)
        typer.echo(f"built artifact {out.artifact.id}" if out.artifact else f"tune job {out.job.id} ({out.job.state})")

    _guarded(work, server)


def pin_set_cmd(
    tuning_key: Annotated[str, typer.Argument(help="the tuning key (64 hex digits)")],
    config: Annotated[str, typer.Option(help="'BM=128,BN=64,num_warps=4,num_stages=3'")],
    reason: Annotated[str, typer.Option(help="why, for the audit")] = "",
    server: Server = None,
    token: Token = None,
) -> None:
    """Pin a config for a tuning key (an admin token): every lookup and pull serves it, marked pinned."""
    from tilec.wire import ConfigSpec, PinCreate

    def work() -> None:
        kwargs: dict = {}
        options: dict = {}
        for part in filter(None, (p.strip() for p in config.split(","))):
            name, sep, value = part.partition("=")
            if not sep:
                raise BadInput(f"--config: expected NAME=VALUE, got {part!r}")
            try:
                number = int(value)
            except ValueError:
                raise BadInput(f"--config: {name}: expected an int, got {value!r}") from None
            (options if name in ("num_warps", "num_stages") else kwargs)[name.strip()] = number
        with _connect(server, token) as client:
            pin = client.pin(tuning_key, PinCreate(config=ConfigSpec(kwargs=kwargs, **options), reason=reason))
        typer.echo(f"pinned {pin.tuning_key[:16]}: {pin.config}")

    _guarded(work, server)


def pin_rm_cmd(
    tuning_key: Annotated[str, typer.Argument(help="the tuning key")],
    server: Server = None,
    token: Token = None,
) -> None:
    """Remove a pin: the measured best is served again (an admin token)."""

    def work() -> None:
        with _connect(server, token) as client:
            client.unpin(tuning_key)
        typer.echo(f"unpinned {tuning_key[:16]}")

    _guarded(work, server)


def register(app: typer.Typer) -> None:
    manifest_app = typer.Typer(help="recorded pull manifests (TILEC_RECORD)", no_args_is_help=True)
    manifest_app.command("merge", help=help_text(merge_cmd.__doc__, __doc__))(merge_cmd)
    app.add_typer(manifest_app, name="manifest")
    app.command("retune", help=help_text(retune_cmd.__doc__, __doc__))(retune_cmd)
    misses_app = typer.Typer(help="launches that would compile or tune, as clients reported them", no_args_is_help=True)
    misses_app.command("ls", help=help_text(misses_ls_cmd.__doc__, __doc__))(misses_ls_cmd)
    misses_app.command("queue", help=help_text(misses_queue_cmd.__doc__, __doc__))(misses_queue_cmd)
    app.add_typer(misses_app, name="misses")
    pin_app = typer.Typer(help="pinned configs per tuning key", no_args_is_help=True)
    pin_app.command("set", help=help_text(pin_set_cmd.__doc__, __doc__))(pin_set_cmd)
    pin_app.command("rm", help=help_text(pin_rm_cmd.__doc__, __doc__))(pin_rm_cmd)
    app.add_typer(pin_app, name="pin")

"""`tilec jobs ls`, `tilec jobs show ID` and `tilec jobs cancel ID`: the service's tune jobs (--server or
TILEC_URL, --token or TILEC_TOKEN: a read token lists and shows, cancelling needs a submit token). Exit 0
when done, 1 when the server refused, could not be reached or holds no such job, 2 for bad input.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ._cli_compile import help_text
from ._cli_ls import (
    KEY,
    JsonOut,
    Missing,
    Server,
    Token,
    _connect,
    _console,
    _dump,
    _fields,
    _guarded,
    _ms,
    _table,
)
from ._cli_tune import BadInput, config_text, ranked

STATES = ("queued", "running", "done", "failed", "cancelled")
JobId = Annotated[
    int, typer.Argument(metavar="ID", min=1, max=2**31 - 1, help="the job's id (tilec jobs ls)")
]


def ls_cmd(
    state: Annotated[str | None, typer.Option(help="only jobs in this state: " + ", ".join(STATES))] = None,
    kernel: Annotated[str | None, typer.Option("--kernel", "-k", help="only this kernel key's jobs")] = None,
    json_out: JsonOut = False,
    server: Server = None,
    token: Token = None,
) -> None:
    """List the service's tune jobs, newest first: state, progress, kernel, key values, best time."""

    def work() -> None:
        if state is not None and state not in STATES:
            raise BadInput(f"--state: expected one of {', '.join(STATES)}, got {state!r}")
        if kernel is not None and not KEY.fullmatch(kernel):
            raise BadInput(f"--kernel: not a kernel key: {kernel!r}")
        with _connect(server, token) as client:
            jobs = client.tune_jobs(state=state, kernel=kernel)
        if json_out:
            _dump([j.model_dump(mode="json", exclude={"trials"}) for j in jobs])
            return
        _console().print(_jobs_table(jobs))

    _guarded(work, server)


def _jobs_table(jobs: list[Any]) -> Any:
    body = [(str(j.id), j.state, f"{j.trials_done}/{j.trials_planned}", j.kernel_key[:16], j.target, j.key or "-",
             _ms(j.best_time_ms), j.created_at.isoformat(timespec="seconds")) for j in jobs]  # fmt: skip
    columns = ("id", "state", "trials", "kernel key", "target", "key", "best ms", "created")
    return _table(f"tune jobs: {len(jobs)}", columns, body, right=("trials", "best ms"))


def show_cmd(job_id: JobId, json_out: JsonOut = False, server: Server = None, token: Token = None) -> None:
    """Show tune job ID: its state, progress, tuning key, best config and every trial so far (best first)."""

    def work() -> None:
        with _connect(server, token) as client:
            job = _get(client, job_id, server)
        if json_out:
            _dump(job.model_dump(mode="json"))
            return
        _show(job)

    _guarded(work, server)


def _get(client: Any, job_id: int, server: str | None, call: str = "tune_job") -> Any:
    from ._client import NotFoundError

    try:
        return getattr(client, call)(job_id)
    except NotFoundError:
        raise Missing(f"{server} has no tune job {job_id}") from None


def _show(job: Any) -> None:
    from rich.table import Table

    when = [f"created {job.created_at.isoformat(timespec='seconds')}"]
    when += [f"started {job.started_at.isoformat(timespec='seconds')}"] if job.started_at else []
    when += [f"finished {job.finished_at.isoformat(timespec='seconds')}"] if job.finished_at else []
    pairs = [("state", job.state + (f": {job.error}" if job.error else "")),
             ("trials", f"{job.trials_done} of {job.trials_planned}"), ("kernel key", job.kernel_key),
             ("tuning key", job.tuning_key), ("target", job.target), ("key", job.key or "-"),
             ("dtypes", job.dtypes or "-"), ("strategy", job.strategy),
             ("best config", config_text(job.best_config) if job.best_config else "-"),
             ("best ms", _ms(job.best_time_ms)), ("worker", job.worker or "-"),
             ("deliveries", str(job.deliveries)), ("when", ", ".join(when))]  # fmt: skip
    console = _console()
    console.print(_fields(f"tune job {job.id}", pairs))
    if job.trials:
        table = Table(title="trials, best first", title_justify="left")
        for name in ("config", "median ms", "status", "reason"):
            table.add_column(name, justify="right" if name == "median ms" else "left", overflow="fold")
        for t in ranked([t.model_dump(mode="json") for t in job.trials]):
            table.add_row(config_text(t["config"]), _ms(t.get("time_ms")), t["status"], t.get("reason") or "")
        console.print(table)
    if job.state in ("done",) and job.tuning_key:
        console.print(f"tilec show {job.tuning_key[:16]} shows the tuning result", highlight=False)


def cancel_cmd(job_id: JobId, server: Server = None, token: Token = None) -> None:
    """Cancel tune job ID: a queued job is dropped, a running one stops at its next trial. A job already
    finished is left as it is (exit 0, saying so)."""

    def work() -> None:
        with _connect(server, token) as client:
            before = _get(client, job_id, server)
            job = _get(client, job_id, server, call="cancel_tune")
        if before.state in ("done", "failed", "cancelled"):
            typer.echo(f"tilec: job {job_id} had already ended: {before.state}")
        else:
            typer.echo(f"tilec: job {job_id} {job.state} (it was {before.state})")

    _guarded(work, server)


def register(app: typer.Typer) -> None:
    jobs_app = typer.Typer(help="the service's tune jobs: list, show, cancel", no_args_is_help=True)
    jobs_app.command("ls", help=help_text(ls_cmd.__doc__, __doc__))(ls_cmd)
    jobs_app.command("show", help=help_text(show_cmd.__doc__, __doc__))(show_cmd)
    jobs_app.command("cancel", help=help_text(cancel_cmd.__doc__, __doc__))(cancel_cmd)
    app.add_typer(jobs_app, name="jobs")

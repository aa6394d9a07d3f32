"""`tilec tune`: autotune one kernel of a file from a launch description, as a job on the service (--server
or TILEC_URL, followed with a progress bar) or, with neither, on this machine. Prints every trial, the best
first, as a table or (--json) one JSON object. Exit 0 when a config won, 1 when the job failed or was
cancelled or no config could be timed, 2 for bad input (source, signature, launch description).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from tilec.compiler.errors import CompileError, ToolError
from tilec.compiler.tune.launch import LaunchDescriptionError

from ._cli_compile import _read, _value, help_text, internal_error, parse_pairs

STRATEGIES = ("halving", "exhaustive", "random")
FINAL_STATES = ("done", "failed", "cancelled")
POLL_S = 0.3
OUTAGE_S = 30.0  # how long following a job rides out an unreachable server before giving up
_GROUP = {"ok": 0, "cached": 0, "stopped": 1}  # the table's order: timed, stopped early, then the rest


class BadInput(Exception):
    """A command-line value that cannot be used (exit 2)."""


@dataclass
class TuneReport:
    """What a tune ended with, from either path: its state, why it failed, the trials, the job."""

    state: str
    trials: list[dict]
    job: dict
    best: dict | None = None
    best_time_ms: float | None = None
    error: str | None = None


# ---- the command ----------------------------------------------------------------------------------


def tune_cmd(
    file: Annotated[Path, typer.Argument(help="a Triton-language .py file (read, never executed)")],
    launch: Annotated[
        Path, typer.Option(help="the launch description: a TOML file (tensors, scalars, grid)")
    ],
    signature: Annotated[
        str | None,
        typer.Option(
            help="'a_ptr=*fp16,M=i32,...': types of the runtime params (an Inductor module's decorator gives them)"
        ),
    ] = None,
    kernel: Annotated[
        str | None, typer.Option("--kernel", "-k", help="kernel name (default: the only one)")
    ] = None,
    target: Annotated[str, typer.Option(help="cpu or cuda:sm_XX")] = "cpu",
    server: Annotated[
        str | None, typer.Option(envvar="TILEC_URL", help="the service's URL (default TILEC_URL)")
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="TILEC_TOKEN", help="a submit token (default TILEC_TOKEN)")
    ] = None,
    strategy: Annotated[str, typer.Option(help="halving, exhaustive or random")] = "halving",
    budget: Annotated[int | None, typer.Option(min=1, help="configs to benchmark (random)")] = None,
    constexpr: Annotated[
        list[str] | None, typer.Option(help="a constexpr value, e.g. GROUP=8 (repeatable)")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="print one JSON object instead of the table")
    ] = False,
) -> None:
    """Autotune KERNEL of FILE on TARGET: as a job on the service (--server or TILEC_URL), else here."""
    try:
        tune = _setup(file, kernel, signature, launch, target, strategy, budget, constexpr or [])
        report = _on_server(tune, server, token) if server else _here(tune)
    except typer.Exit:
        raise
    except CompileError as exc:  # located: file:line:col, the line and a caret
        raise _exit(2, str(exc)) from None
    except LaunchDescriptionError as exc:
        where = "" if exc.field.startswith("signature") else f"{launch}: "
        raise _exit(2, f"tilec: {where}{exc}") from None
    except BadInput as exc:
        raise _exit(2, f"tilec: {exc}") from None
    except ToolError as exc:
        raise _exit(1, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - a compiler bug is one line, not a traceback
        raise _exit(1, internal_error(file, exc)) from None
    _print(report, json_out)
    if report.state != "done" or report.best is None:
        raise _exit(1, _failure(report))


def _exit(code: int, message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _failure(report: TuneReport) -> str:
    where = f"job {report.job['id']}" if "id" in report.job else "the tune"
    if report.state == "done":
        return f"tilec: {where} timed no config: {_first_reason(report.trials)}"
    return f"tilec: {where} {report.state}" + (f": {report.error}" if report.error else "")


def _first_reason(trials: list[dict]) -> str:
    reasons = [t["reason"] for t in trials if t.get("reason")]
    return reasons[0] if reasons else "no trials"


# ---- reading the input ----------------------------------------------------------------------------


@dataclass
class Tune:
    file: Path
    spec: Any  # runtime.tune.TuneSpec
    prepared: Any  # runtime.tune.Prepared


def _setup(file: Path, kernel, signature, launch, target, strategy, budget, constexpr) -> Tune:
    """Read and check everything before any work: source (located errors), signature, constexprs,
    launch description, target, strategy; the first config that builds proves the kernel compiles."""
    from tilec.compiler.artifact import parse_target
    from tilec.compiler.frontend import read_kernel
    from tilec.compiler.tune.launch import LaunchDescription
    from tilec.runtime.tune import TuneSpec, prepare

    if strategy not in STRATEGIES:
        raise BadInput(f"--strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    try:
        parse_target(target)
    except ValueError as exc:
        raise BadInput(f"--target: {exc}") from None
    source = _read(file)
    ks = read_kernel(source, kernel, filename=str(file))
    sig = {**ks.default_signature, **(parse_pairs(signature, "--signature") if signature else {})}
    if not sig:
        raise BadInput(
            "--signature is needed: 'a_ptr=*fp16,M=i32,...' (only an Inductor module's decorator gives one)"
        )
    consts: dict[str, Any] = {}
    for c in constexpr:
        consts.update({k: _value(v) for k, v in parse_pairs(c, "--constexpr").items()})
    if missing := [
        p.name for p in ks.params if not p.constexpr and p.name not in consts and p.name not in sig
    ]:
        given = "" if not signature else f" (--signature gives {', '.join(sig) or 'none'})"
        raise BadInput(
            f"--signature: no type for {', '.join(missing)} of {ks.name}{given}: every runtime parameter "
            "needs one, e.g. 'x_ptr=*fp32,n=i32' (Triton spelling)"
        )
    description = LaunchDescription.from_toml(_read_launch(launch))
    spec = TuneSpec(source=source, name=ks.name, signature=sig, launch=description, target=target,
                    constexprs=consts, strategy=strategy, budget=budget)  # fmt: skip
    prepared = prepare(spec)
    _check_grid(prepared)
    _preflight(ks, prepared)
    return Tune(file, spec, prepared)


def _check_grid(prepared: Any) -> None:
    """A grid that no config can compute (a name neither a scalar nor a config parameter) is a bad launch
    description, as the service says at submit: refused here before every trial fails alike."""
    first: LaunchDescriptionError | None = None
    for config in prepared.configs:
        try:
            options = {k: v for k, v in config.items() if k != "kwargs"}
            prepared.resolved.grid({**config["kwargs"], **options})  # as the bench sees a config
            return
        except LaunchDescriptionError as exc:
            first = first or exc
    if first is not None:
        raise first


def _read_launch(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--launch: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None


def _preflight(ks: Any, prepared: Any) -> None:
    """Build the tile IR of the configs in order until one builds: a kernel that builds for none is bad
    input with its first located error, reported before a job is queued or a config compiled."""
    from tilec.compiler.frontend import build_ir

    first: CompileError | None = None
    for config in prepared.configs:
        try:
            build_ir(ks, prepared.spec.signature, {**prepared.spec.constexprs, **config["kwargs"]})
            return
        except CompileError as exc:
            first = first or exc
    if first is not None:
        raise first


# ---- on this machine ------------------------------------------------------------------------------


def _here(tune: Tune) -> TuneReport:
    from tilec.runtime.tune import run_tune

    prepared, spec = tune.prepared, tune.spec
    _check_gpu_here(spec.target)
    with _progress(f"tuning {prepared.base.name} here ({spec.target})") as bar:
        outcome, device = run_tune(
            prepared, on_plan=lambda n: bar(total=n), on_trial=lambda t: bar(advance=1)
        )
    trials = [t.public() for t in outcome.trials]
    best = outcome.best
    job = {"state": "done", "kernel_key": prepared.kernel_key, "key": prepared.key, "dtypes": prepared.dtypes,
           "target": spec.target, "strategy": spec.strategy, "device": device}  # fmt: skip
    return TuneReport("done", trials, job, best.config if best else None, best.time_ms if best else None)


def _check_gpu_here(target: str) -> None:
    """Tuning a cuda target here times it on this machine's GPU: without one (or with another arch) that
    is no compiler bug but the wrong machine; say so, and how the service tunes it on a worker that has it."""
    from tilec.compiler.artifact import parse_target

    kind, sm = parse_target(target)
    if kind != "cuda":
        return
    try:
        from tilec.runtime.cuda import device_sm

        here = device_sm(0)
    except Exception as exc:  # noqa: BLE001 - no driver, no GPU, no CUDA: said in one line
        why = " ".join(str(exc).split())[:200]
        raise _exit(1, f"tilec: tuning for {target} on this machine needs its GPU, and none can be used here "
                       f"({why}).\n{_use_a_server(target)}") from None  # fmt: skip
    if here != sm:
        raise _exit(1, f"tilec: tuning for {target} on this machine needs an sm_{sm} GPU; this one is sm_{here}."
                       f"\n{_use_a_server(target)}")  # fmt: skip


def _use_a_server(target: str) -> str:
    return (f"Tune on the service instead: --server URL (or TILEC_URL) with a submit token; a worker started "
            f"with `tilec worker --target {target}` on such a GPU runs the job.")  # fmt: skip


# ---- on the service -------------------------------------------------------------------------------


def _on_server(tune: Tune, url: str, token: str | None) -> TuneReport:
    from ._client import Client, ServiceError

    body = _job_body(tune.spec)
    with Client(url, token) as client:
        try:
            job = client.submit_tune(body)
        except KeyboardInterrupt:
            raise _exit(
                130,
                "\ntilec: interrupted while submitting; `tilec jobs ls` lists the job if it was queued",
            ) from None
        except ServiceError as exc:
            if exc.status in (400, 413, 422):
                raise BadInput(f"{url} refused the tune job ({exc.code}): {exc.detail}") from None
            raise _exit(1, f"tilec: {url}: {exc}") from None
        if job.warning:
            typer.echo(f"tilec: warning: {job.warning}", err=True)
        if job.attached:
            typer.echo(f"tilec: joined job {job.id}, already {job.state} for this tuning key", err=True)
        job = _follow(client, job, tune.prepared.base.name, url)
    public = job.model_dump(mode="json", exclude={"trials"})
    trials = [t.model_dump(mode="json") for t in job.trials]
    return TuneReport(job.state, trials, public, job.best_config, job.best_time_ms, job.error)


def _job_body(spec: Any) -> Any:
    from pydantic import ValidationError

    from tilec.wire import TuneJobCreate

    try:
        return TuneJobCreate(source=spec.source, name=spec.name, signature=spec.signature,
                             constexprs=spec.constexprs, launch=spec.launch.model_dump(mode="json"),
                             target=spec.target, strategy=spec.strategy, budget=spec.budget)  # fmt: skip
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise BadInput(f"{where}: {err['msg']}") from None


def _follow(client: Any, job: Any, name: str, url: str) -> Any:
    """Poll the job until it ends, with a progress bar; Ctrl-C leaves it running on the server."""
    try:
        # the job's id and how to find it again, before anything else: a Ctrl-C leaves the job running
        typer.echo(f"tilec: job {job.id} {job.state} on {url} (tilec jobs show {job.id})", err=True)
        with _progress(f"tuning {name}: job {job.id}") as bar:
            while job.state not in FINAL_STATES:
                bar(total=job.trials_planned or None, completed=job.trials_done, state=job.state)
                time.sleep(POLL_S)
                job = _poll(client, job.id)
            bar(total=job.trials_planned or None, completed=job.trials_done, state=job.state)
    except KeyboardInterrupt:
        typer.echo(f"\ntilec: job {job.id} keeps running on {url}: `tilec jobs show {job.id}` follows it, "
                   f"`tilec jobs cancel {job.id}` stops it", err=True)  # fmt: skip
        raise typer.Exit(130) from None
    return job


def _poll(client: Any, job_id: int) -> Any:
    from ._client import ServiceError, ServiceUnavailable

    deadline = time.monotonic() + OUTAGE_S
    while True:
        try:
            return client.tune_job(job_id)
        except ServiceUnavailable as exc:
            if time.monotonic() > deadline:
                raise _exit(
                    1, f"tilec: lost the server following job {job_id} (it may still run): {exc}"
                ) from None
            time.sleep(1.0)
        except ServiceError as exc:
            raise _exit(1, f"tilec: following job {job_id}: {exc}") from None


# ---- progress and output ------------------------------------------------------------------------


@contextmanager
def _progress(description: str) -> Iterator[Callable[..., None]]:
    """A progress bar on stderr; yields update(total=, completed=, advance=, state=)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("trials"),
               TimeElapsedColumn())  # fmt: skip
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task(description, total=None)

        def update(state: str | None = None, **kw: Any) -> None:
            if state is not None:
                kw["description"] = f"{description} ({state})"
            progress.update(task, **kw)

        yield update


def ranked(trials: list[dict]) -> list[dict]:
    """Best first: ok and cached trials by time, then those stopped early (by time), then pruned/failed."""

    def rank(t: dict) -> tuple[int, float]:
        ms = t.get("time_ms")
        return _GROUP.get(t["status"], 2), ms if ms is not None else math.inf

    return sorted(trials, key=rank)


def config_text(config: dict) -> str:
    kwargs = " ".join(f"{k}={v}" for k, v in (config.get("kwargs") or {}).items())
    options = " ".join(f"{k}={config[k]}" for k in ("num_warps", "num_stages") if config.get(k) is not None)
    return " ".join(p for p in (kwargs, options) if p)


def _print(report: TuneReport, json_out: bool) -> None:
    trials = ranked(report.trials)
    if json_out:
        out = {"best": report.best, "best_time_ms": report.best_time_ms, "trials": trials, "job": report.job}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    from rich.console import Console

    console = Console() if sys.stdout.isatty() else Console(width=200, no_color=True)
    console.print(_table(trials, report))


def _table(trials: list[dict], report: TuneReport) -> Any:
    from rich.table import Table

    job = report.job
    title = f"{job.get('target')} · {job.get('strategy')} · key {job.get('key') or '-'} · {job.get('dtypes')}"
    table = Table(title=title, title_justify="left")
    columns = ("config", "median ms", "spread %", "reps", "status", "reason")
    for name in columns:
        table.add_column(name, justify="right" if name in ("median ms", "spread %", "reps") else "left")
    for t in trials:
        best = report.best is not None and t["config"] == report.best and t["status"] in ("ok", "cached")
        table.add_row(config_text(t["config"]), _ms(t.get("time_ms")), _spread(t), _int(t.get("reps")),
                      t["status"], t.get("reason") or "", style="bold" if best else None)  # fmt: skip
    return table


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if value < 10 else f"{value:.2f}"


def _spread(t: dict) -> str:
    lo, hi, ms = t.get("lo_ms"), t.get("hi_ms"), t.get("time_ms")
    if lo is None or hi is None or not ms:
        return "-"
    return f"{(hi - lo) / ms * 100:.1f}"


def _int(value: int | None) -> str:
    return "-" if value is None else str(value)


def register(app: typer.Typer) -> None:
    app.command("tune", help=help_text(tune_cmd.__doc__, __doc__))(tune_cmd)

"""`tilec ls`, `tilec show` and `tilec lookup`: read the service's shared cache (--server or TILEC_URL,
--token or TILEC_TOKEN: a read token is enough). Tables for people, --json for machines. Exit 0 when
found, 1 when the server refused, could not be reached or holds no such entry, 2 for bad input.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from ._cli_compile import help_text
from ._cli_tune import BadInput, config_text  # one BadInput (exit 2)

WHATS = ("kernels", "artifacts", "tuning")
KEY = re.compile(r"[0-9A-Za-z_-]{1,128}")  # kernel keys, artifact ids and tuning keys are hex digests
PAGE_MAX = 1000

Server = Annotated[str | None, typer.Option(envvar="TILEC_URL", help="the service's URL (default TILEC_URL)")]
Token = Annotated[str | None, typer.Option(envvar="TILEC_TOKEN", help="a read token (default TILEC_TOKEN)")]
JsonOut = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


class Missing(Exception):
    """The server holds no such entry (exit 1)."""


# ---- errors and the connection ---------------------------------------------------------------------


def _exit(code: int, message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(code)


def _guarded(work: Callable[[], None], server: str | None, launch: Path | None = None) -> None:
    """Run a command's work; every failure is one line on stderr and an exit code, never a traceback."""
    from tilec.compiler.errors import CompileError
    from tilec.compiler.tune.launch import LaunchDescriptionError

    from ._client import AuthError, ServiceError, ServiceUnavailable

    try:
        work()
    except typer.Exit:
        raise
    except (BadInput, LaunchDescriptionError) as exc:
        field = getattr(exc, "field", "")
        where = f"{launch}: " if launch is not None and field and not field.startswith("signature") else ""
        raise _exit(2, f"tilec: {where}{exc}") from None
    except CompileError as exc:  # located: file:line:col, the line and a caret
        raise _exit(2, str(exc)) from None
    except Missing as exc:
        raise _exit(1, f"tilec: {exc}") from None
    except ServiceUnavailable as exc:
        what = "cannot reach" if exc.status == 0 else "unavailable:"
        raise _exit(1, f"tilec: {what} {server}: {exc.detail or exc}") from None
    except AuthError as exc:
        raise _exit(1, f"tilec: {server} refused ({exc.status} {exc.code}): {exc.detail}") from None
    except ServiceError as exc:
        raise _exit(1, f"tilec: {server}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a bug is one line, not a traceback
        detail = " ".join(str(exc).split())[:200]
        raise _exit(1, f"tilec: internal error ({type(exc).__name__}: {detail}); please report it") from None


@contextmanager
def _connect(server: str | None, token: str | None) -> Iterator[Any]:
    if not server:
        raise BadInput("no server: give --server URL or set TILEC_URL")
    if not server.startswith(("http://", "https://")):
        raise BadInput(f"--server: expected an http:// or https:// URL, got {server!r}")
    from ._client import Client

    with Client(server, token or None, timeout=60.0) as client:
        yield client


def _check_target(target: str | None) -> None:
    from tilec.compiler.artifact import parse_target

    if target is None:
        return
    try:
        parse_target(target)
    except ValueError as exc:
        raise BadInput(f"--target: {exc}") from None


def _dump(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")


def _console() -> Any:
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=200, no_color=True)


def _table(title: str, columns: tuple[str, ...], rows: list[tuple], right: tuple[str, ...] = ()) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for n, name in enumerate(columns):
        # the first column is the row's key, whole on one line: people copy it into `tilec show`
        whole = {"no_wrap": True, "min_width": max((len(r[0]) for r in rows), default=0)} if n == 0 else {}
        table.add_column(name, justify="right" if name in right else "left", overflow="fold", **whole)
    for row in rows:
        table.add_row(*row)
    return table


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if value < 10 else f"{value:.2f}"


# ---- tilec ls --------------------------------------------------------------------------------------


def ls_cmd(
    what: Annotated[str, typer.Argument(help="kernels, artifacts or tuning", show_default=False)],
    kernel: Annotated[str | None, typer.Option("--kernel", "-k", help="only this kernel key's")] = None,
    target: Annotated[str | None, typer.Option(help="only this target's (cpu, cuda:sm_XX)")] = None,
    limit: Annotated[int, typer.Option(min=1, max=PAGE_MAX, help="rows to list")] = 100,
    offset: Annotated[int, typer.Option(min=0, max=2**31 - 1, help="rows to skip")] = 0,
    json_out: JsonOut = False,
    server: Server = None,
    token: Token = None,
) -> None:
    """List the service's kernels, artifacts or tuning results, newest first."""

    def work() -> None:
        if what not in WHATS:
            raise BadInput(f"expected one of {', '.join(WHATS)}, got {what!r}")
        if what == "kernels" and (kernel is not None or target is not None):
            raise BadInput("--kernel and --target filter artifacts and tuning, not kernels")
        if kernel is not None and not KEY.fullmatch(kernel):
            raise BadInput(f"--kernel: not a kernel key: {kernel!r}")
        _check_target(target)
        with _connect(server, token) as client:
            if what == "kernels":
                rows = client.kernels(limit=limit, offset=offset)
            elif what == "artifacts":
                rows = client.artifacts(kernel=kernel, target=target, limit=limit, offset=offset)
            else:
                rows = client.tuning_results(kernel=kernel, target=target, limit=limit, offset=offset)
        if json_out:
            _dump([r.model_dump(mode="json") for r in rows])
            return
        _console().print(LISTINGS[what](rows))
        if len(rows) == limit:
            typer.echo(f"tilec: {limit} shown; the next ones with --offset {offset + limit}", err=True)

    _guarded(work, server)


def _kernels_table(rows: list[Any]) -> Any:
    def autotune(k: Any) -> str:
        if k.autotune is None:
            return "-"
        return f"{len(k.autotune.configs)} configs, key {', '.join(k.autotune.key) or '-'}"

    def params(k: Any) -> str:
        return ", ".join(p.name + (" (constexpr)" if p.constexpr else "") for p in k.params)

    body = [(k.key, k.name, k.kind, params(k), autotune(k)) for k in rows]
    return _table(f"kernels: {len(rows)}", ("key", "name", "kind", "params", "autotune"), body)


def _artifacts_table(rows: list[Any]) -> Any:
    body = [(a.id, a.kernel_name, a.target, a.emit, config_text(a.config), str(a.size), a.kernel_key[:16])
            for a in rows]  # fmt: skip
    columns = ("id", "kernel", "target", "emit", "config", "bytes", "kernel key")
    return _table(f"artifacts: {len(rows)}", columns, body, right=("bytes",))


def _tuning_table(rows: list[Any]) -> Any:
    def artifact(r: Any) -> str:
        return "-" if r.artifact is None else r.artifact.id[:16]

    body = [(r.tuning_key, r.kernel_key[:16], r.target, r.key or "-", r.dtypes or "-", config_text(r.config),
             _ms(r.time_ms), str(r.trials), artifact(r)) for r in rows]  # fmt: skip
    columns = ("tuning key", "kernel key", "target", "key", "dtypes", "best config", "ms", "trials", "artifact")
    return _table(f"tuning results: {len(rows)}", columns, body, right=("ms", "trials"))


LISTINGS = {"kernels": _kernels_table, "artifacts": _artifacts_table, "tuning": _tuning_table}


# ---- tilec show ------------------------------------------------------------------------------------


def show_cmd(
    key: Annotated[str, typer.Argument(help="a kernel key, artifact id or tuning key", show_default=False)],
    json_out: JsonOut = False,
    server: Server = None,
    token: Token = None,
) -> None:
    """Show what KEY is on the service: a kernel, an artifact, or a tuning key's trials (best first). KEY may
    be any unique prefix of one, such as the 16 characters `tilec ls` prints."""

    def work() -> None:
        if not KEY.fullmatch(key):
            raise BadInput(f"not a key: {key!r} (a kernel key, artifact id or tuning key: hex digits)")
        with _connect(server, token) as client:
            what, value = _find(client, key)
        if what is None:
            raise Missing(f"{server} has no kernel, artifact or tuning key {key}")
        if json_out:
            _dump(_as_json(what, key, value))
            return
        SHOWS[what](key, value)

    _guarded(work, server)


def _find(client: Any, key: str) -> tuple[str | None, Any]:
    """Ask for a kernel, then an artifact, then a tuning key's trials: the first that exists. A key that
    names none of them whole is taken as a prefix (as `tilec ls` prints them): the one entry it begins."""
    from ._client import NotFoundError

    for what, get in (("kernel", client.kernel), ("artifact", client.artifact)):
        try:
            return what, get(key)
        except NotFoundError:
            continue
    trials = client.trials(key)
    if trials:
        return "tuning_key", trials
    found = sorted(_by_prefix(client, key))
    if len(found) > 1:
        shown = ", ".join(f"{what} {full}" for what, full in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        raise BadInput(f"{key} is ambiguous: it begins {len(found)} keys ({shown}{more}); give more of it")
    if not found:
        return None, None
    return _find(client, found[0][1])


def _by_prefix(client: Any, prefix: str) -> set[tuple[str, str]]:
    """(what, full key) of every kernel, artifact and tuning key on the service that begins with prefix,
    read page by page from the listings (the API looks keys up whole)."""
    listings = (("kernel", client.kernels, "key"), ("artifact", client.artifacts, "id"),
                ("tuning key", client.tuning_results, "tuning_key"))  # fmt: skip
    found: set[tuple[str, str]] = set()
    for what, listing, field in listings:
        offset = 0
        while True:
            page = listing(limit=PAGE_MAX, offset=offset)
            found |= {(what, getattr(r, field)) for r in page if getattr(r, field).startswith(prefix)}
            if len(page) < PAGE_MAX:
                break
            offset += PAGE_MAX
    return found


def _as_json(what: str, key: str, value: Any) -> dict:
    if what == "tuning_key":
        return {"what": what, "tuning_key": key, "trials": [t.model_dump(mode="json") for t in value]}
    return {"what": what, what: value.model_dump(mode="json")}


def _fields(title: str, pairs: list[tuple[str, str]]) -> Any:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in pairs:
        table.add_row(name, value)
    return table


def _show_kernel(key: str, k: Any) -> None:
    params = [f"{p.name}: constexpr" + (f" = {p.default!r}" if p.has_default else "") if p.constexpr
              else p.name + (f": {p.annotation}" if p.annotation else "") for p in k.params]  # fmt: skip
    pairs = [("key", k.key), ("name", k.name), ("kind", k.kind), ("params", "\n".join(params) or "-")]
    if k.autotune is not None:
        configs = "\n".join(config_text(c.model_dump(exclude_none=True)) for c in k.autotune.configs)
        pairs += [("autotune key", ", ".join(k.autotune.key) or "-"), ("autotune configs", configs or "-")]
    pairs += [(f"heuristic {name}", expr) for name, expr in k.heuristics.items()]
    console = _console()
    console.print(_fields(f"kernel {k.name}", pairs))
    if k.ir:
        console.print("tile IR:", highlight=False)
        console.print(k.ir, highlight=False, markup=False)


def _show_artifact(key: str, a: Any) -> None:
    meta = ", ".join(f"{k}={v}" for k, v in a.metadata.items() if not isinstance(v, list | dict))
    pairs = [("id", a.id), ("kernel", f"{a.kernel_name} ({a.kernel_key})"), ("target", a.target),
             ("emit", a.emit), ("config", config_text(a.config) or "-"), ("bytes", str(a.size)),
             ("sha256", a.sha256), ("compiler version", a.compiler_version), ("metadata", meta or "-"),
             ("forms", ", ".join(sorted(f for f in a.links if f != "self")) or "-")]  # fmt: skip
    _console().print(_fields(f"artifact of {a.kernel_name} for {a.target}", pairs))


def _show_trials(key: str, trials: list[Any]) -> None:
    from rich.table import Table

    table = Table()
    for name in ("config", "ms", "artifact", "gpu", "driver"):
        table.add_column(name, justify="right" if name == "ms" else "left", overflow="fold")
    for n, t in enumerate(trials):
        table.add_row(config_text(t.config), _ms(t.time_ms), (t.artifact_id or "-")[:16], t.gpu_model or "-",
                      t.driver_version or "-", style="bold" if n == 0 else None)  # fmt: skip
    console = _console()
    console.print(f"tuning key {key}: {len(trials)} trials, best first", highlight=False, soft_wrap=True)
    console.print(table)


SHOWS = {"kernel": _show_kernel, "artifact": _show_artifact, "tuning_key": _show_trials}


# ---- tilec lookup ----------------------------------------------------------------------------------


def lookup_cmd(
    file: Annotated[Path, typer.Argument(help="a Triton-language .py file (read, never executed)")],
    signature: Annotated[str, typer.Option(help="'a_ptr=*fp16,M=i32,...': types of the runtime params")],
    launch: Annotated[Path, typer.Option(help="the launch description (TOML) the kernel was tuned with")],
    kernel: Annotated[
        str | None, typer.Option("--kernel", "-k", help="kernel name (default: the only one)")
    ] = None,
    target: Annotated[str, typer.Option(help="cpu or cuda:sm_XX")] = "cpu",
    constexpr: Annotated[
        list[str] | None, typer.Option(help="a constexpr value, e.g. GROUP=8 (repeatable)")
    ] = None,
    json_out: JsonOut = False,
    server: Server = None,
    token: Token = None,
) -> None:
    """Print the best config the service holds for KERNEL of FILE launched as LAUNCH on TARGET: its
    tuning key is computed as `tilec tune` and the workers compute it. Exit 1 when there is none."""

    def work() -> None:
        if not server:
            raise BadInput("no server: give --server URL or set TILEC_URL")
        _check_target(target)
        name, prepared = _prepare(file, kernel, signature, launch, target, constexpr or [])
        with _connect(server, token) as client:
            found = client.lookup(prepared.kernel_key, target, key=prepared.key, dtypes=prepared.dtypes)
            if found is None:
                raise Missing(_no_result(client, name, prepared, target, server))
        if json_out:
            _dump(found.model_dump(mode="json"))
            return
        _show_lookup(name, found)

    _guarded(work, server, launch)


def _prepare(
    file: Path, kernel: str | None, signature: str, launch: Path, target: str, constexpr: list[str]
) -> tuple[str, Any]:
    """(the kernel's name, runtime.tune.Prepared): the tuning key's parts as a tune computes them."""
    from tilec.compiler.frontend import read_kernel
    from tilec.compiler.tune.launch import LaunchDescription
    from tilec.runtime.tune import TuneSpec, prepare

    from ._cli_compile import _read, _value, parse_pairs

    source = _read(file)
    ks = read_kernel(source, kernel, filename=str(file))
    consts: dict[str, Any] = {}
    for c in constexpr:
        consts.update({k: _value(v) for k, v in parse_pairs(c, "--constexpr").items()})
    try:
        text = launch.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"--launch: cannot read {launch}: {getattr(exc, 'strerror', None) or exc}") from None
    spec = TuneSpec(source=source, name=ks.name, signature=parse_pairs(signature, "--signature"),
                    launch=LaunchDescription.from_toml(text), target=target, constexprs=consts)  # fmt: skip
    return ks.name, prepare(spec)


def _no_result(client: Any, name: str, prepared: Any, target: str, server: str) -> str:
    from ._client import NotFoundError

    try:
        client.kernel(prepared.kernel_key)
    except NotFoundError:
        return f"{server} does not know kernel {name} (key {prepared.kernel_key}); `tilec tune --server` adds it"
    what = f"key {prepared.key or '-'}, dtypes {prepared.dtypes or '-'}, target {target}"
    return f"{server} has no tuning result for {name} ({what}); `tilec tune --server` makes one"


def _show_lookup(name: str, r: Any) -> None:
    pairs = [("kernel", f"{name} ({r.kernel_key})"), ("tuning key", r.tuning_key), ("target", r.target),
             ("key", r.key or "-"), ("dtypes", r.dtypes or "-"), ("best config", config_text(r.config) or "-"),
             ("median ms", _ms(r.time_ms)), ("trials", str(r.trials))]  # fmt: skip
    if r.artifact is not None:
        pairs += [("artifact", r.artifact.id), ("sha256", r.artifact.sha256), ("bytes", str(r.artifact.size))]
    _console().print(_fields(f"best config of {name} on {r.target}", pairs))


def register(app: typer.Typer) -> None:
    app.command("ls", help=help_text(ls_cmd.__doc__, __doc__))(ls_cmd)
    app.command("show", help=help_text(show_cmd.__doc__, __doc__))(show_cmd)
    app.command("lookup", help=help_text(lookup_cmd.__doc__, __doc__))(lookup_cmd)

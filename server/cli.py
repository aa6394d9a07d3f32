"""`tilec serve`, `tilec worker`, `tilec db upgrade|downgrade`, `tilec token create|ls|revoke`,
`tilec key show`: the service's commands.

Server modules are imported inside the commands, so `tilec --help` stays fast and works without
the server extra installed.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

if TYPE_CHECKING:
    from tilec.server.settings import Settings

db_app = typer.Typer(help="the SQL cache's schema (Alembic migrations)", no_args_is_help=True)
token_app = typer.Typer(help="bearer tokens for the service", no_args_is_help=True)
key_app = typer.Typer(help="the key the service signs artifact manifests with", no_args_is_help=True)
T = TypeVar("T")


def serve(
    host: Annotated[str | None, typer.Option(help="address to bind (default TILEC_HOST or 127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="port (default TILEC_PORT or 8000)")] = None,
    workers: Annotated[int, typer.Option(help="uvicorn worker processes")] = 1,
    access_log: Annotated[
        bool | None,
        typer.Option("--access-log/--no-access-log", help="one line per request on stdout (default TILEC_ACCESS_LOG or off)"),
    ] = None,
) -> None:
    """Run the service with uvicorn (auth is on unless it listens on a loopback address); the app
    migrates the database at start unless TILEC_MIGRATE_ON_START=false."""
    import uvicorn

    from tilec.server.edge import http_protocol
    from tilec.server.settings import Settings

    given = {"host": host, "port": port, "access_log": access_log}
    overrides = {k: v for k, v in given.items() if v is not None}
    settings = Settings(**overrides)
    # the app is built from TILEC_* in each uvicorn worker: pass the command line on through them
    os.environ.update({f"TILEC_{k.upper()}": str(v) for k, v in overrides.items()})
    config = uvicorn.Config(
        "tilec.server.main:app",
        host=settings.host,
        port=settings.port,
        workers=workers,
        loop="auto",
        http=http_protocol(),  # uvicorn's "auto" choice, with a header timeout (TILEC_HEADER_TIMEOUT_S)
        limit_concurrency=settings.max_connections,  # past it, a new request is answered 503
        log_config=_log_config(settings.access_log),
        log_level=None,  # the levels are in the log config
        access_log=settings.access_log,
        env_file=None,
    )
    # uvicorn.run's two paths, with the socket bound first: the banner is printed only once the port is
    # ours (a port in use is one line, "address already in use", and exit 3, with no banner before it)
    sock = config.bind_socket()
    sock.listen(config.backlog)
    for line in banner(settings):
        typer.echo(line)
    try:
        if workers > 1:
            import inspect

            from uvicorn.supervisors import Multiprocess

            # uvicorn before 0.30 takes the worker's target; later ones make their own
            takes_target = "target" in inspect.signature(Multiprocess.__init__).parameters
            extra = {"target": uvicorn.Server(config).run} if takes_target else {}
            Multiprocess(config, sockets=[sock], **extra).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])
    except KeyboardInterrupt:
        pass


def banner(settings: Settings) -> list[str]:
    """What `tilec serve` prints first: where it listens, the database (password masked), the API
    docs, and whether a token is needed."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{settings.port}"
    where = " (all interfaces)" if settings.host in ("0.0.0.0", "::") else ""
    if settings.auth is not None:
        auth = f"{'on' if settings.auth else 'off'} (TILEC_AUTH={str(settings.auth).lower()})"
    elif settings.auth_enabled:
        auth = "on (not a loopback address; make a token with: tilec token create --scope read)"
    else:
        auth = "off (loopback address; TILEC_AUTH=true to require tokens)"
    access = "on" if settings.access_log else "off (--access-log or TILEC_ACCESS_LOG=true)"
    if settings.broker_url:
        jobs = f"Celery workers via {masked_url(settings.broker_url)} (start them with: tilec worker --target T)"
    else:
        jobs = "in-process (TILEC_BROKER_URL=redis://... for Celery workers)"
    return [
        f"tilec: listening on {url}{where}",
        f"  database:   {masked_url(settings.resolved_database_url)}",
        f"  API docs:   {url}/docs",
        f"  auth:       {auth}",
        f"  access log: {access}",
        f"  tune jobs:  {jobs}",
    ]


def masked_url(url: str) -> str:
    """The database URL for printing: a password, in the URL or as a query parameter, becomes ***."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return "(not a database URL: check TILEC_DATABASE_URL)"
    if "password" in parsed.query:
        parsed = parsed.update_query_dict({"password": "***"})
    return parsed.render_as_string(hide_password=True)


def _log_config(access_log: bool) -> dict:
    """uvicorn's logging with its start-up lines held back (the banner says the same) and the access
    log at INFO when it is on, query strings redacted (a token in a URL never lands in a log)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_query"] = {"()": "tilec.server.edge.RedactQuery"}
    config["handlers"]["access"]["filters"] = ["redact_query"]
    loggers = config["loggers"]
    loggers["uvicorn"]["level"] = loggers["uvicorn.error"]["level"] = "WARNING"
    loggers["uvicorn.access"]["level"] = "INFO" if access_log else "WARNING"
    return config


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Apply the migrations up to REVISION (safe to run from several replicas at once)."""
    from tilec.server.db.migrate import upgrade
    from tilec.server.settings import Settings

    url = Settings().resolved_database_url
    upgrade(url, revision)
    typer.echo(f"database at {revision}")


@db_app.command("downgrade")
def db_downgrade(revision: Annotated[str, typer.Argument()] = "base") -> None:
    """Revert the migrations down to REVISION."""
    from tilec.server.db.migrate import downgrade
    from tilec.server.settings import Settings

    downgrade(Settings().resolved_database_url, revision)
    typer.echo(f"database at {revision}")


# --server as every client verb spells it; --url, the old spelling, still works
UrlOption = Annotated[
    str | None,
    typer.Option("--server", "--url", help="a running server: go through its API (a revoke takes effect there at once)"),
]
TokenOption = Annotated[str | None, typer.Option("--token", envvar="TILEC_TOKEN", help="an admin token, with --server")]


def _in_database(fn: Callable[[Any], T]) -> T:
    """fn(session) in one transaction on TILEC_DATABASE_URL (migrated first)."""
    from tilec.server.db.engine import make_engine, session_factories
    from tilec.server.db.migrate import upgrade
    from tilec.server.settings import Settings

    url = Settings().resolved_database_url
    upgrade(url)
    engine = make_engine(url, pool_size=1)
    try:
        rw, _ = session_factories(engine)
        with rw() as session, session.begin():
            return fn(session)
    finally:
        engine.dispose()


# How the commands given --server reach the API: tilec/cli.py hands in a function returning the client's HTTP
# client class (called with (url, token), a context manager) and its error class; the server imports nothing
# from the client.
_API: dict[str, Callable[[], tuple[type, type[Exception]]]] = {}


def _through_api(url: str, token: str | None, call: Callable[[Any], T]) -> T:
    if not _API:
        typer.echo("tilec: --server needs the tilec client (run this through the `tilec` command)", err=True)
        raise typer.Exit(2)
    client_class, error = _API["load"]()
    try:
        with client_class(url, token) as client:
            return call(client)
    except error as exc:
        typer.echo(f"tilec: {exc}", err=True)
        raise typer.Exit(1) from exc


def _token_row(row: Any) -> Any:
    from tilec.wire import TokenPublic

    return TokenPublic.model_validate(row, from_attributes=True)


@token_app.command("create")
def token_create(
    scope: Annotated[list[str], typer.Option("--scope", help="read, submit or admin (repeatable)")],
    description: Annotated[str, typer.Option(help="what the token is for")] = "",
) -> None:
    """Create a token in the database directly and print it (it is stored only as a hash)."""
    bad = sorted(set(scope) - {"read", "submit", "admin"})
    if bad:
        raise typer.BadParameter(f"unknown scope(s) {', '.join(bad)}; use read, submit or admin")
    from tilec.server.db import crud

    plain = _in_database(lambda s: crud.create_token(s, scopes=scope, description=description)[0])
    typer.echo(plain)


@token_app.command("ls")
def token_ls(url: UrlOption = None, token: TokenOption = None) -> None:
    """List the tokens: id, scopes, created, revoked (or "active"), description; never the tokens."""
    from tilec.server.db import crud

    if url:
        rows = _through_api(url, token, lambda c: c.list_tokens())
    else:
        rows = _in_database(lambda s: [_token_row(r) for r in crud.list_tokens(s)])
    typer.echo("id\tscopes\tcreated\trevoked\tdescription")  # tab-separated, for cut and awk; this line first
    for t in rows:
        revoked = t.revoked_at.isoformat(timespec="seconds") if t.revoked_at else "active"
        created = t.created_at.isoformat(timespec="seconds")
        typer.echo(f"{t.id}\t{','.join(t.scopes)}\t{created}\t{revoked}\t{t.description}")


@token_app.command("revoke")
def token_revoke(token_id: Annotated[int, typer.Argument(metavar="ID", min=1)], url: UrlOption = None,
                 token: TokenOption = None) -> None:
    """Revoke token ID. With --server the server refuses it at once; every other server process (workers,
    replicas; or all of them, written to the database directly) within TILEC_REVOCATION_POLL_S."""
    from tilec.server.db import crud

    if url:
        row = _through_api(url, token, lambda c: c.revoke_token(token_id))
    else:
        found = _in_database(lambda s: crud.revoke_token(s, token_id=token_id))
        if found is None:
            typer.echo(f"tilec: no token {token_id}", err=True)
            raise typer.Exit(1)
        row = _token_row(found)
    typer.echo(f"token {row.id} revoked at {row.revoked_at.isoformat(timespec='seconds')}")


@key_app.command("show")
def key_show(
    url: Annotated[str | None, typer.Option("--server", "--url", help="a running server: print the keys it serves")] = None,
) -> None:
    """Print the signing key's id, algorithm and base64 public key (tab-separated), as clients pin it
    in TILEC_TRUSTED_KEYS: the key of TILEC_SIGNING_KEY, else TILEC_DATA_DIR's (made if missing)."""
    if url:
        keys = _through_api(url, None, lambda c: c.keys())
    else:
        from tilec.server.settings import Settings
        from tilec.server.signing import SigningKeyError, load_signing_key

        try:
            keys = [load_signing_key(Settings()).public()]
        except SigningKeyError as exc:
            typer.echo(f"tilec key show: {exc}", err=True)
            raise typer.Exit(1) from None
    for k in keys:
        typer.echo(f"{k.key_id}\t{k.algorithm}\t{k.public_key}")


def worker(
    target: Annotated[str, typer.Option(help="the target whose tune jobs to take: cpu, or cuda:sm_XX of this GPU")],
    loglevel: Annotated[str, typer.Option(help="Celery's log level")] = "INFO",
) -> None:
    """A Celery worker for tune jobs (TILEC_BROKER_URL, and TILEC_DATABASE_URL of the service): it checks
    that this machine can run the target (its GPU's arch) and consumes only that target's queue, one job
    at a time."""
    from tilec.compiler.artifact import parse_target
    from tilec.server.jobs.executor import local_targets, worker_hostname
    from tilec.server.settings import Settings

    settings = Settings()
    if not settings.broker_url:
        typer.echo("tilec worker: set TILEC_BROKER_URL (e.g. redis://localhost:6379/0) to the service's broker",
                   err=True)  # fmt: skip
        raise typer.Exit(2)
    try:
        parse_target(target)
    except ValueError as exc:
        typer.echo(f"tilec worker: {exc}", err=True)
        raise typer.Exit(2) from None
    here = local_targets()
    if target not in here:
        typer.echo(f"tilec worker: this machine cannot run {target}; it runs {', '.join(sorted(here))}", err=True)
        raise typer.Exit(2)
    from tilec.server.jobs.celery_app import make_celery, queue_name

    app = make_celery(settings)
    # a tune compiles each config (and reads the kernel) in a child of the forkserver: started now with the
    # compiler imported (server/pool.py's preload), each child forks warm instead of importing it (~0.5 s a child)
    from tilec.server.pool import CompilePool

    CompilePool().warm()
    # and each job's bench child is started while the job before it runs; a GPU child is kept for the same
    # token's next job (settings.bench_keep)
    from tilec.runtime.standby import keep_standby
    from tilec.server.jobs.runner import bench_limits

    keep_standby(settings.bench_standby, kind="cpu" if target == "cpu" else "cuda", limits=bench_limits(settings),
                 keep=settings.bench_keep)  # fmt: skip
    typer.echo(f"tilec worker: {target} jobs from {masked_url(settings.broker_url)} (queue {queue_name(target)})")
    app.worker_main([
        "worker", "--queues", queue_name(target), "--pool", "solo", "--concurrency", "1", "--loglevel", loglevel,
        "--hostname", f"{worker_hostname(target, os.getpid())}@%h", "--without-gossip", "--without-mingle",
    ])  # fmt: skip


def register(app: typer.Typer, *, api: Callable[[], tuple[type, type[Exception]]] | None = None) -> None:
    """Add the server's commands to app; api() gives the HTTP client class and its error for --server."""
    if api is not None:
        _API["load"] = api
    app.command("serve")(serve)
    app.command("worker")(worker)
    app.add_typer(db_app, name="db")
    app.add_typer(token_app, name="token")
    app.add_typer(key_app, name="key")

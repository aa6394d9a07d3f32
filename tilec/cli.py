"""The `tilec` command line: one typer app with the client's commands (compile, ir, ...) and, where the
server extra is installed, the server's (serve, db, token). Each side registers its own."""

from __future__ import annotations

import importlib.util
import warnings
from typing import Annotated

import typer

app = typer.Typer(help="tilec: a tile compiler and its shared autotune cache", no_args_is_help=True)


def _version(value: bool) -> None:
    if value:
        from tilec import __version__

        typer.echo(f"tilec {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """tilec: a tile compiler and its shared autotune cache."""
    warnings.showwarning = _one_line_warning


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """A warning on the command line is one line for a person (`tilec: warning: ...`), not Python's
    `path:line: UserWarning:` with the source line under it."""
    typer.echo(f"tilec: warning: {message}", err=True)


def _register_all() -> None:
    from tilec.client import cli as client_cli

    client_cli.register(app)
    if (
        importlib.util.find_spec("fastapi") is not None
    ):  # the server extra; its modules load inside each command
        from tilec.server import cli as server_cli

        server_cli.register(app, api=_http_client)


def _http_client() -> tuple[type, type[Exception]]:
    """The client's HTTP client and its error, for the server's commands given --url (loaded when one runs)."""
    from tilec.client import Client, ServiceError

    return Client, ServiceError


def main() -> None:
    _register_all()
    app()

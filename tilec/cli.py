"""The `tilec` command line: one typer app with the client's commands (compile, ir, ...) and, where the
server extra is installed, the server's (serve, db, token). Each side registers its own."""

from __future__ import annotations

import importlib.util

import typer

app = typer.Typer(help="tilec: a tile compiler and its shared autotune cache", no_args_is_help=True)


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

"""The `tilec` command line: one typer app; each area registers its commands from client/_cli_*.py."""

from __future__ import annotations

import importlib
import pkgutil

import typer

app = typer.Typer(help="tilec: a tile compiler and its shared autotune cache", no_args_is_help=True)


def _register_all() -> None:
    from tilec import client

    for info in sorted(pkgutil.iter_modules(client.__path__), key=lambda m: m.name):
        if info.name.startswith("_cli_"):
            importlib.import_module(f"tilec.client.{info.name}").register(app)


def main() -> None:
    _register_all()
    app()

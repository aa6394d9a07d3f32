"""The client's commands of the `tilec` command line (compile, ir, ...): each client/_cli_*.py module
registers its own; tilec/cli.py puts them together with the server's."""

from __future__ import annotations

import importlib
import pkgutil

import typer


def register(app: typer.Typer) -> None:
    from tilec import client

    for info in sorted(pkgutil.iter_modules(client.__path__), key=lambda m: m.name):
        if info.name.startswith("_cli_"):
            importlib.import_module(f"tilec.client.{info.name}").register(app)

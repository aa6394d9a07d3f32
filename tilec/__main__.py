"""`python -m tilec ...`: the `tilec` command line; `python -m tilec run script.py [args...]` runs a script
with `tilec.install()` in force, so every `@triton.jit` kernel it imports launches through tilec."""

from __future__ import annotations

import os
import runpy
import sys


def main(argv: list[str]) -> None:
    if argv[:1] == ["run"]:
        if len(argv) < 2:
            raise SystemExit("usage: python -m tilec run script.py [args...]  (or -m module [args...])")
        from tilec.client import install

        install()
        if argv[1] == "-m" and len(argv) > 2:
            sys.argv = argv[2:]
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
            return
        sys.argv = argv[1:]
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[1])))
        runpy.run_path(argv[1], run_name="__main__")
        return
    from tilec.cli import main as cli_main

    sys.argv = ["tilec", *argv]
    cli_main()


if __name__ == "__main__":
    main(sys.argv[1:])

"""tilec-opt: parse tile IR, run named passes, print the result (like mlir-opt).

  tilec-opt FILE.tir -p canonicalize,cse [--print-ir-after-all] [--print-ir-after NAME] [--timing]
With no passes it round-trips the IR (parse, verify, print). `-` reads stdin. `--split-input-file`
treats each `// -----` separated chunk as its own module. Errors print the CompileError and exit 1.
Besides the machine-independent passes it knows every backend's (`gpu-layout`, ...).
"""

from __future__ import annotations

import argparse
import sys

from ..backends import backend_passes
from ..errors import CompileError
from ..ir.parser import parse_module
from ..ir.printer import print_module
from ..ir.verifier import verify_module
from ..passes import PASSES
from ..passes.manager import PassManager, split_pass_list

SPLIT_MARKER = "// -----"


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="tilec-opt", description="Run tile IR passes and print the result.")
    ap.add_argument("file", help="a .tir file, or - for stdin")
    ap.add_argument("-p", "--passes", default="", help="comma-separated passes or pipelines, e.g. canonicalize,cse")
    ap.add_argument("--print-ir-after-all", action="store_true", help="print the IR (to stderr) after every pass")
    ap.add_argument("--print-ir-after", action="append", default=[], metavar="NAME", help="print the IR after pass NAME")
    ap.add_argument("--timing", action="store_true", help="print per-pass wall time to stderr")
    ap.add_argument("--split-input-file", action="store_true", help="process each '// -----' chunk separately")
    ap.add_argument("--no-verify", action="store_true", help="do not verify the input or after each pass")
    return ap


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _chunks(text: str, split: bool) -> list[tuple[str, int]]:
    """(chunk, first line number - 1); chunks keep their lines so errors point into the file."""
    if not split:
        return [(text, 0)]
    out, cur, start = [], [], 0
    for i, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            out.append(("\n".join(cur), start))
            cur, start = [], i + 1
        else:
            cur.append(line)
    out.append(("\n".join(cur), start))
    return out


def run_chunk(text: str, offset: int, filename: str, args: argparse.Namespace) -> str:
    module = parse_module("\n" * offset + text, filename)
    if not args.no_verify:
        verify_module(module)
    pm = PassManager.from_names(split_pass_list(args.passes), registry={**PASSES, **backend_passes()},
                                print_ir_after_all=args.print_ir_after_all,
                                print_ir_after=args.print_ir_after, timing=args.timing,
                                verify=not args.no_verify)
    pm.run(module)
    return print_module(module)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    filename = "<stdin>" if args.file == "-" else args.file
    try:
        text = _read(args.file)
    except OSError as e:
        print(f"tilec-opt: cannot read {args.file}: {e.strerror}", file=sys.stderr)
        return 1
    failed = False
    for i, (chunk, offset) in enumerate(_chunks(text, args.split_input_file)):
        if i:
            print(SPLIT_MARKER)
        try:
            sys.stdout.write(run_chunk(chunk, offset, filename, args))
        except CompileError as e:
            sys.stdout.flush()
            print(e.render(), file=sys.stderr)
            failed = True
        except RecursionError:
            print(f"{filename}: IR nested too deeply", file=sys.stderr)
            failed = True
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The `tenants` command: a plain table of commands, one module each.

Exit codes: 0 ok, 1 invalid input (every problem printed to stderr, nothing written), 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..spec.problems import InvalidInput
from . import diff, importing, init, moves, new, render, reports, schema, stacks, validate
from .common import EXIT_INVALID, EXIT_OK, EXIT_USAGE, report

# name -> module (or class, where one module holds two commands) with `add_parser(subparsers)` and
# `run(args) -> exit code`; help lists them in this order.
COMMANDS = {
    "init": init,
    "validate": validate.Validate,
    "migrate": validate.Migrate,
    "schema": schema,
    "new": new,
    "import": importing,
    "render": render,
    "diff": diff,
    "capacity": reports.Capacity,
    "report": reports.GpuHours,
    "stacks": stacks,
    "moves": moves,
    "simulate": diff.Simulate,
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 on usage errors; keep that, but say how to get help
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n(see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tenants",
        description="Tenants of a shared GPU Kubernetes cluster, from tenants/*.yaml and stacks/Pulumi.<env>.yaml.",
        epilog="Exit codes: 0 ok, 1 invalid input (nothing written), 2 usage error.",
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="project directory holding tenants/ and stacks/ (default: .)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    for module in COMMANDS.values():
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tenants` console script and `python -m components`.

    >>> main(["--root", str(root), "validate", "--stack", "prod"])
    prod: 3 tenant(s) ok
    0
    """
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from ..load import fewer_gc_passes

    try:
        with fewer_gc_passes():  # commands build many long-lived objects (docs/performance.md)
            return COMMANDS[args.command].run(args)
    except InvalidInput as err:
        report(err.problems, first_files=err.first_files)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

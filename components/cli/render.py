"""`tenants render`: write a stack's objects as YAML files (offline, no cluster)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ..load import load_environment
from ..output.render import OutputError, check_output_directory, render_directory
from .common import EXIT_OK, EXIT_USAGE, report


def add_parser(sub) -> None:
    """The `tenants render` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> sub.choices["render"].parse_args(['--stack', 'dev', '--out', 'out/dev'])
    Namespace(stack='dev', out=PosixPath('out/dev'))
    """
    parser = sub.add_parser("render", help="write the objects of a stack as YAML (offline, no cluster)")
    parser.add_argument("--stack", required=True, metavar="ENV", help="environment to render")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory: new, empty or an earlier render's (replaced as a whole)")


def run(args: argparse.Namespace) -> int:
    """Write the stack's objects as YAML files under `--out`; exit 0, or 2 when `--out` cannot be replaced.

    >>> run(cli_args("render", "--stack", "dev", "--out", str(scratch / "dev")))
    rendered dev: 3 tenants, 101 objects, 6 files in ...
    0
    >>> sorted(p.name for p in (scratch / "dev").iterdir())
    ['_node-groups.yaml', '_platform.yaml', 'eval.yaml', 'inference.yaml', 'llm-finetune.helm.yaml', 'llm-finetune.yaml']
    """
    started = time.perf_counter()
    try:
        check_output_directory(args.out)
    except OutputError as err:
        print(f"tenants render: {err}", file=sys.stderr)
        return EXIT_USAGE
    environment = load_environment(args.root, args.stack)
    report(environment.warnings)
    try:
        # Both cores where there are two: a large fleet renders in about half the time.
        files, count = render_directory(environment, args.out, os.cpu_count() or 1)
    except (OutputError, OSError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        print(f"tenants render: cannot write {args.out}: {reason}", file=sys.stderr)
        return EXIT_USAGE
    print(
        f"rendered {args.stack}: {len(environment.tenants)} tenants, {count} objects, "
        f"{files} files in {args.out} ({time.perf_counter() - started:.2f} s)"
    )
    return EXIT_OK

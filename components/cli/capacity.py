"""`tenants capacity`: GPU capacity per class and MIG profile against tenant quotas."""

from __future__ import annotations

import argparse
import sys

from ..load import load_environment
from ..review.capacity_report import LEGEND, FORMATTERS, capacity_table
from .common import EXIT_OK, report


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "capacity",
        help="GPU capacity per class and MIG profile against tenant quotas",
        description=f"GPU capacity of one stack against the quotas of its tenants. {LEGEND}.",
    )
    parser.add_argument("--stack", required=True, metavar="ENV", help="environment (stacks/Pulumi.<ENV>.yaml)")
    parser.add_argument("--format", choices=sorted(FORMATTERS), default="text", help="output format (default: text)")


def run(args: argparse.Namespace) -> int:
    # Invalid input raises InvalidInput: `cli.main.main` prints every located problem and exits 1.
    environment = load_environment(args.root, args.stack)
    report(environment.warnings)
    sys.stdout.write(FORMATTERS[args.format](capacity_table(environment)))
    return EXIT_OK

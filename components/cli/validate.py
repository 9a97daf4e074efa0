"""`tenants validate`: check tenant and stack files and print every problem, located."""

from __future__ import annotations

import argparse
import sys

from ..spec.problems import InvalidInput, sorted_problems
from .common import EXIT_INVALID, EXIT_OK, report, stacks


def add_parser(sub) -> None:
    validate = sub.add_parser("validate", help="check tenant and stack files; print every problem")
    validate.add_argument("--stack", action="append", metavar="ENV", help="environment(s) to check (default: every stack)")
    validate.add_argument("--strict", action="store_true", help="treat warnings as errors")


def run(args: argparse.Namespace) -> int:
    from ..load import load_environment
    from ..fleet.shard_stacks import stack_parts
    from .stacks import describe

    envs = stacks(args.root, args.stack)
    if not envs:
        print(f"tenants: no stacks found under {args.root / 'stacks'} (expected Pulumi.<env>.yaml)", file=sys.stderr)
        return EXIT_INVALID
    problems, summaries, shards = [], [], []
    for env in envs:
        try:
            environment = load_environment(args.root, env, strict_warnings=args.strict)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        problems.extend(environment.warnings)
        summaries.append(f"{env}: {len(environment.tenants)} tenant(s) ok")
        if environment.platform.sharding is not None:  # show where each tenant is deployed
            shards.extend(f"  {describe(part)}" for part in stack_parts(environment))
    report(problems)
    if any(p.severity == "error" for p in problems) or (args.strict and problems):
        errors = sum(1 for p in sorted_problems(problems) if p.severity == "error" or args.strict)
        print(f"tenants validate: {errors} error(s)", file=sys.stderr)
        return EXIT_INVALID
    print("; ".join(summaries))
    if shards:
        print("Pulumi stacks of sharded environments (platform first, then shards; tenants pinned or hashed):")
        print("\n".join(shards))
    return EXIT_OK

"""`tenants stacks`: the Pulumi stacks of each environment in deploy order, with their tenants.

The environment's own stack comes first (the platform objects; everything when unsharded), then
its shard stacks (docs/sharding.md). CI builds its deploy matrix from `--format json`.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..fleet.shard_stacks import StackPart, stack_parts
from .common import EXIT_INVALID, EXIT_OK, report, stacks


def add_parser(sub) -> None:
    """The `tenants stacks` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> sub.choices["stacks"].parse_args(['--stack', 'lab'])
    Namespace(stack=['lab'], format='text')
    """
    parser = sub.add_parser(
        "stacks",
        help="the Pulumi stacks of each environment in deploy order (platform, then shards), with their tenants",
    )
    parser.add_argument("--stack", action="append", metavar="ENV", help="environment(s) to list (default: every stack)")
    parser.add_argument("--format", choices=["text", "json"], default="text", help="output format (default: text)")


def describe(part: StackPart) -> str:
    """One line for a stack: what it holds and how its tenants got there.

    >>> describe(StackPart("prod.a", "a", False, ("eval", "inference"), ("eval",)))
    'prod.a: tenants eval (pinned), inference'
    """
    tenants = ", ".join(f"{t} (pinned)" if t in part.pinned else t for t in part.tenants) or "none"
    if part.platform and part.shard is None and part.tenants:
        return f"{part.stack}: platform objects and tenants {tenants}"
    if part.platform:
        return f"{part.stack}: platform objects (tenants are in the shard stacks)"
    return f"{part.stack}: tenants {tenants}"


def as_json(environment_name: str, part: StackPart) -> dict:
    """A stack for the deploy matrix.

    >>> as_json("prod", StackPart("prod", None, True, ()))["role"]
    'environment'
    """
    return {
        "environment": environment_name,
        "stack": part.stack,
        "role": "shard" if part.shard else "environment",
        "shard": part.shard,
        "tenants": list(part.tenants),
        "pinned": list(part.pinned),
    }


def run(args: argparse.Namespace) -> int:
    """Print each environment's stacks in deploy order with their tenants; exit 0, or 1 for invalid input.

    >>> run(cli_args("--root", str(lab_root), "stacks"))
    lab: platform objects (tenants are in the shard stacks)
    lab.blue: tenants audio, speech
    lab.green: tenants robotics, vision (pinned)
    0
    """
    from ..load import load_environment
    from ..spec.problems import InvalidInput, errors_only

    rows, lines, problems = [], [], []
    for env in stacks(args.root, args.stack):
        try:
            environment = load_environment(args.root, env)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        for part in stack_parts(environment):
            rows.append(as_json(env, part))
            lines.append(describe(part))
    if errors_only(problems):
        report(problems)
        print("tenants stacks: fix the errors above (tenants validate lists them)", file=sys.stderr)
        return EXIT_INVALID
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write("".join(f"{line}\n" for line in lines))
    return EXIT_OK

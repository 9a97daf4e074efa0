"""`tenants stacks`: the Pulumi stacks of each environment in deploy order, with their tenants.

The environment's own stack comes first (the platform objects; everything when unsharded), then
its shard stacks (docs/sharding.md), which need only it: the deploy graph (`needs` in `--format
json`, from which CI builds its deploy matrix). `--format operator` writes the same graph as
Pulumi Kubernetes Operator `Stack` resources (docs/operator.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from ..fleet.shard_stacks import StackPart, band, stack_parts
from ..manifests.operator_stacks import OperatorSettings, operator_stacks
from ..output.yaml_output import dump_objects
from ..spec.stack import CONFIG_KEY
from .common import EXIT_INVALID, EXIT_OK, EXIT_USAGE, Stop, fail, report, stacks


def add_parser(sub) -> None:
    """The `tenants stacks` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> parsed = sub.choices["stacks"].parse_args(['--stack', 'lab', '--format', 'operator'])
    >>> parsed.stack, parsed.format, parsed.namespace
    (['lab'], 'operator', 'pulumi-operator')
    """
    parser = sub.add_parser(
        "stacks",
        help="the Pulumi stacks of each environment in deploy order (platform, then shards), with their tenants",
    )
    parser.add_argument("--stack", action="append", metavar="ENV", help="environment(s) to list (default: every stack)")
    parser.add_argument("--format", choices=["text", "json", "operator"], default="text",
                        help="output format (default: text); operator: one pulumi.com/v1 Stack per stack (YAML)")
    operator = parser.add_argument_group("--format operator (docs/operator.md)")
    operator.add_argument("--repo", help="git URL of this project for the operator to clone (default: the `origin` remote)")
    operator.add_argument("--branch", default="main", help="branch the operator deploys (default: main)")
    operator.add_argument("--namespace", default="pulumi-operator", help="namespace of the Stack resources (default: pulumi-operator)")
    operator.add_argument("--organization", help="Pulumi organization (default: the access token's)")
    operator.add_argument("--backend", help="a self-managed state backend URL instead of Pulumi Cloud")
    operator.add_argument("--credentials-secret", default="pulumi-credentials",
                          help="Secret with key accessToken (Pulumi Cloud) or passphrase (--backend) (default: pulumi-credentials)")
    operator.add_argument("--service-account", help="ServiceAccount of the workspace pods")
    operator.add_argument("--image", help="workspace image that runs the Python program")
    operator.add_argument("--no-refresh", dest="refresh", action="store_false",
                          help="skip the refresh before each update (faster; drift on the cluster goes unseen)")


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
    if part.reserved:  # every tenant there is pinned: said once
        return f"{part.stack} (reserved for its pinned tenants): tenants {', '.join(part.tenants) or 'none'}"
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
        "reserved": part.reserved,
        "needs": list(part.needs),
    }


def graph_line(environment_name: str, parts: list[StackPart]) -> str:
    """How an environment's stacks deploy, in one line (after its stacks in `tenants stacks`).

    >>> graph_line("lab", [StackPart("lab", None, True, ()), StackPart("lab.a", "a", False, ("x",), (), ("lab",))])
    'deploy: lab first, then lab.a (shards in any order, concurrently)'
    """
    shards = [p.stack for p in parts if p.needs]
    return f"deploy: {environment_name} first, then {', '.join(shards)} (shards in any order, concurrently)"


def sizes_line(parts: list[StackPart]) -> str:
    """How many tenants each shard holds (hashing spreads them unevenly) and the largest shard:
    a pull request there waits longest for its preview, so pin some of its tenants elsewhere
    (`assignments`) if that wait matters.

    >>> sizes_line([StackPart("lab", None, True, ()), StackPart("lab.a", "a", False, ("x",), (), ("lab",)),
    ...             StackPart("lab.b", "b", False, ("y", "z"), (), ("lab",))])
    'shards: 1-2 tenants each (median 1); largest lab.b (2 tenants), whose previews take longest'
    >>> sizes_line([StackPart("lab", None, True, ()), StackPart("lab.a", "a", False, ("x",), (), ("lab",)),
    ...             StackPart("lab.b", "b", False, ("y", "z", "w"), (), ("lab",))]).split("; ")[-1]
    'outside ±20% of the target (2-2): `tenants moves --stack lab --rebalance` prints the few pins that bring them in'
    """
    shards = [p for p in parts if p.shard is not None]
    sizes = sorted(len(p.tenants) for p in shards)
    largest = min(shards, key=lambda p: (-len(p.tenants), p.stack))
    line = (f"shards: {sizes[0]}-{sizes[-1]} tenants each (median {statistics.median_low(sizes)}); largest "
            f"{largest.stack} ({len(largest.tenants)} tenants), whose previews take longest")
    hashed = [len(p.tenants) for p in shards if not p.reserved]
    low, high = band(sum(hashed), len(hashed)) if hashed else (0, 0)
    if any(not low <= size <= high for size in hashed):
        environment = parts[0].stack
        line += (f"; outside ±20% of the target ({low}-{high}): `tenants moves --stack {environment} --rebalance` "
                 f"prints the few pins that bring them in")
    return line


def origin_url(root) -> str | None:
    """The `origin` remote of the git checkout at `root` (None outside one, or without that remote).

    >>> print(origin_url(git_project))
    None
    """
    done = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


def run(args: argparse.Namespace) -> int:
    """Print each environment's stacks in deploy order with their tenants; exit 0, or 1 for invalid input.

    >>> run(cli_args("--root", str(lab_root), "stacks"))
    lab: platform objects (tenants are in the shard stacks)
    lab.blue: tenants audio, speech
    lab.green: tenants robotics, vision (pinned)
    deploy: lab first, then lab.blue, lab.green (shards in any order, concurrently)
    shards: 2-2 tenants each (median 2); largest lab.blue (2 tenants), whose previews take longest
    0
    """
    from ..load import load_environment
    from ..spec.problems import InvalidInput, errors_only

    try:
        settings = _operator_settings(args)
    except Stop as stop:
        return stop.code
    rows, lines, problems, resources = [], [], [], []
    for env in stacks(args.root, args.stack):
        try:
            environment = load_environment(args.root, env)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        parts = stack_parts(environment)
        for part in parts:
            rows.append(as_json(env, part))
            lines.append(describe(part))
        if len(parts) > 1:
            lines.append(graph_line(env, parts))
            lines.append(sizes_line(parts))
        if settings is not None:
            try:
                resources.extend(operator_stacks(environment, settings))
            except ValueError as err:
                problems.append(environment.platform_doc.problem(("config", CONFIG_KEY, "sharding"), str(err)))
    if errors_only(problems):
        report(problems)
        print("tenants stacks: fix the errors above (tenants validate lists them)", file=sys.stderr)
        return EXIT_INVALID
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, indent=2, sort_keys=True) + "\n")
    elif args.format == "operator":
        sys.stdout.write(dump_objects(resources))
    else:
        sys.stdout.write("".join(f"{line}\n" for line in lines))
    return EXIT_OK


def _operator_settings(args: argparse.Namespace) -> OperatorSettings | None:
    """The operator's settings for `--format operator` (None for the other formats); stops without a repository."""
    if args.format != "operator":
        return None
    repository = args.repo or origin_url(args.root)
    if not repository:
        raise fail("tenants stacks: --format operator needs the git URL the operator clones: give --repo URL "
                   "(no `origin` remote found)", EXIT_USAGE)
    return OperatorSettings(repository, args.branch, args.namespace, args.organization, args.backend,
                            args.credentials_secret, args.service_account, args.image, args.refresh)

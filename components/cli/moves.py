"""`tenants moves`: the `pulumi state move`s that put each tenant into its stack, planned from what
the stacks of one environment hold now (their `pulumi stack export`), so that a deploy never
depends on which commit was deployed before (docs/sharding.md).

Without EXPORT files it asks the `pulumi` CLI (on PATH, or `$PULUMI`), in the project directory,
for the environment's stacks and their exports; `--run` then makes the moves, one tenant at a time.
A move writes the destination's state, then the source's: a move killed between the two leaves
the tenant in both stacks. That is found here and said (the copy in the stack the tenant's file
does not assign it to is stale, components/review/moves/state_moves.py); `--run` removes the stale copy
from that stack's state (export, import; the cluster keeps its objects) before it plans the moves,
so running it again after any failure does what is left (docs/when-things-fail.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from .common import EXIT_INVALID, EXIT_OK


class PulumiCommandError(RuntimeError):
    """The `pulumi` CLI is missing or a command of it failed."""


def add_parser(sub) -> None:
    """The `tenants moves` subcommand.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> add_parser(sub)
    >>> sub.choices["moves"].parse_args(['--stack', 'prod', 'prod.json'])
    Namespace(stack='prod', exports=[PosixPath('prod.json')], format='text', run=False, rebalance=False)
    """
    parser = sub.add_parser(
        "moves",
        help="the `pulumi state move`s that put each tenant into its stack, planned from the stacks' state",
        description=(
            "Read the state of every stack of one environment (its own and its shards') and print a "
            "`pulumi state move` for each tenant that a stack other than its own holds; --run makes them. "
            "Run before any `pulumi up` of the environment."
        ),
    )
    parser.add_argument("--stack", required=True, metavar="ENV", help="the environment whose stacks to read")
    parser.add_argument("exports", nargs="*", type=Path, metavar="EXPORT",
                        help="`pulumi stack export` files, one per stack of ENV (default: ask the pulumi CLI)")
    parser.add_argument("--format", choices=["text", "json"], default="text",
                        help="text: one command per line; json: the moves as `tenants diff` lists them")
    parser.add_argument("--run", action="store_true", help="make the moves with the pulumi CLI (creating missing shard stacks)")
    parser.add_argument("--rebalance", action="store_true",
                        help="instead: the pins (one `sharding.assignments` line to write) that bring every hashed shard "
                        "within ±20%% of the target size, moving no other tenant; reads no state")


def pulumi(root: Path, *argv: str) -> str:
    """Run the `pulumi` CLI in the project directory and return its standard output.

    >>> getfixture("monkeypatch").setenv("PULUMI", "echo")  # a stand-in binary that shows its arguments
    >>> pulumi(root, "stack", "ls", "--json")
    'stack ls --json --non-interactive\\n'
    """
    binary = os.environ.get("PULUMI") or shutil.which("pulumi")
    if not binary:
        raise PulumiCommandError("the pulumi CLI is not on PATH (or set PULUMI to it); or pass `pulumi stack export` files")
    done = subprocess.run([binary, *argv, "--non-interactive"], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PulumiCommandError(f"`pulumi {' '.join(argv)}` failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def existing_stacks(root: Path, environment: str) -> dict[str, str]:
    """The environment's stacks that the backend has: short name -> the name the backend lists.

    >>> listing = '[{"name": "acme/gpu-tenancy/lab.blue"}, {"name": "acme/gpu-tenancy/prod"}]'
    >>> _ = (scratch / "pulumi").write_text(f"#!/bin/sh\\necho '{listing}'\\n"); (scratch / "pulumi").chmod(0o755)
    >>> getfixture("monkeypatch").setenv("PULUMI", str(scratch / "pulumi"))  # a stand-in CLI that lists two stacks
    >>> existing_stacks(root, "lab")
    {'lab.blue': 'acme/gpu-tenancy/lab.blue'}
    """
    from ..spec.sharding import split_stack_name

    listed = [row["name"] for row in json.loads(pulumi(root, "stack", "ls", "--json") or "[]")]
    short = {name.rsplit("/", 1)[-1]: name for name in listed}
    return {s: n for s, n in sorted(short.items()) if split_stack_name(s)[0] == environment}


def _read_exports(args: argparse.Namespace, existing: dict[str, str] | None) -> list[tuple[str, object]]:
    """`(source, document)` of each export: the files given, else each existing stack's from the CLI."""
    from ..review.moves.state_moves import StateExportError

    if not args.exports:
        return [(f"pulumi stack export --stack {name}", json.loads(pulumi(args.root, "stack", "export", "--stack", name)))
                for name in (existing or {}).values()]
    documents = []
    for path in args.exports:
        try:
            documents.append((str(path), json.loads(path.read_text())))
        except OSError as exc:
            raise StateExportError(f"{path}: cannot read it ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise StateExportError(f"{path}:{exc.lineno}: not JSON ({exc.msg}); pass `pulumi stack export` files") from None
    return documents


def run(args: argparse.Namespace) -> int:
    """Print (or with `--run` make) the `pulumi state move`s of `--stack`; exit 0, or 1 for an unreadable state.

    >>> import json
    >>> _ = (scratch / "blue.json").write_text(json.dumps({"version": 3, "deployment": {"resources": [{"type": "gpu-tenancy:index:Tenant",
    ...     "urn": "urn:pulumi:lab.blue::gpu-tenancy::gpu-tenancy:index:Fleet$gpu-tenancy:index:Tenant::vision"}]}}))
    >>> run(cli_args("--root", str(lab_root), "moves", "--stack", "lab", str(scratch / "blue.json")))
    pulumi state move --source lab.blue --dest lab.green --yes 'urn:pulumi:lab.blue::gpu-tenancy::gpu-tenancy:index:Fleet$gpu-tenancy:index:Tenant::vision'
    0
    """
    from ..load import load_environment
    from ..review.moves.state_moves import stale_copies
    from ..review.moves.stack_changes import move_warning
    from ..review.moves.state_moves import StateExportError, planned_moves

    environment = load_environment(args.root, args.stack)
    if args.rebalance:
        sys.stdout.write(rebalance_text(environment))
        return EXIT_OK
    existing: dict[str, str] | None = None
    try:
        # One listing serves both the exports to read and the moves' destinations.
        if args.run or not args.exports:
            existing = existing_stacks(args.root, environment.name)
        deployed, documents = _deployed(args, existing)
        stale = stale_copies(environment, deployed)
        for copy in stale:
            print(f"tenants moves: {stale_message(copy, environment.name)}", file=sys.stderr)
        if stale and not args.run:
            return EXIT_INVALID
        for copy in stale:
            _remove_stale_copy(args.root, copy, documents[copy["stale"]], existing or {})
            del deployed[copy["stale"]][copy["tenant"]]
        moves = planned_moves(environment, deployed)
    except (StateExportError, PulumiCommandError) as exc:
        print(f"tenants moves: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if args.format == "json":
        sys.stdout.write(json.dumps(moves, indent=2, sort_keys=True) + "\n")
    else:
        for move in moves:
            print(f"# {move_warning(move)}", file=sys.stderr)
            print(move["command"])
    if not moves:
        print(f"tenants moves: every tenant of {environment.name} is in its own stack's state "
              f"({len(deployed)} stack(s) read); nothing to move", file=sys.stderr)
    if args.run and moves:
        return _run_moves(args.root, environment.name, moves, dict(existing or {}))
    return EXIT_OK


def _deployed(args: argparse.Namespace, existing: dict[str, str] | None) -> tuple[dict[str, dict[str, str]], dict[str, object]]:
    """`{stack: {tenant: urn}}` and `{stack: export}` of every export read (empty states left out)."""
    from ..review.moves.state_moves import StateExportError, deployed_tenants

    deployed: dict[str, dict[str, str]] = {}
    documents: dict[str, object] = {}
    for source, document in _read_exports(args, existing):
        stack, tenants = deployed_tenants(document, source)
        if stack is None:
            continue
        if stack in deployed:
            raise StateExportError(f"{source}: a second export of stack {stack}; pass one file per stack")
        deployed[stack], documents[stack] = tenants, document
    return deployed, documents


def stale_message(copy: dict[str, str], environment: str) -> str:
    """What a half-done `pulumi state move` left, and the one command that repairs it.

    >>> print(stale_message({"tenant": "vision", "stale": "lab.green", "kept": "lab.blue", "urn": "u"}, "lab"))
    tenant vision is in the state of lab.blue and lab.green: a `pulumi state move` stopped half-way; the copy in lab.green is stale (the tenant's stack is lab.blue); `tenants moves --stack lab --run` removes it from lab.green's state (the cluster keeps the objects)
    """
    stacks = " and ".join(sorted((copy["stale"], copy["kept"])))
    return (f"tenant {copy['tenant']} is in the state of {stacks}: a `pulumi state move` stopped half-way; "
            f"the copy in {copy['stale']} is stale (the tenant's stack is {copy['kept']}); "
            f"`tenants moves --stack {environment} --run` removes it from {copy['stale']}'s state (the cluster keeps the objects)")


def _remove_stale_copy(root: Path, copy: dict[str, str], document: object, existing: dict[str, str]) -> None:
    """`pulumi stack import` of the stale stack's export without the tenant's resources."""
    import tempfile

    from ..review.moves.state_moves import without_resource_tree

    cleaned, removed = without_resource_tree(document, copy["urn"])
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cleaned, f)
    try:
        pulumi(root, "stack", "import", "--stack", existing.get(copy["stale"], copy["stale"]), "--file", f.name)
    finally:
        os.unlink(f.name)
    print(f"tenants moves: removed the stale copy of {copy['tenant']} from {copy['stale']}'s state "
          f"({removed} resources; the cluster keeps them)", file=sys.stderr)


def _run_moves(root: Path, environment: str, moves: list[dict], existing: dict[str, str]) -> int:
    done = 0
    try:
        for move in moves:
            if move["to"] not in existing:
                # `pulumi state move` needs an existing destination; a new shard's stack starts empty.
                pulumi(root, "stack", "init", move["to"])
                existing[move["to"]] = move["to"]
            pulumi(root, "state", "move", "--source", existing.get(move["from"], move["from"]), "--dest", existing[move["to"]],
                   "--yes", move["urn"])
            done += 1
            print(f"tenants moves: moved {move['tenant']} from {move['from']} to {move['to']}", file=sys.stderr)
    except PulumiCommandError as exc:
        print(f"tenants moves: {exc}\ntenants moves: {done} of {len(moves)} moves made; running "
              f"`tenants moves --stack {environment} --run` again does the rest (and repairs a move the failure cut half-way)", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


def rebalance_text(environment) -> str:
    """What `tenants moves --rebalance` prints: the hashed shards' sizes and band, and the one
    `sharding.assignments` line (the pins there and the new ones) that brings them within it.

    >>> print(rebalance_text(lab), end="")
    lab: shards blue 2, green 2 tenants (target 2 ±20%: 2-2); every shard is within it, nothing to pin
    """
    from ..fleet.shard_stacks import environment_rebalance
    from ..spec.yaml_source import yaml_text
    from ..validate.platform import platform_path

    plan = environment_rebalance(environment)
    if plan is None:
        return f"{environment.name}: not sharded (one stack holds every tenant); nothing to balance\n"
    sizes = ", ".join(f"{shard} {size}" for shard, size in plan.before.items())
    head = (f"{environment.name}: shards {sizes} tenants (target {float(plan.target):.3g} ±20%: {plan.low}-{plan.high})")
    if plan.balanced or not plan.pins:
        tail = "every shard is within it, nothing to pin" if plan.balanced else "no pin of an unpinned tenant brings them closer"
        return f"{head}; {tail}\n"
    sharding = environment.platform.sharding
    doc = environment.platform_doc
    where = platform_path("sharding", "assignments") if sharding.assignments else platform_path("sharding")
    line = doc.position(where)[0]
    pins = {**sharding.assignments, **plan.pins}
    after = ", ".join(f"{shard} {size}" for shard, size in plan.after.items())
    return (f"{head}; {len(plan.pins)} pin(s) move {', '.join(f'{t} to {s}' for t, s in plan.pins.items())} "
            f"(then {after}), and no other tenant:\n"
            f"{doc.file}:{line}: sharding.assignments: {yaml_text(pins)}\n"
            f"then `tenants diff` lists each move, and the deploy's `tenants moves --stack {environment.name} --run` makes them\n")

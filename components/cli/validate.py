"""The file-format commands of `tenants`: `validate` (check tenant and stack files and print every
problem, located) and `migrate` (rewrite files of an older format to the current one, in place).

Each command is a class with `add_parser` and `run`, as `main.COMMANDS` expects of a command.
`migrate` reads every file first; if one cannot be read, nothing is written. Choices left to a
person are printed as `file:line: field: what to decide` and make the exit code 1 (docs/migrating.md).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..spec.problems import InvalidInput, Problem, sorted_problems
from .common import EXIT_INVALID, EXIT_OK, Stop, fail, report, stacks


def name_stacks(found: dict[str, list[Problem]]) -> list[Problem]:
    """Every stack's problems, each naming the stacks it holds in when that is not all of them: a
    tenant file checked against three inventories may be wrong against one only.

    >>> p = Problem("tenants/a.yaml", 3, 1, "gpu.classes[0]", "unknown GPU class 'l4'")
    >>> [str(x) for x in sorted_problems(name_stacks({"dev": [], "prod": [p], "staging": [p]}))]
    ["tenants/a.yaml:3:1: gpu.classes[0]: unknown GPU class 'l4' (stacks prod, staging)"]
    >>> [str(x) for x in sorted_problems(name_stacks({"dev": [p], "prod": [p]}))]
    ["tenants/a.yaml:3:1: gpu.classes[0]: unknown GPU class 'l4'"]
    """
    where: dict[Problem, set[str]] = {}
    for env, problems in found.items():
        for problem in problems:
            where.setdefault(replace(problem, stack=""), set()).add(env)
    everywhere = set(found)
    return [problem if problem.stack or where[replace(problem, stack="")] == everywhere or _stack_file(problem.file, env)
            else replace(problem, stack=env) for env, problems in found.items() for problem in problems]


def _stack_file(file: str, env: str) -> bool:
    return Path(file).name == f"Pulumi.{env}.yaml"   # the file names its stack already


class Validate:
    """`tenants validate`: every problem of the tenant and stack files, located.

    >>> sub = argparse.ArgumentParser().add_subparsers()
    >>> Validate.add_parser(sub)
    >>> sub.choices["validate"].parse_args(['--strict'])
    Namespace(stack=None, strict=True)
    >>> Validate.run(cli_args("validate", "--stack", "prod"))
    prod: 3 tenant(s) ok
    0
    """

    @staticmethod
    def add_parser(sub) -> None:
        validate = sub.add_parser("validate", help="check tenant and stack files; print every problem")
        validate.add_argument("--stack", action="append", metavar="ENV", help="environment(s) to check (default: every stack)")
        validate.add_argument("--strict", action="store_true", help="treat warnings as errors")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        from ..load import load_environment
        from ..fleet.shard_stacks import stack_parts
        from .stacks import describe
        from ..review.object_limits import object_size_problems

        envs = stacks(args.root, args.stack)
        if not envs:
            print(f"tenants: no stacks found under {args.root / 'stacks'} (expected Pulumi.<env>.yaml)", file=sys.stderr)
            return EXIT_INVALID
        found: dict[str, list] = {}
        summaries, shards, groups = [], [], []
        for env in envs:
            try:
                environment = load_environment(args.root, env, strict_warnings=args.strict)
            except InvalidInput as err:
                found[env] = list(err.problems)
                continue
            # Objects the API server would refuse for their size: an error here, not at `up`.
            found[env] = list(environment.warnings) + object_size_problems(environment)
            left_out = [t for t in environment.disabled_tenants if environment.platform.leaves_out_on_purpose(t)]
            summaries.append(f"{env}: {len(environment.tenants)} tenant(s) ok"
                             + (f", {len(left_out)} left out on purpose ({', '.join(left_out)})" if left_out else ""))
            if environment.platform.sharding is not None:  # show where each tenant is deployed
                shards.extend(f"  {describe(part)}" for part in stack_parts(environment))
            groups.extend(_node_group_text(env, environment))
        problems = name_stacks(found)
        report(problems)
        if any(p.severity == "error" for p in problems) or (args.strict and problems):
            errors = sum(1 for p in sorted_problems(problems) if p.severity == "error" or args.strict)
            print(f"tenants validate: {errors} error(s)", file=sys.stderr)
            return EXIT_INVALID
        print("; ".join(summaries))
        if shards:
            print("Pulumi stacks of sharded environments (platform first, then shards; tenants pinned or hashed):")
            print("\n".join(shards))
        if groups:
            print("Autoscaled pools: what each node group's definition (outside this project) must set on its nodes:")
            print("\n".join(groups))
        return EXIT_OK


def _node_group_text(env: str, environment) -> list[str]:
    """`  <env>/<pool>:` and its requirement lines, for every autoscaled pool of the environment."""
    from ..manifests.gpu_nodes import node_group_requirements
    from ..review.diff_format import node_group_lines

    lines = []
    for pool, requires in node_group_requirements(environment.facts).items():
        lines.append(f"  {env}/{pool}:")
        lines += [f"    {line}" for line in node_group_lines(requires)]
    return lines


class Migrate:
    """`tenants migrate`: older tenant and stack files rewritten to the current format.

    >>> Migrate.run(cli_args("migrate", "--check"))
    tenants migrate: every file is in the current format (gpu-tenancy.dev/v1alpha2)
    0
    """

    @staticmethod
    def add_parser(sub) -> None:
        migrate = sub.add_parser(
            "migrate", help="rewrite older tenant and stack files to the current format, in place; report what to decide"
        )
        migrate.add_argument(
            "files", nargs="*", type=Path, metavar="FILE",
            help="tenant or stack files (default: every tenants/*.yaml and stacks/Pulumi.*.yaml)",
        )
        migrate.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change or holds a choice")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        from ..authoring import migrate

        paths = list(args.files) or _project_files(args.root)
        try:
            results = _migrated(args.root, paths, _texts(args.root, paths))
        except Stop as stop:
            return stop.code
        changed = [(path, result) for path, result in results if result.changed]
        for path, result in changed:
            if not args.check:
                path.write_text(result.text, encoding="utf-8")
            verb = "would migrate" if args.check else "migrated"
            print(f"{result.file}: {verb} {result.from_version} -> {migrate.API_VERSION}")
        choices = sorted(choice for _, result in results for choice in result.choices)
        for choice in choices:
            print(choice, file=sys.stderr)
        if choices:
            print(f"tenants migrate: {len(choices)} choice(s) to decide: replace each DECIDE, then run tenants validate",
                  file=sys.stderr)
            return EXIT_INVALID
        if args.check and changed:
            return EXIT_INVALID
        if not changed:
            print(f"tenants migrate: every file is in the current format ({migrate.API_VERSION})")
        return EXIT_OK


def _texts(root: Path, paths: list[Path]) -> dict[Path, str]:
    """The text of the files to migrate and of every tenant file (their dedicated pools move into
    stack files); stops when a file asked for cannot be read."""
    from ..load import tenant_paths
    from ..spec.yaml_source import read_text

    texts, problems = {}, []
    for path in [*paths, *(p for p in tenant_paths(root) if p not in paths)]:
        try:
            texts[path] = read_text(path, _display(path, root))
        except InvalidInput as err:
            if path in paths:
                problems.extend(err.problems)
    if problems:
        report(problems)
        raise Stop(EXIT_INVALID)
    return texts


def _migrated(root: Path, paths: list[Path], texts: dict[Path, str]) -> list[tuple[Path, Any]]:
    """(path, its migration) of each file; stops, writing nothing, when any cannot be read as YAML."""
    from ..authoring import migrate
    from ..load import tenant_paths

    pools = migrate.dedicated_pools((_display(p, root), texts[p]) for p in tenant_paths(root))
    results, unreadable = [], []
    for path in paths:
        shown = _display(path, root)
        try:
            if _is_stack(path):
                results.append((path, migrate.migrate_stack_text(texts[path], shown, pools)))
            else:
                results.append((path, migrate.migrate_tenant_text(texts[path], shown)))
        except migrate.UnreadableFile as err:
            unreadable.append(str(err))
    if unreadable:
        print("\n".join(unreadable), file=sys.stderr)
        raise fail(f"tenants migrate: {len(unreadable)} file(s) not readable; nothing written")
    return results


def _project_files(root: Path) -> list[Path]:
    from ..load import shard_stack_files, stack_file, stack_names, tenant_paths

    names = sorted([*stack_names(root), *shard_stack_files(root)])
    return [*tenant_paths(root), *(stack_file(root, name) for name in names)]


def _is_stack(path: Path) -> bool:
    return path.name.startswith("Pulumi.") or path.parent.name == "stacks"


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)

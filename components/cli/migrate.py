"""`tenants migrate`: rewrite tenant and stack files of an older format to the current one, in place.

Every file is migrated in memory first; if one cannot be read, nothing is written. Choices left to
a person are printed as `file:line: what to decide` and make the exit code 1 (docs/migrating.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..spec.problems import InvalidInput
from .common import EXIT_INVALID, EXIT_OK, report


def add_parser(sub) -> None:
    migrate = sub.add_parser(
        "migrate", help="rewrite older tenant and stack files to the current format, in place; report what to decide"
    )
    migrate.add_argument(
        "files", nargs="*", type=Path, metavar="FILE",
        help="tenant or stack files (default: every tenants/*.yaml and stacks/Pulumi.*.yaml)",
    )
    migrate.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change or holds a choice")


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


def run(args: argparse.Namespace) -> int:
    from ..authoring import migrate
    from ..load import tenant_paths
    from ..spec.yaml_source import read_text

    root = args.root
    paths = list(args.files) or _project_files(root)
    texts, problems = {}, []
    for path in [*paths, *(p for p in tenant_paths(root) if p not in paths)]:
        try:
            texts[path] = read_text(path, _display(path, root))
        except InvalidInput as err:
            if path in paths:
                problems.extend(err.problems)
    if problems:
        report(problems)
        return EXIT_INVALID
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
        print(f"tenants migrate: {len(unreadable)} file(s) not readable; nothing written", file=sys.stderr)
        return EXIT_INVALID
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

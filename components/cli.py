"""The `tenants` command: validate, schema, new (and later render, diff, capacity).

Exit codes: 0 ok, 1 invalid input (every problem printed to stderr, nothing written), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from .spec.problems import InvalidInput, sorted_problems

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(func: Callable[[argparse.Namespace], int]):
        _COMMANDS[name] = func
        return func

    return register


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

    validate = sub.add_parser("validate", help="check tenant and stack files; print every problem")
    validate.add_argument("--stack", action="append", metavar="ENV", help="environment(s) to check (default: every stack)")
    validate.add_argument("--strict", action="store_true", help="treat warnings as errors")

    schema = sub.add_parser("schema", help="print the JSON Schema of tenant files (or stack config)")
    schema.add_argument("--kind", choices=["tenant", "stack"], default="tenant")
    schema.add_argument("--out", type=Path, help="write to this file instead of stdout")

    new = sub.add_parser("new", help="write a commented tenant file for a new team")
    new.add_argument("name", help="tenant name (DNS-1123 label); also its namespace")
    new.add_argument("--owner-group", action="append", required=True, metavar="GROUP", help="identity-provider group of the owners (repeatable)")
    new.add_argument("--developer-group", action="append", default=[], metavar="GROUP")
    new.add_argument("--viewer-group", action="append", default=[], metavar="GROUP")
    new.add_argument("--display-name", help="human-readable name (default: from NAME)")
    new.add_argument("--cost-center", default="unassigned", help="cost centre label value")
    new.add_argument("--email", help="contact email")
    new.add_argument("--gpu-class", action="append", default=[], metavar="CLASS", help="allowed GPU class (repeatable)")
    new.add_argument("--force", action="store_true", help="overwrite an existing file")
    new.add_argument("--stdout", action="store_true", help="print instead of writing tenants/NAME.yaml")

    for extra in _EXTRA_PARSERS:
        extra(sub)
    return parser


_EXTRA_PARSERS: list[Callable] = []


def _stacks(root: Path, wanted: Sequence[str] | None) -> list[str]:
    from .spec.load import stack_names

    return list(wanted) if wanted else stack_names(root)


def report(problems, stream=None) -> None:
    stream = stream or sys.stderr
    for problem in sorted_problems(problems):
        print(problem, file=stream)


@command("validate")
def _validate(args: argparse.Namespace) -> int:
    from .spec.load import load_environment

    envs = _stacks(args.root, args.stack)
    if not envs:
        print(f"tenants: no stacks found under {args.root / 'stacks'} (expected Pulumi.<env>.yaml)", file=sys.stderr)
        return EXIT_INVALID
    problems, summaries = [], []
    for env in envs:
        try:
            environment = load_environment(args.root, env, strict_warnings=args.strict)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        problems.extend(environment.warnings)
        summaries.append(f"{env}: {len(environment.tenants)} tenant(s) ok")
    report(problems)
    if any(p.severity == "error" for p in problems) or (args.strict and problems):
        errors = sum(1 for p in set(problems) if p.severity == "error" or args.strict)
        print(f"tenants validate: {errors} error(s)", file=sys.stderr)
        return EXIT_INVALID
    print("; ".join(summaries))
    return EXIT_OK


@command("schema")
def _schema(args: argparse.Namespace) -> int:
    from .spec.schema import stack_schema, tenant_schema

    schema = tenant_schema() if args.kind == "tenant" else stack_schema()
    text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK


@command("new")
def _new(args: argparse.Namespace) -> int:
    from .spec.scaffold import new_tenant_file

    try:
        text = new_tenant_file(
            args.name,
            owner_groups=args.owner_group,
            developer_groups=args.developer_group,
            viewer_groups=args.viewer_group,
            display_name=args.display_name,
            cost_center=args.cost_center,
            email=args.email,
            gpu_classes=args.gpu_class,
        )
    except InvalidInput as err:
        report(err.problems)
        return EXIT_INVALID
    if args.stdout:
        sys.stdout.write(text)
        return EXIT_OK
    path = args.root / "tenants" / f"{args.name}.yaml"
    if path.exists() and not args.force:
        print(f"tenants new: {path} exists; use --force to overwrite", file=sys.stderr)
        return EXIT_INVALID
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}; next: tenants validate, then open a pull request")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `tenants` console script and `python -m components`.

    >>> main(["validate", "--stack", "dev"])  # doctest: +SKIP
    0
    """
    from . import commands  # noqa: F401  (registers render, diff, capacity when present)

    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    from .spec.load import fewer_gc_passes

    try:
        with fewer_gc_passes():  # commands build many long-lived objects (docs/performance.md)
            return _COMMANDS[args.command](args)
    except InvalidInput as err:
        report(err.problems)
        return EXIT_INVALID
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

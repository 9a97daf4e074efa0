"""`tenants new`: write a commented, valid tenant file for a new team."""

from __future__ import annotations

import argparse
import sys

from ..model.problems import InvalidInput
from .common import EXIT_INVALID, EXIT_OK, report


def add_parser(sub) -> None:
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


def run(args: argparse.Namespace) -> int:
    from ..model.scaffold import new_tenant_file

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

"""`tenants schema`: the JSON Schema of tenant or stack files, generated from the models."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .common import EXIT_OK


def add_parser(sub) -> None:
    schema = sub.add_parser("schema", help="print the JSON Schema of tenant files (or stack config)")
    schema.add_argument("--kind", choices=["tenant", "stack"], default="tenant")
    schema.add_argument("--out", type=Path, help="write to this file instead of stdout")


def run(args: argparse.Namespace) -> int:
    from ..spec.json_schema import stack_schema, tenant_schema

    schema = tenant_schema() if args.kind == "tenant" else stack_schema()
    text = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK

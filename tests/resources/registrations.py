"""The registrations of every example stack as URN -> digest of inputs and options, for golden files.

`python -m tests.resources.registrations` rewrites tests/resources/golden/*.json. Regenerate only
when a change means to alter what existing stacks see, and say why in the commit: a changed URN
is a delete and create on every deployed stack, a changed digest an update.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from components.load import stack_names
from tools.pulumi_mocks import REPO, normalise, run_program

GOLDEN = Path(__file__).resolve().parent / "golden"


def _plain(value):
    # Assets (the vCluster values file) are objects whose repr holds a memory address: use the text.
    for attribute in ("text", "path", "uri"):
        if isinstance(getattr(value, attribute, None), str):
            return {type(value).__name__: getattr(value, attribute)}
    return str(value)


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=_plain).encode()).hexdigest()[:16]


def registrations_by_urn(stack: str, root: Path = REPO) -> dict[str, dict[str, str]]:
    """URN -> {type, inputs digest, options digest} of everything the program registers for `stack`."""
    registrations, _ = run_program(stack, root)
    table = {}
    for registration in registrations:
        # Dependencies are checked by tests/resources/test_fleet.py; they are not options a diff shows.
        # A read (the program's StackReference to its own stack, each inventory Node) is keyed by its type
        # and name: the engine only reads it, so it has no options a diff shows.
        options = {} if registration.read else {k: v for k, v in registration.options.items() if k not in ("provider", "dependencies")}
        key = f"read:{registration.type}::{registration.name}" if registration.read else registration.urn
        table[key] = {
            "type": registration.type,
            "inputs": _digest(normalise(registration.inputs)),
            "options": _digest(options),
        }
    return dict(sorted(table.items()))


def main(root: Path = REPO) -> None:
    GOLDEN.mkdir(exist_ok=True)
    for stack in stack_names(root):
        path = GOLDEN / f"{stack}.json"
        path.write_text(json.dumps(registrations_by_urn(stack, root), indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO)

"""A 30-tenant sharded project, generated: tools/synthetic.py's fleet (stack `bench`) split across
three hashed shards and one shard reserved for its two pinned tenants (docs/sharding.md).

Generated rather than written out, so that it stays as valid as the synthetic fleet it is made
of; tests/fixtures/sharded is the small hand-written one.
"""

from __future__ import annotations

from pathlib import Path

from tools.synthetic import STACK, dump, stack_data, write_project

COUNT = 30
HASHED = ["a", "b", "c"]
RESERVED = "saas"
PINNED = {"team-00003": RESERVED, "team-00017": RESERVED}


def write_sharded_fleet(root: Path) -> Path:
    """Write the project under `root`; return `root`."""
    write_project(root, COUNT)
    data = stack_data(COUNT)
    data["config"]["gpu-tenancy:platform"]["sharding"] = {
        "shards": [*HASHED, RESERVED], "assignments": dict(PINNED), "reserved": [RESERVED],
    }
    (root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(dump(data), encoding="utf-8")
    return root

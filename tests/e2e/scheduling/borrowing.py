"""A copy of the example project in which tenants borrow: the Kueue lane's `borrowing_stack` and the
KAI lane's borrowing project start from it."""

from __future__ import annotations

import shutil
from pathlib import Path

from tools.control_plane import REPO_ROOT


# A copy of the example where eval lends to a new tenant on the shared A100 pool: cohort `shared`
# for every prod tenant, eval's A100 quota lowered to 12 and `research` holding the other 8 (the
# pool holds 16 x overcommit 1.25 = 20), neither with a borrowingLimit.
RESEARCH = """apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: research
displayName: Research
costCenter: cc-9000
quota:
  cpu: {requests: "32", limits: "64"}
  memory: {requests: 128Gi, limits: 256Gi}
  gpu: {a100: 8}
gpu:
  classes: [a100]
"""


def write_borrowing_project(root: Path) -> Path:
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    stack = root / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    assert text.count("    scheduler: kueue\n") == 1
    stack.write_text(text.replace("    scheduler: kueue\n", "    scheduler: kueue\n    queues:\n      defaultCohort: shared\n"))
    eval_file = root / "tenants" / "eval.yaml"
    text = eval_file.read_text()
    assert text.count("      gpu: {a100: 20}\n") == 1
    eval_file.write_text(text.replace("      gpu: {a100: 20}\n", "      gpu: {a100: 12}\n"))
    (root / "tenants" / "research.yaml").write_text(RESEARCH)
    return root

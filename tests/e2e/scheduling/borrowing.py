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


# A copy of the example with spare capacity: cohort `shared` for every prod tenant (so it is the
# spare cohort), a shared pool of 16 H100s appended to the stack that no tenant holds quota on, and
# `research` listing class h100 with no GPU quota of its own: it can run on the new pool only by
# borrowing the cohort's spare.
SPARE_POOL = """      h100-spare:
        gpuClass: h100
        gpusPerNode: 8
        nodes: [gpu-h100-09, gpu-h100-10]
"""
SPARE_RESEARCH = """apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: research
displayName: Research
costCenter: cc-9000
quota:
  cpu: {requests: "32", limits: "64"}
  memory: {requests: 128Gi, limits: 256Gi}
gpu:
  classes: [h100]
"""


def write_spare_project(root: Path, *, mig_lab: bool = False) -> Path:
    """The spare-capacity copy; `mig_lab` adds the two MIG pools and tenants of `MIG_LAB_POOLS`."""
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    stack = root / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    assert text.count("    scheduler: kueue\n") == 1 and text.count("        migLayout: eval-mix\n") == 1
    text = text.replace("    scheduler: kueue\n", "    scheduler: kueue\n    queues:\n      defaultCohort: shared\n")
    pools = SPARE_POOL + (MIG_LAB_POOLS if mig_lab else "")
    text = text.replace("        migLayout: eval-mix\n", "        migLayout: eval-mix\n" + pools)
    if mig_lab:
        assert text.count("    migLayouts:\n") == 1 and text.count("    gpuClasses:\n") == 1
        text = text.replace("    migLayouts:\n", "    migLayouts:\n" + MIG_LAB_LAYOUTS)
        text = text.replace("    gpuClasses:\n", "    gpuClasses:\n" + MIG_LAB_CLASS)
        for name in ("alpha", "beta"):
            (root / "tenants" / f"{name}.yaml").write_text(MIG_LAB_TENANT.format(name=name, title=name.title()))
    stack.write_text(text)
    (root / "tenants" / "research.yaml").write_text(SPARE_RESEARCH)
    return root


# Two MIG pools of a class only alpha and beta use, listed west before east (their names sort the
# other way): alpha and beta hold 14 1g.10gb slices each, which fit on either pool. Their quota
# fills mig-west, the first listed; the plain name-ordered flow put both on mig-east instead, and
# then moved beta to mig-west when mig-east's layout dropped to 14 slices (`shrink_mig_east`):
# beta's running workloads on mig-east became borrowed.
MIG_LAB_CLASS = """      a100-lab:
        model: A100-80GB
        product: NVIDIA-A100-SXM4-80GB
        memory: 80Gi
        sharing: mig
        mig:
          strategy: mixed
"""
MIG_LAB_POOLS = """      mig-west:
        gpuClass: a100-lab
        gpusPerNode: 8
        nodes: [gpu-a100-05]
        migLayout: lab-1g
      mig-east:
        gpuClass: a100-lab
        gpusPerNode: 8
        nodes: [gpu-a100-06]
        migLayout: lab-1g
"""
MIG_LAB_LAYOUTS = """      lab-1g:
        - devices: all
          profiles: {1g.10gb: 7}
      lab-mix:
        - devices: [0, 1]
          profiles: {1g.10gb: 7}
        - devices: [2, 3, 4, 5, 6, 7]
          profiles: {3g.40gb: 2}
"""
MIG_LAB_TENANT = """apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: {name}
displayName: {title}
costCenter: cc-9001
quota:
  cpu: {{requests: "16", limits: "32"}}
  memory: {{requests: 64Gi, limits: 128Gi}}
  mig: {{1g.10gb: 14}}
gpu:
  classes: [a100-lab]
"""


def shrink_mig_east(root: Path) -> None:
    """The MIG layout change: mig-east goes from 56 1g.10gb slices to 14 (and 12 3g.40gb)."""
    stack = root / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    old = "        nodes: [gpu-a100-06]\n        migLayout: lab-1g\n"
    assert text.count(old) == 1
    stack.write_text(text.replace(old, "        nodes: [gpu-a100-06]\n        migLayout: lab-mix\n"))

"""`tenants diff` on a few real changes of a copy of the example project, as golden files.

Each scenario edits a git repository holding the example's tenants and stacks and prints the diff
against its one commit in every format; the base commit's hash is written as BASE, so the bytes
depend on the project and the code only. `python -m tests.review.diff_outputs` rewrites
tests/review/golden/; regenerate only when a change means to alter what `tenants diff` prints,
and say why in the commit (tests/review/test_diff_outputs.py compares byte for byte).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

from components.cli import main
from tests.project_edits import rename_llm_finetune

REPO = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent / "golden"
FORMATS = {
    "text": (),
    "all-fields.text": ("--all-fields",),
    "markdown": ("--format", "markdown"),
    "json": ("--format", "json"),
}

VISION = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: vision
displayName: Vision
costCenter: cc-7
access:
  owners:
    groups: [vision-leads]
quota:
  cpu: {requests: "8", limits: "16"}
  memory: {requests: 32Gi, limits: 64Gi}
  mig: {1g.10gb: 2}
network:
  egress:
    - cidr: 0.0.0.0/0
      except: [10.0.0.0/8]
      ports: [{port: 443}]
gpu:
  classes: [a100-mig]
"""


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def lower_a_quota(root: Path) -> None:
    """eval's prod GPUs and MIG slices go down (quota-lowered warnings, capacity rows)."""
    _replace(root / "tenants" / "eval.yaml", "gpu: {a100: 20}\n      mig: {1g.10gb: 48, 3g.40gb: 16}",
             "gpu: {a100: 12}\n      mig: {1g.10gb: 40, 3g.40gb: 16}")


def add_a_tenant(root: Path) -> None:
    """A new tenant on MIG slices that may send traffic anywhere."""
    (root / "tenants" / "vision.yaml").write_text(VISION)


def remove_a_tenant(root: Path) -> None:
    """inference's file goes (its namespaces are retained, not deleted)."""
    (root / "tenants" / "inference.yaml").unlink()
    _replace(root / "stacks" / "Pulumi.dev.yaml", "tenants: [llm-finetune, inference, eval]", "tenants: [llm-finetune, eval]")


def decommission_a_tenant(root: Path) -> None:
    """llm-finetune is decommissioned (its namespaces become deletable)."""
    path = root / "tenants" / "llm-finetune.yaml"
    text = path.read_text()
    path.write_text(text.replace("name: llm-finetune\n",
                                 "name: llm-finetune\nlifecycle: decommissioned\ndecommission: {confirm: llm-finetune}\n", 1))


def change_a_pool(root: Path) -> None:
    """prod's serving pool gains a node and its MIG layout is re-cut (nodes to drain)."""
    stack = root / "stacks" / "Pulumi.prod.yaml"
    _replace(stack, "nodes: [gpu-h100-06, gpu-h100-07, gpu-h100-08]", "nodes: [gpu-h100-06, gpu-h100-07, gpu-h100-08, gpu-h100-09]")
    _replace(stack, "- devices: [0, 1, 2, 3]\n          profiles: {1g.10gb: 7}\n        - devices: [4, 5, 6, 7]\n",
             "- devices: [4, 5, 6, 7]\n          profiles: {1g.10gb: 7}\n        - devices: [0, 1, 2, 3]\n")


# name: (edit, extra arguments); a decommission changes every object of the tenant, so one stack of it is enough.
SCENARIOS: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "unchanged": (lambda root: None, ()),
    "quota-lowered": (lower_a_quota, ()),
    "tenant-added": (add_a_tenant, ()),
    "tenant-removed": (remove_a_tenant, ()),
    "tenant-decommissioned": (decommission_a_tenant, ("--stack", "dev")),
    "pool-changed": (change_a_pool, ()),
    "tenant-renamed": (rename_llm_finetune, ("--stack", "staging")),
}


def _git(root: Path, *args: str) -> str:
    # Fixed identities and dates: the same tree gives the same commit.
    env = {**os.environ, "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
    done = subprocess.run(["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", *args],
                          cwd=root, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def outputs(scenario: str, scratch: Path) -> dict[str, str]:
    """What `tenants diff --base HEAD` prints in each of FORMATS after the scenario's edit, the base commit as BASE."""
    root = scratch / scenario
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, root / part)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    commit = _git(root, "rev-parse", "HEAD")
    edit, stacks = SCENARIOS[scenario]
    edit(root)
    result = {}
    for name, args in FORMATS.items():
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["--root", str(root), "diff", "--base", "HEAD", *stacks, *args])
        assert code == 0, (scenario, name)
        result[name] = out.getvalue().replace(commit, "BASE").replace(commit[:12], "BASE")
    return result


def golden(scenario: str, name: str) -> Path:
    return GOLDEN / f"{scenario}.{name}"


def write_golden() -> None:
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for scenario in SCENARIOS:
            for name, text in outputs(scenario, Path(scratch)).items():
                golden(scenario, name).write_text(text)
                print(golden(scenario, name).relative_to(REPO))


if __name__ == "__main__":
    write_golden()

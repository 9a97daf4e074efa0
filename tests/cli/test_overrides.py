"""Environment overrides as users write them: `null` removes a key, messages name the stack, and
map-only fields take the plain number users reach for."""

from __future__ import annotations

from pathlib import Path

import yaml

from components.cli import main
from tests.project_edits import line_of, replace_once

VISION = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: vision
displayName: Vision
costCenter: cc-7100
quota:
  cpu: {requests: "8", limits: "16"}
  memory: {requests: 32Gi, limits: 64Gi}
  gpu: {h100: 4}
gpu:
  classes: [h100]
environments:
  dev:
    quota:
      gpu: {l4: 2%s}
    gpu:
      classes: [l4]
"""


def add_vision(root: Path, dev_gpu_extra: str) -> Path:
    path = root / "tenants" / "vision.yaml"
    path.write_text(VISION % dev_gpu_extra)
    replace_once(root / "stacks" / "Pulumi.dev.yaml", "tenants: [llm-finetune, inference, eval]", "tenants: [llm-finetune, inference, eval, vision]")
    return path


def validate(root: Path, capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--root", str(root), "validate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_key_the_override_keeps_from_the_base_is_reported_with_the_stack(project_copy, capsys):
    path = add_vision(project_copy, "")

    code, _, err = validate(project_copy, capsys, "--stack", "dev")

    assert code == 1
    line = line_of(path, "gpu: {h100: 4}")
    assert f"tenants/vision.yaml:{line}:9: quota.gpu.h100: unknown GPU class 'h100' (known: a100-mig, l4) (stack dev)" in err.splitlines()


def test_null_in_an_override_removes_the_key(project_copy, capsys, tmp_path):
    add_vision(project_copy, ", h100: null")

    code, out, err = validate(project_copy, capsys, "--stack", "dev")
    assert code == 0, err
    assert out.splitlines()[0] == "dev: 4 tenant(s) ok"   # then dev's node group requirements

    assert main(["--root", str(project_copy), "render", "--stack", "dev", "--out", str(tmp_path / "dev")]) == 0
    objects = [o for o in yaml.safe_load_all((tmp_path / "dev" / "vision.yaml").read_text()) if isinstance(o, dict)]
    quota = next(o for o in objects if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "tenant-quota")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "2"


def test_every_problem_of_a_merged_document_names_its_stack(project_copy, capsys):
    path = project_copy / "tenants" / "eval.yaml"
    replace_once(path, "      gpu: {l4: 2}\n", "      gpu: {l4: -1}\n")

    code, _, err = validate(project_copy, capsys)

    assert code == 1
    line = line_of(path, "gpu: {l4: -1}")
    assert f"tenants/eval.yaml:{line}:13: environments.dev.quota.gpu.l4: must be >= 0 (got -1); write 0 or more (stack dev)" in err.splitlines()


def test_plain_queue_limits_apply_to_every_whole_gpu_class_with_quota(project_copy, capsys, tmp_path):
    # eval in prod (Kueue) has a100 GPUs and a100-mig slices; plain numbers, as people write them first.
    path = project_copy / "tenants" / "eval.yaml"
    replace_once(path, "environments:\n", "queue:\n  cohort: research\n  lendingLimit: 2\nenvironments:\n")

    code, _, err = validate(project_copy, capsys, "--stack", "prod")
    assert code == 0, err
    assert main(["--root", str(project_copy), "render", "--stack", "prod", "--out", str(tmp_path / "out")]) == 0
    objects = [o for o in yaml.safe_load_all((tmp_path / "out" / "eval.yaml").read_text()) if isinstance(o, dict)]
    queue = next(o for o in objects if o["kind"] == "ClusterQueue")
    limits = {
        (flavor["name"], r["name"]): r["lendingLimit"]
        for group in queue["spec"]["resourceGroups"] for flavor in group["flavors"] for r in flavor["resources"] if "lendingLimit" in r
    }
    # a100 (whole GPUs, its one pool a100-shared) gets the limit; MIG slices of a100-mig take no per-class limit.
    assert limits == {("a100-shared", "nvidia.com/gpu"): "2"}

    replace_once(path, "  lendingLimit: 2\n", "  borrowingLimit: 4\n")
    code, _, err = validate(project_copy, capsys, "--stack", "prod")
    assert code == 1
    assert (f"tenants/eval.yaml:{line_of(path, 'borrowingLimit')}:3: queue.borrowingLimit.a100: borrowing limit 4 is above "
            "what the rest of cohort 'research' can lend of GPU class 'a100' on the pools this tenant may use (0; no other member lends any); lower it or "
            "add lenders to the cohort (stack prod)") in err.splitlines()

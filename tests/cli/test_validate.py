"""`tenants validate` over several stacks: a problem of a tenant file that holds against some of the
stacks' inventories only names them (#41: it named none, and the reader had to guess which)."""

from __future__ import annotations

from pathlib import Path

from components.cli.main import main
from tests.project_edits import line_of

VISION = Path(__file__).resolve().parents[1] / "fixtures" / "new-tenants" / "vision-h100.yaml"


def test_a_problem_found_in_some_stacks_names_them_and_one_found_in_all_names_none(project_copy, capsys):
    path = project_copy / "tenants" / "vision.yaml"
    path.write_text(VISION.read_text())   # dev does not deploy it; prod and staging cannot place its H100

    assert main(["--root", str(project_copy), "validate"]) == 1
    err = capsys.readouterr().err.splitlines()
    line = line_of(path, "gpu: {h100: 1}")
    mine = [e for e in err if e.startswith(f"tenants/vision.yaml:{line}:")]
    assert len(mine) == 1 and mine[0].endswith("(stacks prod, staging)"), err
    # The stacks' own files name their stack already.
    assert not [e for e in err if e.startswith("stacks/Pulumi.") and "(stack" in e], err

    assert main(["--root", str(project_copy), "validate", "--stack", "prod"]) == 1
    mine = [e for e in capsys.readouterr().err.splitlines() if e.startswith(f"tenants/vision.yaml:{line}:")]
    assert len(mine) == 1 and "(stack" not in mine[0], mine


def test_a_warning_every_stack_sees_is_printed_once_naming_the_stacks(project_copy, capsys):
    """#41: warnings printed once per stack (three times); a tenant file's warning is one line."""
    path = project_copy / "tenants" / "research.yaml"
    path.write_text("apiVersion: gpu-tenancy.dev/v1alpha2\nkind: Tenant\nname: research\ndisplayName: Research\n"
                    "costCenter: cc-7000\nqueue: {admission: direct, cohort: research}\n")
    assert main(["--root", str(project_copy), "validate"]) == 0
    err = capsys.readouterr().err.splitlines()
    cohort = [e for e in err if "queue.cohort does nothing" in e]
    assert len(cohort) == 1 and cohort[0].startswith(f"tenants/research.yaml:{line_of(path, 'queue:')}:"), err
    assert cohort[0].endswith("(stacks prod, staging)"), cohort   # dev lists its tenants and leaves research out
    assert len(err) == len(set(err)), err


def test_validate_prints_what_each_autoscaled_pools_node_group_must_set(capsys):
    repo = Path(__file__).resolve().parents[2]
    assert main(["--root", str(repo), "validate"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index("  dev/l4-shared:")
    assert out[start - 1].startswith("Autoscaled pools: what each node group's definition")
    assert out[start + 1:start + 4] == [
        "    labels: gpu.acme.dev/gpu-class=l4, gpu.acme.dev/pool=l4-shared, nvidia.com/device-plugin.config=l4",
        "    taints: nvidia.com/gpu=present:NoSchedule",
        "    the group: nodes labelled cloud.google.com/gke-nodepool=l4-pool, 0 to 1 nodes",
    ]
    assert main(["--root", str(repo), "validate", "--stack", "prod"]) == 0
    assert "Autoscaled pools" not in capsys.readouterr().out   # prod has none

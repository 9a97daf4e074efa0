"""Clashes between two tenant files are reported on both, and `tenants diff` puts the edited one first."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.cli import main
from tests.cli.test_diff import commit_all, git
from tests.project_edits import line_of, replace_once

ALPHA = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: alpha
displayName: Alpha
costCenter: cc-1000
quota:
  cpu: {requests: "8", limits: "16"}
  memory: {requests: 32Gi, limits: 64Gi}
gpu:
  dedicatedPools: [h100-train]
"""

BORROWER = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: borrower
displayName: Borrower
costCenter: cc-1100
quota:
  cpu: {requests: "8", limits: "16"}
  memory: {requests: 32Gi, limits: 64Gi}
gpu:
  classes: [a100]
queue:
  cohort: research
  borrowingLimit: {a100: 4}
"""


@pytest.fixture
def repo(project_copy: Path) -> Path:
    git(project_copy, "init", "-q", "-b", "main")
    commit_all(project_copy, "base")
    return project_copy


def stderr_of(capsys, argv: list[str], code: int = 1) -> list[str]:
    assert main(argv) == code
    return capsys.readouterr().err.splitlines()


def test_a_pool_dedicated_twice_is_reported_on_both_files_and_the_edited_one_first(repo, capsys):
    (repo / "tenants" / "alpha.yaml").write_text(ALPHA)  # sorts before llm-finetune, which owns the pool
    alpha = f"tenants/alpha.yaml:{line_of(repo / 'tenants' / 'alpha.yaml', 'dedicatedPools')}:20: gpu.dedicatedPools[0]: node pool 'h100-train' is already dedicated to tenant 'llm-finetune' (tenants/llm-finetune.yaml); a dedicated pool has one tenant: remove it here, or ask the platform team for a pool of this tenant's own"
    owner = f"tenants/llm-finetune.yaml:{line_of(repo / 'tenants' / 'llm-finetune.yaml', 'dedicatedPools')}:20: gpu.dedicatedPools[0]: node pool 'h100-train' is already dedicated to tenant 'alpha' (tenants/alpha.yaml); a dedicated pool has one tenant: remove it here, or ask the platform team for a pool of this tenant's own"

    validate = stderr_of(capsys, ["--root", str(repo), "validate", "--stack", "prod"])
    assert alpha in validate and owner in validate

    errors = [line for line in stderr_of(capsys, ["--root", str(repo), "diff", "--base", "HEAD", "--stack", "prod"]) if "warning:" not in line]
    assert errors[:2] == [alpha, owner]


def test_the_edit_that_makes_another_file_fail_is_listed_first_even_when_it_sorts_last(repo, capsys):
    # The clash surfaces when the owner of the pool is edited: its file comes first.
    replace_once(repo / "tenants" / "llm-finetune.yaml", "description: Fine-tunes", "description: Trains and fine-tunes")
    (repo / "tenants" / "alpha.yaml").write_text(ALPHA)
    commit_all(repo, "alpha dedicates h100-train too (already wrong on main)")
    replace_once(repo / "tenants" / "llm-finetune.yaml", "Trains and fine-tunes", "Fine-tunes")

    errors = [line for line in stderr_of(capsys, ["--root", str(repo), "diff", "--base", "HEAD", "--stack", "prod"]) if "warning:" not in line]
    assert [line.split(":")[0] for line in errors[:2]] == ["tenants/llm-finetune.yaml", "tenants/alpha.yaml"]


def test_a_cohort_typo_is_reported_on_the_typo_and_on_the_tenant_it_starves(repo, capsys):
    # Base: eval lends its a100s in cohort research, where borrower borrows up to 4.
    replace_once(repo / "tenants" / "eval.yaml", "environments:\n", "queue:\n  cohort: research\nenvironments:\n")
    (repo / "tenants" / "borrower.yaml").write_text(BORROWER)
    assert main(["--root", str(repo), "validate", "--stack", "prod"]) == 0, capsys.readouterr().err
    commit_all(repo, "eval and borrower share cohort research")
    capsys.readouterr()

    replace_once(repo / "tenants" / "eval.yaml", "  cohort: research\n", "  cohort: reserch\n")

    cohort_line = line_of(repo / "tenants" / "eval.yaml", "cohort: reserch")
    limit_line = line_of(repo / "tenants" / "borrower.yaml", "borrowingLimit")
    typo = (f"tenants/eval.yaml:{cohort_line}:3: queue.cohort: cohort 'reserch' looks like a typo of 'research': tenant "
            "'borrower' (tenants/borrower.yaml) borrows up to 4 GPUs of class 'a100' in 'research', more than its members "
            "can lend (0) (stack prod)")
    starved = (f"tenants/borrower.yaml:{limit_line}:20: queue.borrowingLimit.a100: borrowing limit 4 is above what the rest "
               "of cohort 'research' can lend of GPU class 'a100' on the pools this tenant may use (0; no other member lends any); lower it or add lenders to "
               "the cohort; tenant 'eval' (tenants/eval.yaml) is in cohort 'reserch': a typo of 'research'?")
    validate = stderr_of(capsys, ["--root", str(repo), "validate", "--stack", "prod"])
    assert typo in validate and starved in validate
    errors = [line for line in stderr_of(capsys, ["--root", str(repo), "diff", "--base", "HEAD", "--stack", "prod"]) if "warning:" not in line]
    assert errors[:2] == [typo, starved]


def test_a_lone_cohort_close_to_a_shared_one_warns(project_copy, capsys):
    replace_once(project_copy / "tenants" / "eval.yaml", "environments:\n", "queue:\n  cohort: serving-pool\nenvironments:\n")
    replace_once(project_copy / "tenants" / "llm-finetune.yaml", "environments:\n", "queue:\n  cohort: serving-pol\nenvironments:\n")
    replace_once(project_copy / "tenants" / "inference.yaml", "quota:\n  cpu", "queue:\n  cohort: serving-pool\nquota:\n  cpu")

    warnings = stderr_of(capsys, ["--root", str(project_copy), "validate", "--stack", "prod"], code=0)

    line = line_of(project_copy / "tenants" / "llm-finetune.yaml", "cohort: serving-pol")
    assert (f"tenants/llm-finetune.yaml:{line}:3: warning: queue.cohort: cohort 'serving-pol' has no other member, while "
            "'serving-pool' has eval, inference; did you mean 'serving-pool'?") in warnings


def test_the_starved_tenant_is_not_told_its_own_cohort_is_the_typo(repo, capsys):
    replace_once(repo / "tenants" / "eval.yaml", "environments:\n", "queue:\n  cohort: reserch\nenvironments:\n")
    (repo / "tenants" / "borrower.yaml").write_text(BORROWER)

    lines = stderr_of(capsys, ["--root", str(repo), "validate", "--stack", "prod"])

    assert [line.split(":")[0] for line in lines if "queue." in line] == ["tenants/borrower.yaml", "tenants/eval.yaml"]

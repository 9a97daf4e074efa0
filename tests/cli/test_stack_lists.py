"""Stacks that list their tenants (`tenants: [...]`): a tenant file they leave out is never silent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.cli import main
from tests.cli.test_diff import commit_all, git
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
"""


@pytest.fixture
def repo(project_copy: Path) -> Path:
    git(project_copy, "init", "-q", "-b", "main")
    commit_all(project_copy, "base")
    return project_copy


def test_validate_warns_at_the_stack_list_that_leaves_a_new_tenant_out(project_copy, capsys):
    (project_copy / "tenants" / "vision.yaml").write_text(VISION)

    code = main(["--root", str(project_copy), "validate"])

    captured = capsys.readouterr()
    assert code == 0
    line = line_of(project_copy / "stacks" / "Pulumi.dev.yaml", "tenants: [")
    assert (f"stacks/Pulumi.dev.yaml:{line}:5: warning: config.gpu-tenancy:platform.tenants: tenant 'vision' "
            "(tenants/vision.yaml) is not deployed in stack dev: this list names the tenants the stack deploys; "
            "add 'vision' to it to deploy the tenant there") in captured.err.splitlines()
    assert "dev: 3 tenant(s) ok; prod: 4 tenant(s) ok; staging: 4 tenant(s) ok" in captured.out


def test_the_diff_says_not_deployed_even_when_nothing_else_changes(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(VISION)

    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev"]) == 0
    text = capsys.readouterr().out
    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out

    message = ("tenant vision is not deployed in dev: the stack lists its tenants (`tenants:` in stacks/Pulumi.dev.yaml) "
               "and vision is not among them; add it there to deploy it")
    assert text.splitlines()[1] == f"  ! dev: {message}"
    assert document["stacks"][0]["tenants"]["notDeployed"] == ["vision"]
    assert [w["kind"] for w in document["warnings"]] == ["not-deployed"]
    assert f"> - **dev** · `vision`: {message}" in markdown.splitlines()
    assert "- `vision`: **not deployed in dev**" in markdown.splitlines()


def test_listing_it_deploys_it_and_the_warning_goes(repo, capsys):
    (repo / "tenants" / "vision.yaml").write_text(VISION)
    replace_once(repo / "stacks" / "Pulumi.dev.yaml", "tenants: [llm-finetune, inference, eval]", "tenants: [llm-finetune, inference, eval, vision]")

    assert main(["--root", str(repo), "validate", "--stack", "dev"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev", "--format", "json"]) == 0
    dev = json.loads(capsys.readouterr().out)["stacks"][0]
    assert dev["tenants"]["added"] == ["vision"] and dev["tenants"]["notDeployed"] == []


def test_a_stack_that_leaves_others_out_on_purpose_prints_no_warning_for_a_new_tenant(repo, capsys):
    # #41: with `tenantsLeftOut: others` onboarding a tenant elsewhere drew a not-deployed warning here.
    stack = repo / "stacks" / "Pulumi.dev.yaml"
    line = stack.read_text().splitlines()[line_of(stack, "tenants: [") - 1]
    replace_once(stack, line, line + "\n" + line[: len(line) - len(line.lstrip())] + "tenantsLeftOut: others")
    commit_all(repo, "leave the others out on purpose")
    (repo / "tenants" / "vision.yaml").write_text(VISION)

    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["stacks"][0]["tenants"]["notDeployed"] == []
    assert [w for w in document["warnings"] if w["kind"] == "not-deployed"] == []
    assert main(["--root", str(repo), "diff", "--base", "HEAD", "--stack", "dev"]) == 0
    assert "not deployed" not in capsys.readouterr().out


def test_a_stack_list_naming_a_previous_name_says_which_tenant_it_is_now(project_copy, capsys):
    tenants = project_copy / "tenants"
    text = (tenants / "eval.yaml").read_text().replace("name: eval\n", "name: evaluation\npreviousNames: [eval]\nnamespaces: [eval]\n")
    (tenants / "eval.yaml").unlink()
    (tenants / "evaluation.yaml").write_text(text)

    assert main(["--root", str(project_copy), "validate", "--stack", "dev"]) == 1

    line = line_of(project_copy / "stacks" / "Pulumi.dev.yaml", "tenants: [")
    column = (project_copy / "stacks" / "Pulumi.dev.yaml").read_text().splitlines()[line - 1].index("eval]") + 1
    assert (f"stacks/Pulumi.dev.yaml:{line}:{column}: config.gpu-tenancy:platform.tenants[2]: 'eval' is a previous name "
            "of tenant 'evaluation' (tenants/evaluation.yaml); list 'evaluation' instead") in capsys.readouterr().err.splitlines()

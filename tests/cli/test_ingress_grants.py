"""Ingress granted to a tenant that is not there (decommissioned, or not deployed in the stack): warn."""

from __future__ import annotations

from components.cli import main
from tests.project_edits import line_of, replace_once


def warnings(root, capsys, *args: str) -> list[str]:
    assert main(["--root", str(root), "validate", *args]) == 0
    return capsys.readouterr().err.splitlines()


def test_ingress_from_a_decommissioned_tenant_warns(project_copy, capsys):
    replace_once(project_copy / "tenants" / "llm-finetune.yaml", "costCenter: cc-4100\n",
                 "costCenter: cc-4100\nlifecycle: decommissioned\ndecommission: {confirm: llm-finetune}\n")
    path = project_copy / "tenants" / "eval.yaml"

    lines = warnings(project_copy, capsys, "--stack", "prod")

    assert (f"tenants/eval.yaml:{line_of(path, 'tenants: [llm-finetune]')}:15: warning: network.ingressFrom.tenants[0]: "
            "tenant 'llm-finetune' is decommissioned: its namespaces are about to be deleted; remove the grant (stack prod)") in lines


def test_ingress_from_a_tenant_the_stack_does_not_deploy_warns(project_copy, capsys):
    replace_once(project_copy / "stacks" / "Pulumi.dev.yaml", "tenants: [llm-finetune, inference, eval]", "tenants: [inference, eval]")
    path = project_copy / "tenants" / "eval.yaml"

    lines = warnings(project_copy, capsys, "--stack", "dev")

    assert (f"tenants/eval.yaml:{line_of(path, 'tenants: [llm-finetune]')}:15: warning: network.ingressFrom.tenants[0]: "
            "tenant 'llm-finetune' is not deployed in stack dev (the stack's `tenants` list leaves it out), so this grant "
            "lets nothing in there; remove it or deploy 'llm-finetune' (stack dev)") in lines


def test_a_grant_to_a_deployed_active_tenant_is_quiet(project_copy, capsys):
    assert not [line for line in warnings(project_copy, capsys, "--stack", "dev") if "ingressFrom" in line]

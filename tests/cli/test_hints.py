"""Hints that point at the actual mistake, as users made them."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.cli import main
from tests.project_edits import line_of, replace_once


def errors(root: Path, capsys, *args: str) -> list[str]:
    assert main(["--root", str(root), "validate", *args]) == 1
    return capsys.readouterr().err.splitlines()


def test_a_confirmation_typo_says_it_does_not_match(project_copy, capsys):
    path = project_copy / "tenants" / "eval.yaml"
    replace_once(path, "costCenter: cc-4300\n", "costCenter: cc-4300\nlifecycle: decommissioned\ndecommission:\n  confirm: evl\n")

    lines = errors(project_copy, capsys, "--stack", "dev")

    assert (f"tenants/eval.yaml:{line_of(path, 'lifecycle:')}:1: lifecycle: 'decommissioned' deletes every namespace "
            "of the tenant and all data in them, but the confirmation does not match: decommission.confirm is 'evl', "
            "the tenant's name is 'eval'; repeat the name exactly") in lines
    assert not any("add `decommission" in line for line in lines)


@pytest.mark.parametrize("listed, hint", [
    ("llm-eval", " (no tenant file has a close name; tenant files define: eval, inference, llm-finetune)"),
    ("inferense", "; did you mean 'inference'?"),
])
def test_an_unknown_tenant_in_a_stack_list_suggests_only_a_close_name(project_copy, capsys, listed, hint):
    stack = project_copy / "stacks" / "Pulumi.dev.yaml"
    replace_once(stack, "tenants: [llm-finetune, inference, eval]", f"tenants: [llm-finetune, inference, eval, {listed}]")

    lines = errors(project_copy, capsys, "--stack", "dev")

    line = line_of(stack, "tenants: [")
    column = stack.read_text().splitlines()[line - 1].index(listed) + 1
    assert f"stacks/Pulumi.dev.yaml:{line}:{column}: config.gpu-tenancy:platform.tenants[3]: no tenant file defines '{listed}'{hint}" in lines


def test_a_cidr_with_host_bits_prints_the_network_it_meant(project_copy, capsys):
    path = project_copy / "tenants" / "inference.yaml"
    replace_once(path, "    - cidr: 10.20.0.0/16\n", "    - cidr: 10.20.1.7/16\n")

    lines = errors(project_copy, capsys, "--stack", "prod")

    assert (f"tenants/inference.yaml:{line_of(path, 'cidr: 10.20.1.7/16')}:7: network.egress[0].cidr: '10.20.1.7/16' is "
            "not a CIDR: it has host bits set; write the network 10.20.0.0/16 (every address of the /16), or "
            "10.20.1.7/32 for the one address") in lines


@pytest.mark.parametrize("old, new, column, field, message", [
    ("costCenter: cc-4300", "costCenter: 4300", 1, "costCenter", 'must be a string (got the number 4300); quote it: "4300"'),
    ("displayName: Model Evaluation", "displayName: no", 1, "displayName",
     'must be a string (got false: YAML reads unquoted yes/no, on/off and true/false as booleans); quote it, e.g. "no"'),
    ("    groups: [eval-leads]", "    groups: [yes]", 14, "access.owners.groups[0]",
     'must be a string (got true: YAML reads unquoted yes/no, on/off and true/false as booleans); quote it, e.g. "yes"'),
])
def test_a_number_or_yes_no_where_a_string_belongs_says_quote_it(project_copy, capsys, old, new, column, field, message):
    path = project_copy / "tenants" / "eval.yaml"
    replace_once(path, old, new)

    lines = errors(project_copy, capsys, "--stack", "dev")

    assert f"tenants/eval.yaml:{line_of(path, new)}:{column}: {field}: {message}" in lines

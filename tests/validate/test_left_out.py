"""A stack that leaves tenants out on purpose says so once (`tenantsLeftOut`), and --strict passes."""

from __future__ import annotations

from pathlib import Path

from components.load import load_environment
from tests.cli.running import run
from tests.project_edits import line_of, replace_once, validation_errors

DEPLOYED = "    tenants: [llm-finetune, inference, eval]\n"


def _deploy_without_llm_finetune(root: Path, left_out: str | None) -> Path:
    stack = root / "stacks" / "Pulumi.dev.yaml"
    extra = f"    tenantsLeftOut: {left_out}\n" if left_out else ""
    replace_once(stack, DEPLOYED, "    tenants: [inference, eval]\n" + extra)
    return stack


def test_leaving_a_tenant_out_without_saying_so_warns_for_it_and_for_grants_to_it(project_copy):
    _deploy_without_llm_finetune(project_copy, None)
    warnings = [p.message for p in load_environment(project_copy, "dev").warnings if "llm-finetune" in p.message]
    assert any("is not deployed in stack dev" in w and "add 'llm-finetune'" in w for w in warnings), warnings
    assert any("so this grant lets nothing in there" in w for w in warnings), warnings  # eval's ingress grant


def test_a_tenant_left_out_on_purpose_gives_one_summary_line_and_strict_passes(capsys, project_copy):
    _deploy_without_llm_finetune(project_copy, "[llm-finetune]")
    assert [p for p in load_environment(project_copy, "dev").warnings if "llm-finetune" in p.message] == []
    code, out, err = run(capsys, "--root", str(project_copy), "validate", "--stack", "dev", "--strict")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "dev: 2 tenant(s) ok, 1 left out on purpose (llm-finetune)"


def test_others_leaves_out_every_tenant_the_list_does_not_name(project_copy):
    _deploy_without_llm_finetune(project_copy, "others")
    environment = load_environment(project_copy, "dev")
    assert environment.platform.leaves_out_on_purpose("llm-finetune")
    assert not environment.platform.leaves_out_on_purpose("eval")
    assert [p for p in environment.warnings if "llm-finetune" in p.message] == []


def test_a_wrong_name_or_a_deployed_tenant_in_the_list_is_an_error_at_its_line(project_copy):
    stack = _deploy_without_llm_finetune(project_copy, "[llm-finetun, eval]")
    line = line_of(stack, "tenantsLeftOut")
    errors = validation_errors(project_copy, "dev")
    assert f"stacks/Pulumi.dev.yaml:{line}:22: config.gpu-tenancy:platform.tenantsLeftOut[0]: no tenant file defines " \
           "'llm-finetun'; did you mean 'llm-finetune'?" in errors
    assert any(e.startswith(f"stacks/Pulumi.dev.yaml:{line}:") and "'eval' is both deployed (`tenants`) and left out" in e
               for e in errors), errors


def test_left_out_with_tenants_all_is_an_error(project_copy):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    replace_once(stack, "    tenants: all\n", "    tenants: all\n    tenantsLeftOut: [eval]\n")
    errors = validation_errors(project_copy, "prod")
    assert any("tenantsLeftOut" in e and "`tenants: all` deploys every tenant" in e for e in errors), errors

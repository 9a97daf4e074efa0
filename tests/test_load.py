"""Loading a project: the examples, per-environment overrides, enabled tenants, problems at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.project_edits import line_of
from components.load import (
    for_environment,
    load_environment,
    reading_each_file_once,
    stack_names,
    tenant_paths,
    validate_tenant,
)
from components.spec.problems import InvalidInput
from components.spec.quantity import Quantity
from components.spec.tenant import Tenant
from components.spec.yaml_source import parse_yaml

REPO = Path(__file__).resolve().parents[1]




@pytest.mark.parametrize("env", ["dev", "prod"])
def test_examples_validate(env):
    environment = load_environment(REPO, env)
    assert [t.name for t in environment.tenants] == ["eval", "inference", "llm-finetune"]
    assert environment.platform.environment == env
    assert all(p.severity == "warning" for p in environment.warnings)
    assert all(isinstance(t.spec, Tenant) for t in environment.tenants)


def test_example_stacks_are_found():
    assert stack_names(REPO) == ["dev", "prod", "staging"]


def test_prod_examples_warn_about_full_shared_pools():
    warnings = [str(p) for p in load_environment(REPO, "prod").warnings]
    assert any("GPU class 'a100'" in w and "pool a100-shared add up to 20" in w and "100%" in w for w in warnings)


def test_strict_turns_warnings_into_failure():
    with pytest.raises(InvalidInput) as caught:
        load_environment(REPO, "prod", strict_warnings=True)
    assert caught.value.problems and all(p.severity == "warning" for p in caught.value.problems)


def test_overrides_merge_maps_and_replace_lists():
    dev = {t.name: t.spec for t in load_environment(REPO, "dev").tenants}
    prod = {t.name: t.spec for t in load_environment(REPO, "prod").tenants}
    # maps merge: dev overrides cpu, objects come from the base file
    assert dev["eval"].quota.cpu.requests == Quantity.parse("16")
    assert prod["eval"].quota.cpu.requests == Quantity.parse("96")
    assert dev["eval"].quota.objects.pods == prod["eval"].quota.objects.pods == 500
    # lists replace: the dev override empties dedicatedPools and sets classes
    assert prod["inference"].gpu.dedicated_pools == ["h100-serve"]
    assert dev["inference"].gpu.dedicated_pools == []
    assert dev["inference"].gpu.classes == ["l4"]
    # a nested map merges key by key: dev keeps the base pods cap it does not mention
    assert dev["inference"].quota.priority_classes["online-inference"].pods == 20
    assert prod["inference"].quota.priority_classes["online-inference"].pods == 200


def _doc(text: str):
    return parse_yaml(text, "tenants/t.yaml")


BASE = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: t
displayName: T
costCenter: cc-1
namespaces: [t-a, t-b]
quota:
  cpu: {requests: "8", limits: "16"}
  objects: {pods: 10, services: 2}
gpu:
  classes: [h100, a100]
environments:
  dev:
    namespaces: [t-dev]
    quota:
      objects: {pods: 3}
    gpu:
      classes: []
"""


def test_merge_rules_on_a_small_file():
    doc = _doc(BASE)
    dev, prod = validate_tenant(doc, "dev"), validate_tenant(doc, "prod")
    assert dev.namespaces == ["t-dev"] and prod.namespaces == ["t-a", "t-b"]
    assert dev.gpu.classes == [] and prod.gpu.classes == ["h100", "a100"]
    assert dev.quota.objects.pods == 3 and dev.quota.objects.services == 2
    assert dev.quota.cpu.limits == Quantity.parse("16")
    # the overrides themselves are kept, so every environment sees which ones exist
    assert set(dev.environments) == set(prod.environments) == {"dev"}


def test_merged_values_are_located_where_the_override_wrote_them():
    merged = for_environment(_doc(BASE), "dev")
    assert merged.data["quota"]["objects"] == {"pods": 3, "services": 2}
    assert merged.position(("quota", "objects", "pods")) == (16, 17)
    assert merged.field_name(("quota", "objects", "pods")) == "environments.dev.quota.objects.pods"
    # values that come from the base keep their own place and name
    assert merged.position(("quota", "objects", "services")) == (9, 23)
    assert merged.field_name(("quota", "objects", "services")) == "quota.objects.services"
    assert "environments" not in merged.data


def test_an_error_inside_an_override_names_the_override():
    doc = _doc(BASE.replace("objects: {pods: 3}", "objects: {pods: -3}"))
    validate_tenant(doc, "prod")  # prod does not see the dev override
    with pytest.raises(InvalidInput) as caught:
        validate_tenant(doc, "dev")
    assert [str(p) for p in caught.value.problems] == [
        "tenants/t.yaml:16:17: environments.dev.quota.objects.pods: must be >= 0 (got -3); write 0 or more (stack dev)"
    ]


def test_disabled_tenants_are_not_deployed_or_checked_against_the_inventory(project_copy):
    stack = project_copy / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("tenants: [llm-finetune, inference, eval]", "tenants: [eval]"))
    # inference now asks for a GPU class dev does not have; it is disabled in dev, so that is fine there
    inference = project_copy / "tenants" / "inference.yaml"
    inference.write_text(inference.read_text().replace("      classes: [l4]\n", "      classes: [l4, b200]\n"))

    environment = load_environment(project_copy, "dev")

    assert [t.name for t in environment.tenants] == ["eval"]
    assert environment.disabled_tenants == ["inference", "llm-finetune"]


def test_disabled_tenants_must_still_be_valid_files(project_copy):
    stack = project_copy / "stacks" / "Pulumi.dev.yaml"
    stack.write_text(stack.read_text().replace("tenants: [llm-finetune, inference, eval]", "tenants: [eval]"))
    inference = project_copy / "tenants" / "inference.yaml"
    inference.write_text(inference.read_text().replace("costCenter: cc-5200", "costCentre: cc-5200"))
    with pytest.raises(InvalidInput) as caught:
        load_environment(project_copy, "dev")
    assert any(p.file == "tenants/inference.yaml" and p.field == "costCentre" for p in caught.value.problems)


def test_every_problem_of_every_file_is_reported_at_once(project_copy):
    for name, old, new in [
        ("eval.yaml", "costCenter: cc-4300", "costCenter: cc-4300\nqouta: {}"),
        ("inference.yaml", "podSecurity: restricted", "podSecurity: strict"),
    ]:
        path = project_copy / "tenants" / name
        path.write_text(path.read_text().replace(old, new))
    (project_copy / "tenants" / "broken.yaml").write_text("a: [\n")
    with pytest.raises(InvalidInput) as caught:
        load_environment(project_copy, "prod")
    files = sorted({p.file for p in caught.value.problems})
    assert files == ["tenants/broken.yaml", "tenants/eval.yaml", "tenants/inference.yaml"]


def test_removing_the_stack_limit_range_defaults_breaks_cpu_and_memory_quotas(project_copy):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    text = stack.read_text()
    start = text.index("    limitRangeDefaults:")
    end = text.index("    tenants: all")
    stack.write_text(text[:start] + "    limitRangeDefaults: {}\n" + text[end:])

    with pytest.raises(InvalidInput) as caught:
        load_environment(project_copy, "prod")

    found = {(p.file, p.line, p.field) for p in caught.value.problems if p.severity == "error"}
    eval_file = project_copy / "tenants" / "eval.yaml"
    cpu_line = line_of(eval_file, "cpu: {requests:")
    memory_line = line_of(eval_file, "memory: {requests:")
    assert ("tenants/eval.yaml", cpu_line, "quota.cpu.requests") in found
    assert ("tenants/eval.yaml", cpu_line, "quota.cpu.limits") in found
    assert ("tenants/eval.yaml", memory_line, "quota.memory.requests") in found
    # llm-finetune sets its own LimitRange, so it is not affected
    assert not any(p.file == "tenants/llm-finetune.yaml" for p in caught.value.problems)
    message = next(str(p) for p in caught.value.problems if p.field == "quota.cpu.requests")
    assert "without a LimitRange defaultRequest" in message


def test_unknown_stack_lists_the_known_ones():
    with pytest.raises(InvalidInput) as caught:
        load_environment(REPO, "qa")
    assert str(caught.value) == "stacks/Pulumi.qa.yaml: no such stack 'qa' (known stacks: dev, prod, staging)"


def test_only_yaml_files_are_tenant_files(project_copy):
    tenants = project_copy / "tenants"
    (tenants / "README.md").write_text("# tenants\n")
    (tenants / ".draft.yaml").write_text("not: a tenant\n")
    (tenants / "extra.yml").write_text("x: 1\n")
    names = [p.name for p in tenant_paths(project_copy)]
    assert names == ["eval.yaml", "extra.yml", "inference.yaml", "llm-finetune.yaml"]


def test_the_stack_enabling_missing_tenants_is_an_error(project_copy):
    for path in (project_copy / "tenants").iterdir():
        path.unlink()
    with pytest.raises(InvalidInput) as caught:
        load_environment(project_copy, "dev")
    messages = [p.message for p in caught.value.problems]
    assert "no tenant file defines 'llm-finetune' (known: none defined)" in messages
    assert all(p.file == "stacks/Pulumi.dev.yaml" for p in caught.value.problems)


def test_a_file_read_twice_in_one_block_is_parsed_once_and_its_frozen_specs_are_shared(project_copy, monkeypatch):
    import components.load as load

    parsed = []
    monkeypatch.setattr(load, "parse_yaml", lambda text, file: parsed.append(file) or parse_yaml(text, file))
    with reading_each_file_once():
        first, second = load_environment(project_copy, "staging"), load_environment(project_copy, "prod")
        again = load_environment(project_copy, "staging")
    tenant_files = [f for f in parsed if f.startswith("tenants/")]
    assert len(tenant_files) == len(set(tenant_files)) == len(first.tenants)
    plain = load_environment(REPO, "staging")
    assert [t.spec for t in again.tenants] == [t.spec for t in first.tenants] == [t.spec for t in plain.tenants]
    # nothing changes a validated spec (queue limits are worked out, not written back): loads share them
    spec = first.tenants[0].spec
    assert spec is again.tenants[0].spec
    with pytest.raises(ValidationError, match="frozen"):
        spec.queue.borrowing_limit = {"changed": 1}
    assert [t.spec for t in second.tenants] == [t.spec for t in load_environment(REPO, "prod").tenants]

"""The Pulumi Kubernetes Operator resources validate against the operator's own Stack CRD (v2.9.0+,
tests/fixtures/pulumi-kubernetes-operator) and carry the deploy graph: shards wait for the platform."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import jsonschema
import pytest
import yaml

from components.manifests.operator_stacks import OperatorSettings, operator_stacks, stack_resource_name
from components.fleet.environment import Environment
from components.load import load_environment, stack_names
from tests.manifests.test_queues_crds import cel_failures, to_json_schema

REPO = Path(__file__).resolve().parents[2]
SHARDED = REPO / "tests" / "fixtures" / "sharded"
CRD = REPO / "tests" / "fixtures" / "pulumi-kubernetes-operator" / "pulumi.com_stacks.yaml"
SETTINGS = OperatorSettings("https://git.example.com/platform/gpu-tenancy.git")


@lru_cache(maxsize=None)
def stack_schema() -> dict:
    crd = yaml.safe_load(CRD.read_text())
    return next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]


def crd_errors(obj: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(to_json_schema(stack_schema()))
    errors = [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]
    return errors + cel_failures(stack_schema(), obj)


CASES = [(REPO, env) for env in stack_names(REPO)] + [(SHARDED, "lab")]


@pytest.mark.parametrize("root, env", CASES, ids=[env for _, env in CASES])
@pytest.mark.parametrize("settings", [
    SETTINGS,
    OperatorSettings("git@git.example.com:platform/gpu-tenancy.git", "release", "pulumi", "acme",
                     "s3://state-bucket", "state-passphrase", "pulumi-workspace", "ghcr.io/acme/gpu-tenancy-workspace:1",
                     refresh=False),
], ids=["defaults", "everything-set"])
def test_every_stack_resource_passes_the_operators_crd(root, env, settings):
    for resource in operator_stacks(load_environment(root, env), settings):
        assert crd_errors(resource) == [], resource["metadata"]["name"]


def test_the_validator_rejects_what_the_crd_forbids():
    [resource] = operator_stacks(load_environment(REPO, "dev"), SETTINGS)
    broken = json.loads(json.dumps(resource))
    broken["spec"]["workspaceReclaimPolicy"] = "Keep"
    broken["spec"]["prerequisites"] = [{"stack": "dev"}]
    broken["metadata"]["name"] = "x" * 43
    del broken["spec"]["stack"]

    errors = crd_errors(broken)

    assert any("workspaceReclaimPolicy" in e and "'Keep' is not one of" in e for e in errors), errors
    assert any("prerequisites.0" in e for e in errors), errors
    assert any("'stack' is a required property" in e for e in errors), errors
    assert any("Stack name must be no more than 42 characters" in e for e in errors), errors


def test_shards_wait_for_the_environments_stack_and_nothing_else():
    resources = operator_stacks(load_environment(SHARDED, "lab"), SETTINGS)

    assert [(r["metadata"]["name"], r["spec"].get("prerequisites")) for r in resources] == [
        ("lab", None), ("lab.blue", [{"name": "lab"}]), ("lab.green", [{"name": "lab"}])]
    assert {r["metadata"]["labels"]["gpu-tenancy.dev/stack-role"] for r in resources[1:]} == {"shard"}


def test_program_source_stack_and_engine_settings():
    [prod] = operator_stacks(load_environment(REPO, "prod"), OperatorSettings(SETTINGS.repository, organization="acme"))

    spec = prod["spec"]
    assert spec["stack"] == "acme/prod"
    assert (spec["projectRepo"], spec["branch"]) == (SETTINGS.repository, "main")
    assert "repoDir" not in spec  # Pulumi.yaml is at the project root
    assert "config" not in spec  # the checked-in stacks/Pulumi.prod.yaml is the one inventory
    assert spec["refresh"] is True and spec["workspaceReclaimPolicy"] == "Delete"
    assert spec["destroyOnFinalize"] is False


def test_secrets_are_referenced_never_inlined():
    [cloud] = operator_stacks(load_environment(REPO, "prod"), SETTINGS)
    [diy] = operator_stacks(load_environment(REPO, "prod"), OperatorSettings(SETTINGS.repository, backend="s3://b"))

    assert cloud["spec"]["envRefs"] == {
        "PULUMI_ACCESS_TOKEN": {"type": "Secret", "secret": {"name": "pulumi-credentials", "key": "accessToken"}}}
    assert diy["spec"]["envRefs"] == {
        "PULUMI_CONFIG_PASSPHRASE": {"type": "Secret", "secret": {"name": "pulumi-credentials", "key": "passphrase"}}}
    assert diy["spec"]["backend"] == "s3://b"
    for resource in (cloud, diy):
        assert "secrets" not in resource["spec"] and "literal" not in json.dumps(resource)


def test_the_kube_context_comes_from_a_mounted_kubeconfig_secret():
    [prod] = operator_stacks(load_environment(REPO, "prod"), SETTINGS)

    workspace = prod["spec"]["workspaceTemplate"]["spec"]
    [mount] = workspace["podTemplate"]["spec"]["containers"][0]["volumeMounts"]
    assert workspace["podTemplate"]["spec"]["containers"][0]["name"] == "pulumi"  # the operator's main container
    assert workspace["podTemplate"]["spec"]["volumes"] == [{"name": "kubeconfig", "secret": {"secretName": "prod-kubeconfig"}}]
    assert workspace["env"] == [{"name": "KUBECONFIG", "value": f"{mount['mountPath']}/config"}]


def test_a_stack_name_longer_than_the_crd_allows_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="at most 42 characters; use a shorter shard name"):
        stack_resource_name("production-eu-west." + "x" * 30)


def test_every_stack_carries_the_environment_label_not_the_stack_name():
    lab = load_environment(SHARDED, "lab")
    platform = lab.platform.model_copy(update={"environment": "laboratory"})
    environment = Environment(lab.name, platform, lab.platform_doc, lab.tenants)

    resources = operator_stacks(environment, SETTINGS)

    assert [r["metadata"]["name"] for r in resources] == ["lab", "lab.blue", "lab.green"]
    assert {r["metadata"]["labels"]["gpu-tenancy.dev/environment"] for r in resources} == {"laboratory"}

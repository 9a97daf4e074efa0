"""The Pulumi Kubernetes Operator's `Stack` resources of every example stack (and of the sharded
fixture) on the real API server, with the operator's own CRD installed (v2.9.0+, vendored in
tests/fixtures/pulumi-kubernetes-operator). The operator itself does not run here: its workspace
pods need a kubelet. What the API server checks is what the operator would be given: the CRD's
structural schema (unknown fields refused under strict field validation) and its CEL rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.operator_stacks import OperatorSettings, operator_stacks
from components.load import load_environment, stack_names

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "tests" / "fixtures" / "pulumi-kubernetes-operator" / "pulumi.com_stacks.yaml"
SETTINGS = OperatorSettings("https://git.example.com/platform/gpu-tenancy.git", namespace="pulumi-operator",
                            organization="acme", image="ghcr.io/acme/gpu-tenancy-workspace:1")
CASES = [(REPO, env) for env in stack_names(REPO)] + [(REPO / "tests" / "fixtures" / "sharded", "lab")]


@pytest.fixture(scope="module")
def stacks_api(apiserver):
    crd = yaml.safe_load(CRD.read_text())
    apiserver.apply(crd, field_manager="e2e-crd-install")
    extensions = client.ApiextensionsV1Api(apiserver.api_client)

    def established() -> bool:
        conditions = extensions.read_custom_resource_definition(crd["metadata"]["name"]).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    apiserver.wait_for(established, what="the operator's Stack CRD Established")
    apiserver.dynamic.resources.invalidate_cache()
    apiserver.create_namespace(SETTINGS.namespace)
    return client.CustomObjectsApi(apiserver.api_client)


def _create(api, resource: dict) -> dict:
    return api.create_namespaced_custom_object("pulumi.com", "v1", resource["metadata"]["namespace"], "stacks",
                                               resource, field_validation="Strict")


@pytest.mark.parametrize("root, env", CASES, ids=[env for _, env in CASES])
def test_the_api_server_accepts_every_stack_resource(stacks_api, root, env):
    resources = operator_stacks(load_environment(root, env), SETTINGS)

    for resource in resources:
        created = _create(stacks_api, resource)
        assert created["spec"] == resource["spec"], resource["metadata"]["name"]  # nothing dropped or defaulted away
    stored = stacks_api.list_namespaced_custom_object("pulumi.com", "v1", SETTINGS.namespace, "stacks",
                                                      label_selector=f"gpu-tenancy.dev/environment={env}")
    names = [item["metadata"]["name"] for item in stored["items"]]
    assert sorted(names) == sorted(r["metadata"]["name"] for r in resources)
    for item in stored["items"]:
        for prerequisite in item["spec"].get("prerequisites", []):
            assert prerequisite["name"] in names  # a shard waits for a Stack that exists


def test_the_api_server_refuses_what_the_crd_forbids(stacks_api):
    [resource] = operator_stacks(load_environment(REPO, "dev"), SETTINGS)
    too_long = {**resource, "metadata": {**resource["metadata"], "name": "d" * 43}}
    unknown_field = {**resource, "metadata": {**resource["metadata"], "name": "dev-typo"},
                     "spec": {**resource["spec"], "workspaceReclaim": "Delete"}}

    with pytest.raises(ApiException) as long_name:
        _create(stacks_api, too_long)
    with pytest.raises(ApiException) as typo:
        _create(stacks_api, unknown_field)

    assert long_name.value.status == 422
    assert "Stack name must be no more than 42 characters" in json.loads(long_name.value.body)["message"]
    assert typo.value.status == 400
    assert 'unknown field "spec.workspaceReclaim"' in json.loads(typo.value.body)["message"]

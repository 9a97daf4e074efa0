"""The GPU aggregator: cluster-wide and per-tenant GPU objects of every stack."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from components.manifests import gpu_platform
from components.manifests.gpu_nodes import is_node_patch
from components.manifests.meta import sort_objects
from components.load import load_environment, stack_names

REPO = Path(__file__).resolve().parents[2]
STACKS = stack_names(REPO)


@pytest.fixture(scope="module", params=STACKS)
def environment(request):
    return load_environment(REPO, request.param)


def test_dev_and_prod_are_covered():
    assert {"dev", "prod"} <= set(STACKS)


def test_platform_objects_by_kind():
    prod = load_environment(REPO, "prod")
    kinds: dict[str, int] = {}
    for obj in gpu_platform.platform_gpu_objects(prod.facts):
        kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
    # 12 static nodes (a label patch and a taint patch each), 4 PriorityClasses, the MIG ConfigMap (no
    # time-sliced class in prod), the placement policy.
    assert kinds == {"Node": 24, "PriorityClass": 4, "ConfigMap": 1, "ValidatingAdmissionPolicy": 1}


def test_tenant_objects_are_the_placement_binding():
    prod = load_environment(REPO, "prod")
    for loaded in prod.tenants:
        objects = gpu_platform.tenant_gpu_objects(loaded.spec, prod.view(loaded.spec))
        assert [(o["kind"], o["metadata"]["name"], o["spec"]["policyName"]) for o in objects] == [
            ("ValidatingAdmissionPolicyBinding", f"gpu-tenancy-placement-{loaded.name}", "gpu-tenancy-placement"),
        ]


def test_sorted_deterministic_and_json_ready(environment):
    first = gpu_platform.platform_gpu_objects(environment.facts)
    assert first == sort_objects(first) == gpu_platform.platform_gpu_objects(environment.facts)
    for loaded in environment.tenants:
        objects = gpu_platform.tenant_gpu_objects(loaded.spec, environment.view(loaded.spec))
        assert objects == sort_objects(objects)
        first = first + objects
    assert json.loads(json.dumps(first)) == first


def test_every_object_is_labelled_or_a_node_patch(environment):
    for obj in gpu_platform.platform_gpu_objects(environment.facts):
        if is_node_patch(obj):
            assert set(obj) <= {"apiVersion", "kind", "metadata", "spec"}
            continue
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-tenancy"
        assert obj["metadata"]["labels"]["gpu-tenancy.dev/environment"] == environment.name


def test_every_object_matches_the_kubernetes_schema(environment, kube_schemas):
    objects = list(gpu_platform.platform_gpu_objects(environment.facts))
    for loaded in environment.tenants:
        objects += gpu_platform.tenant_gpu_objects(loaded.spec, environment.view(loaded.spec))
    for version in kube_schemas.versions:
        for obj in objects:
            assert kube_schemas.errors(obj, version) == [], (version, obj["kind"], obj["metadata"]["name"])


def test_the_schema_check_catches_a_misspelt_field(kube_schemas):
    prod = load_environment(REPO, "prod")
    policy = gpu_platform.tenant_gpu_objects(prod.tenants[0].spec, prod.view(prod.tenants[0].spec))[0]
    broken = {**policy, "spec": {**policy["spec"], "validationz": []}}
    assert kube_schemas.errors(broken, kube_schemas.versions[0]) != []
    node = next(o for o in gpu_platform.platform_gpu_objects(prod.facts) if is_node_patch(o))
    assert kube_schemas.errors(node, kube_schemas.versions[0]) == []
    assert kube_schemas.errors({**node, "spec": {"taint": []}}, kube_schemas.versions[0]) != []


def test_builders_do_not_import_pulumi():
    modules = ["gpu_nodes", "mig_config", "time_slicing", "placement_policy", "priority_classes", "gpu_platform"]
    for name in modules:
        tree = ast.parse((REPO / "components" / "manifests" / f"{name}.py").read_text())
        imported = {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        } | {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any(m.split(".")[0].startswith("pulumi") for m in imported), name

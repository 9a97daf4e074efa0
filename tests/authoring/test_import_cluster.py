"""`tenants_from_cluster`: hand-made namespaces become tenant files that keep what they allowed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.authoring.import_cluster import tenants_from_cluster
from components.authoring.importing import check_against_stack, tenant_file_text
from components.load import load_platform

ROOT = Path(__file__).resolve().parents[2]
HAND_MADE = Path(__file__).parent / "cluster" / "hand-made.yaml"


@pytest.fixture(scope="module")
def imported():
    docs = list(yaml.safe_load_all(HAND_MADE.read_text()))
    platform, _ = load_platform(ROOT, "staging")
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    objects = [d for d in docs if d["kind"] != "Namespace"]
    return tenants_from_cluster(namespaces, objects, platform, gpu_class_of={"nvidia.com/gpu": "a100"})


def test_quota_limits_and_roles_keep_what_the_namespace_allowed(imported):
    vision = imported.tenants["vision"]
    assert vision["costCenter"] == "cc-7100"
    assert vision["quota"]["cpu"] == {"requests": "16", "limits": "32"}
    assert vision["quota"]["gpu"] == {"a100": 2} and vision["gpu"]["classes"] == ["a100"]
    assert vision["quota"]["objects"] == {"pods": 40}
    assert vision["limits"] == {"defaultRequest": {"cpu": "500m", "memory": "1Gi"}, "default": {"cpu": "1", "memory": "2Gi"}}
    assert vision["access"]["owners"] == {"groups": ["vision-leads"]}
    assert vision["access"]["developers"] == {"groups": ["vision-eng"], "users": ["sam@acme.dev"]}
    assert vision["access"]["ciServiceAccounts"] == [{"name": "ci-deployer", "role": "developer"}]


def test_network_intent_maps_platform_ingress_and_egress_cidrs(imported):
    network = imported.tenants["vision"]["network"]
    assert network["ingressFrom"]["platform"] == [{"role": "monitoring", "ports": [{"port": 9090}]}]
    assert network["egress"] == [{"cidr": "10.40.0.0/16", "ports": [{"port": 443}]}]


def test_what_does_not_map_is_reported_never_guessed(imported):
    lines = [str(u) for u in imported.unmapped]
    assert any("count/jobs.batch" in line for line in lines), lines
    assert any("RoleBinding vision/custom-debugger" in line and "pod-debugger" in line for line in lines), lines
    assert any(line.startswith("Namespace kube-system") for line in lines), lines
    assert any("1 other object(s)" in line for line in lines), lines
    assert "kube-system" not in imported.tenants


def test_a_gpu_quota_with_several_candidate_classes_is_refused_not_guessed():
    docs = list(yaml.safe_load_all(HAND_MADE.read_text()))
    platform, _ = load_platform(ROOT, "staging")  # a100 and h100 both advertise nvidia.com/gpu
    out = tenants_from_cluster([docs[0]], [docs[1]], platform)
    [problem] = out.refused
    assert problem.file == "ResourceQuota vision/compute" and problem.field == "spec.hard.requests.nvidia.com/gpu"
    assert "2 GPUs of nvidia.com/gpu cannot be placed" in problem.message and "--gpu-class nvidia.com/gpu=CLASS" in problem.message


@pytest.mark.parametrize("selector, placed", [
    ("gpu.acme.dev/gpu-class=a100", "a100"),
    ("nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", "h100"),
    ("gpu.acme.dev/pool=a100-shared", "a100"),
])
def test_the_namespaces_node_selector_names_the_gpu_class(selector, placed):
    docs = list(yaml.safe_load_all(HAND_MADE.read_text()))
    platform, _ = load_platform(ROOT, "staging")
    namespace = {**docs[0], "metadata": {**docs[0]["metadata"], "annotations": {"scheduler.alpha.kubernetes.io/node-selector": selector}}}
    out = tenants_from_cluster([namespace], [docs[1]], platform)
    assert not out.refused and out.tenants["vision"]["quota"]["gpu"] == {placed: 2}


def test_a_node_selector_naming_a_class_without_that_resource_is_refused():
    docs = list(yaml.safe_load_all(HAND_MADE.read_text()))
    platform, _ = load_platform(ROOT, "staging")  # a100-mig advertises MIG slices, not nvidia.com/gpu
    namespace = {**docs[0], "metadata": {**docs[0]["metadata"], "annotations": {
        "scheduler.alpha.kubernetes.io/node-selector": "gpu.acme.dev/gpu-class=a100-mig"}}}
    [problem] = tenants_from_cluster([namespace], [docs[1]], platform).refused
    assert "names no class of the classes with nvidia.com/gpu" in problem.message


def test_a_namespace_without_network_policies_is_warned_about_the_default_deny():
    platform, _ = load_platform(ROOT, "staging")
    out = tenants_from_cluster([{"kind": "Namespace", "metadata": {"name": "open"}}], [], platform)
    assert any("none today, so all traffic reaches its pods" in str(u) for u in out.unmapped)


def test_the_written_file_is_valid_against_the_stack_and_deterministic(imported):
    text = tenant_file_text(imported.tenants["vision"], sources=imported.sources["vision"], unmapped=imported.unmapped_of("vision"))
    assert text.startswith("# yaml-language-server: $schema=../docs/schema/tenant.schema.json\n")
    assert "count/jobs.batch" in text  # the report is in the file too
    assert check_against_stack(ROOT, "staging", {"vision": text}) == []
    again = tenant_file_text(imported.tenants["vision"], sources=list(reversed(imported.sources["vision"])),
                             unmapped=list(reversed(imported.unmapped_of("vision"))))
    assert again == text


def test_an_invalid_import_is_refused_with_located_problems(imported):
    text = tenant_file_text(imported.tenants["vision"]).replace("a100", "b200")
    problems = check_against_stack(ROOT, "staging", {"vision": text})
    assert problems and all(p.file == "tenants/vision.yaml" for p in problems)


def test_the_adoption_plan_lists_updates_of_existing_objects_first():
    from components.authoring.importing import adoption_plan, object_key

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision", "labels": {"gpu-tenancy.dev/tenant": "vision"}}}
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ci", "namespace": "vision"}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant-quota", "namespace": "vision"}, "spec": {"hard": {"pods": "40"}}}
    live = {object_key(namespace): {"metadata": {"name": "vision", "labels": {"cost-center": "cc"}}},
            object_key(account): {"metadata": {"name": "ci", "namespace": "vision", "uid": "u"}},
            object_key(quota): None}
    assert adoption_plan([quota, account, namespace], live) == [
        "update Namespace vision (exists; adopted, changing metadata.labels.gpu-tenancy.dev/tenant)",
        "adopt ServiceAccount vision/ci (exists, as generated)",
        "create ResourceQuota vision/tenant-quota",
    ]

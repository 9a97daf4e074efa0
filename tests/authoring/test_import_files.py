"""`tenants_from_documents` on upstream sample files (tests/authoring/upstream/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import yaml

from components.authoring.import_files import tenants_from_documents
from components.authoring.importing import check_against_stack, tenant_file_text
from components.load import load_platform

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = Path(__file__).parent / "upstream"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((UPSTREAM / name).read_text()) if d]


def _platform():
    return load_platform(ROOT, "staging")[0]


def _valid(imported) -> None:
    texts = {n: tenant_file_text(d, sources=imported.sources[n], unmapped=imported.unmapped_of(n)) for n, d in imported.tenants.items()}
    assert texts and check_against_stack(ROOT, "staging", texts) == []


def test_capsule_owner_becomes_the_tenants_owner():
    out = tenants_from_documents(_docs("capsule-development-gas.yaml"), _platform())
    assert out.tenants["gas"]["access"] == {"owners": {"users": ["alice"]}}
    _valid(out)


def test_capsule_rules_give_quota_and_viewers_and_report_enforcement():
    out = tenants_from_documents(_docs("capsule-playground-wind.yaml"), _platform())
    wind = out.tenants["wind"]
    assert wind["access"]["viewers"] == {"groups": ["wind-users"]}
    assert wind["quota"]["cpu"] == {"requests": "8"}  # limits.cpu "0" (Capsule removes limits) is below requests: reported
    assert wind["quota"]["memory"] == {"requests": "16Gi", "limits": "16Gi"}
    lines = [str(u) for u in out.unmapped]
    assert any("hard.limits.cpu" in line for line in lines) and any("spec.rules[0].enforce" in line for line in lines), lines
    _valid(out)


def test_kubeflow_profile_quota_with_the_gpu_class_named():
    docs = _docs("kubeflow-v1beta1-profile.yaml")
    out = tenants_from_documents(docs, _platform(), gpu_class_of={"nvidia.com/gpu": "a100"})
    profile = out.tenants["test-user-profile"]
    assert profile["access"] == {"owners": {"users": ["test-user@kubeflow.org"]}}
    assert profile["quota"]["gpu"] == {"a100": 1} and profile["quota"]["storage"] == {"requests": "5Gi"}
    _valid(out)
    unnamed = tenants_from_documents(docs, _platform())  # staging: a100 and h100 both advertise nvidia.com/gpu
    [problem] = unnamed.refused
    assert problem.field == "spec.resourceQuotaSpec.hard.requests.nvidia.com/gpu" and "--gpu-class" in problem.message


def test_kubeflow_plugins_are_reported():
    out = tenants_from_documents(_docs("kubeflow-v1-profile-aws-iam.yaml"), _platform())
    assert any("AwsIamForServiceAccount" in str(u) for u in out.unmapped)
    _valid(out)


def test_kueue_local_queue_in_default_is_refused_and_elsewhere_gets_its_cluster_queue_quota():
    docs = _docs("kueue-sample-gpu-queues.yaml")
    refused = tenants_from_documents(docs, _platform(), gpu_class_of={"tas-flavor": "h100"})
    assert not refused.tenants and any("'default' is reserved for Kubernetes itself" in str(u) for u in refused.unmapped)
    for doc in docs:  # the sample's queue, as a team's namespace would hold it
        if doc["kind"] == "LocalQueue":
            doc["metadata"]["namespace"] = "research"
    out = tenants_from_documents(docs, _platform(), gpu_class_of={"tas-flavor": "h100"})
    research = out.tenants["research"]
    assert research["quota"]["gpu"] == {"h100": 16} and research["quota"]["cpu"] == {"requests": "100"}
    assert any("Topology default" in str(u) for u in out.unmapped)


def test_a_profile_and_a_local_queue_of_one_namespace_make_one_tenant():
    docs = _docs("kubeflow-v1-profile-aws-iam.yaml") + _docs("kueue-single-clusterqueue-setup.yaml")
    for doc in docs:
        if doc["kind"] == "LocalQueue":
            doc["metadata"]["namespace"] = "profile-aws-iam"
    out = tenants_from_documents(docs, _platform())
    tenant = out.tenants["profile-aws-iam"]
    assert tenant["access"]["owners"] == {"users": ["test-user@kubeflow.org"]}
    assert tenant["quota"]["memory"] == {"requests": "36Gi"}
    _valid(out)

"""What `tenants import --from` gives each namespace: a Capsule Tenant's quota split over its
namespaces, GPU classes from the node selector or refused, registries exact or reported, Kueue
quotas only where the ClusterQueue selects the namespace, malformed input located (issue #34)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.authoring.import_files import tenants_from_documents
from components.authoring.importing import environment_with_imports, tenant_file_text
from components.cli.importing import read_files
from components.load import load_platform
from components.manifests.build import environment_objects

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "import_fixtures"
PLATFORM = load_platform(ROOT, "staging")[0]


def _import(name: str, **kwargs):
    return tenants_from_documents(read_files([FIXTURES / name]), PLATFORM, **kwargs)


def _tenant_quotas(imported, tenant: str) -> dict[str, dict[str, str]]:
    """The hard of each namespace's `tenant-quota`, as the stack renders the imported file."""
    texts = {n: tenant_file_text(d, sources=imported.sources[n], unmapped=imported.unmapped_of(n)) for n, d in imported.tenants.items()}
    objects = environment_objects(environment_with_imports(ROOT, "staging", texts))[tenant]
    return {o["metadata"]["namespace"]: o["spec"]["hard"] for o in objects
            if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "tenant-quota"}


def test_a_tenant_scoped_capsule_quota_gives_each_namespace_its_share_adding_up_to_the_total():
    out = _import("capsule-two-namespaces.yaml")
    assert not out.refused
    solar = out.tenants["solar"]
    assert solar["namespaces"] == ["solar-dev", "solar-prod"]
    assert solar["quota"]["cpu"] == {"requests": "8", "limits": "16"} and solar["quota"]["gpu"] == {"a100": 2}
    assert solar["namespaceQuotas"] == {
        ns: {"cpu": {"requests": "4", "limits": "8"}, "memory": {"requests": "16Gi"}, "gpu": {"a100": 1}} for ns in ("solar-dev", "solar-prod")}
    quotas = _tenant_quotas(out, "solar")
    for ns in ("solar-dev", "solar-prod"):  # before: 0 CPUs, 0 GPUs, 0 pods in both
        assert quotas[ns]["requests.cpu"] == "4" and quotas[ns]["requests.nvidia.com/gpu"] == "1", quotas[ns]
        assert quotas[ns]["pods"] == "6", quotas[ns]  # 20 pods over the file's 3 namespaces, rounded down
    assert quotas["solar"]["requests.cpu"] == "0" and quotas["solar"]["pods"] == "0"  # new, empty: no budget
    assert any("scope Tenant" in str(u) for u in out.unmapped)


def test_a_namespace_scoped_capsule_quota_gives_each_namespace_the_whole_quota():
    out = _import("capsule-namespace-scope.yaml")
    quotas = _tenant_quotas(out, "wave")
    assert out.tenants["wave"]["quota"]["cpu"] == {"requests": "4"}
    assert quotas["wave"]["requests.cpu"] == quotas["wave-batch"]["requests.cpu"] == "2"
    assert quotas["wave"]["pods"] == quotas["wave-batch"]["pods"] == "10"


@pytest.mark.parametrize("hard, refusal", [
    ({"requests.cpu": "1.5m"}, "quota.cpu.requests 1.5m does not split into whole units over the 2 namespaces"),
    ({"requests.cpu": "1", "pods": "2"}, "quota.objects.pods 2 is tenant-wide in Capsule; a tenant file sets it per namespace and 2 over 3"),
])
def test_a_capsule_quota_that_does_not_split_is_refused_at_its_line(hard, refusal):
    docs = read_files([FIXTURES / "capsule-two-namespaces.yaml"])
    docs[0].data["spec"]["resourceQuotas"]["items"][0]["hard"] = hard
    [problem] = tenants_from_documents(docs, PLATFORM).refused
    assert (problem.file, problem.line, problem.field) == (str(FIXTURES / "capsule-two-namespaces.yaml"), 14, "spec.resourceQuotas")
    assert refusal in problem.message, problem.message


def test_the_capsule_node_selector_names_the_gpu_class_and_without_one_the_quota_is_refused():
    assert _import("capsule-two-namespaces.yaml").tenants["solar"]["gpu"] == {"classes": ["a100"]}  # by nvidia.com/gpu.product
    [problem] = _import("capsule-ambiguous-gpu.yaml").refused
    assert str(problem).startswith(f"{FIXTURES / 'capsule-ambiguous-gpu.yaml'}:13:9: spec.resourceQuotas.items[0].hard.requests.nvidia.com/gpu: "
                                   "2 GPUs of nvidia.com/gpu cannot be placed on a GPU class: the stack has 2 classes with nvidia.com/gpu (a100, h100)")
    assert not _import("capsule-ambiguous-gpu.yaml", gpu_class_of={"nvidia.com/gpu": "a100"}).refused


def test_capsule_registries_map_exactly_and_a_wider_pattern_is_reported():
    assert _import("capsule-two-namespaces.yaml").tenants["solar"]["images"] == {
        "registries": ["ghcr.io/solar", "harbor.solar.dev", "quay.io", "registry.solar.dev"]}
    out = _import("capsule-registry-regex.yaml")
    assert out.tenants["oil"]["images"] == {"registries": ["docker.io"]}  # not the pattern, not the invalid entry
    lines = [str(u) for u in out.unmapped]
    assert any("allowedRegex: 'internal.registry.\\w.tld' matches registries a tenant file cannot list" in line for line in lines), lines
    assert any("allowed[1]: 'not a registry' is not a registry" in line for line in lines), lines


@pytest.mark.parametrize("pattern", ["^docker\\.io", "docker\\.io$", "^(a\\.io|b\\.io)|c$", "^(a\\.io)|(b\\.io)$", "^a.io$", ".*"])
def test_a_registry_pattern_that_is_not_an_anchored_list_of_names_is_not_widened(pattern):
    docs = read_files([FIXTURES / "capsule-registry-regex.yaml"])
    docs[0].data["spec"]["containerRegistries"] = {"allowedRegex": pattern}
    out = tenants_from_documents(docs, PLATFORM)
    assert "images" not in out.tenants["oil"] and any("allowedRegex" in str(u) for u in out.unmapped)


def test_a_kueue_cluster_queue_gives_its_quota_only_to_the_namespaces_it_selects():
    out = _import("kueue-selector.yaml")
    assert not out.refused
    assert out.tenants["vision"]["quota"] == {"cpu": {"requests": "16"}, "gpu": {"a100": 2}}
    assert "quota" not in out.tenants["research"]  # before: the full 16 CPUs and 2 GPUs
    assert any("does not select namespace research" in str(u) for u in out.unmapped)


def test_a_selector_on_labels_of_a_namespace_not_given_is_refused():
    docs = [d for d in read_files([FIXTURES / "kueue-selector.yaml"]) if d.data["kind"] != "Namespace"]
    problems = tenants_from_documents(docs, PLATFORM).refused
    assert {(p.line, p.field) for p in problems} == {(19, "spec.namespaceSelector")}
    assert all("give its Namespace too (kubectl get namespace" in p.message for p in problems)


@pytest.mark.parametrize("selector, selected", [({}, {"vision", "research"}), (None, set()),
                                                ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["vision"]}]}, {"research"})])
def test_selector_semantics_follow_kueue(selector, selected):
    docs = read_files([FIXTURES / "kueue-selector.yaml"])
    queue = next(d for d in docs if d.data["kind"] == "ClusterQueue")
    queue.data["spec"]["namespaceSelector"] = selector
    out = tenants_from_documents(docs, PLATFORM)
    assert {n for n, t in out.tenants.items() if "quota" in t} == selected
    shared = [str(u) for u in out.unmapped if "Kueue caps their sum" in str(u)]
    assert len(shared) == (2 if len(selected) == 2 else 0), shared  # each of two tenants told the quota is shared


def test_a_kueue_flavor_is_placed_by_its_node_labels():
    docs = read_files([FIXTURES / "kueue-selector.yaml"])
    queue = next(d for d in docs if d.data["kind"] == "ClusterQueue")
    queue.data["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "big-gpus"
    assert [p.field for p in tenants_from_documents(docs, PLATFORM).refused] == ["spec.resourceGroups[0].flavors[0].resources[1].name"]
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "big-gpus"},
              "spec": {"nodeLabels": {"gpu.acme.dev/gpu-class": "a100"}}}
    out = tenants_from_documents([*docs, flavor], PLATFORM)
    assert not out.refused and out.tenants["vision"]["quota"]["gpu"] == {"a100": 2}


def test_a_malformed_document_is_refused_at_its_field():
    [problem] = _import("malformed.yaml").refused
    assert str(problem) == f"{FIXTURES / 'malformed.yaml'}:6:3: spec.owners: must be a list, not a map"
    docs = read_files([FIXTURES / "malformed.yaml"])
    docs[0].data["spec"]["owners"] = [{"kind": "User", "name": "bob"}]
    [problem] = tenants_from_documents(docs, PLATFORM).refused
    assert (problem.line, problem.field) == (12, "spec.resourceQuotas.items[0].hard.requests.cpu")
    assert "'eight' is not a Kubernetes quantity" in problem.message

"""`tenants import` against a real kube-apiserver (issue #34).

A namespace admin on the source cluster picks the names the importer reads: a display-name
annotation, a RoleBinding's role and subjects, each with a newline and YAML that would be keys of
the tenant file (API-server egress, cluster-admin owners, another class's GPUs). Read from the API
server, they stay values (or escaped comments) of the written file. A GPU quota is placed on the
class the namespace's node selector names, and refused (exit 1, nothing written) without one.

A Capsule Tenant with two namespaces sharing a Tenant-scoped quota is imported, rendered and
applied to the prod stack's cluster: each namespace's ResourceQuota holds its share (before, both
held 0 CPUs and 0 pods), and admission admits a pod within the share and refuses one above it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.cli.main import main
from tests.e2e.test_tenancy_admission import pod, rejected

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "authoring" / "import_fixtures"
NODE_SELECTOR = "scheduler.alpha.kubernetes.io/node-selector"
HOSTILE = "imp-hostile"
DISPLAY = "Vision\nnetwork:\n  egress:\n  - cidr: 10.2.0.10/32\n# "
ROLE = "pod-debugger\nquota:\n  gpu: {h100: 16}\n# "
USER = "eve\naccess: {owners: {groups: [system:masters]}}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    return root


@pytest.fixture
def hostile_namespace(apiserver):
    def namespace(annotations: dict[str, str]) -> dict:
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HOSTILE, "annotations": annotations}}

    apiserver.apply(namespace({"openshift.io/display-name": DISPLAY}))
    for obj in (
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "compute", "namespace": HOSTILE},
         "spec": {"hard": {"requests.cpu": "4", "requests.nvidia.com/gpu": "1"}}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "custom", "namespace": HOSTILE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "devs", "namespace": HOSTILE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}]},
    ):
        apiserver.apply(obj, field_manager="kubectl")
    yield lambda annotations: apiserver.apply(namespace(annotations))
    apiserver.delete_namespace(HOSTILE)


def _import(project: Path, apiserver, *args: str) -> int:
    return main(["--root", str(project), "import", "--stack", "staging", "--kubeconfig", str(apiserver.kubeconfig),
                 "--context", "e2e", *args])


def test_hostile_names_read_from_the_api_server_stay_values_and_the_gpu_class_comes_from_the_node_selector(
        apiserver, hostile_namespace, project, tmp_path, capsys):
    live = client.RbacAuthorizationV1Api(apiserver.api_client).read_namespaced_role_binding("custom", HOSTILE)
    assert live.role_ref.name == ROLE and live.subjects[0].name == USER  # the API server keeps the names as written
    written = project / "tenants" / f"{HOSTILE}.yaml"

    # staging has two classes with nvidia.com/gpu (a100, h100): without a node selector, refused.
    capsys.readouterr()
    assert _import(project, apiserver, "--namespace", HOSTILE) == 1
    err = capsys.readouterr().err
    assert f"ResourceQuota {HOSTILE}/compute: spec.hard.requests.nvidia.com/gpu: 1 GPUs of nvidia.com/gpu cannot be placed" in err
    assert "nothing written" in err and not written.exists()

    hostile_namespace({"openshift.io/display-name": DISPLAY, NODE_SELECTOR: "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"})
    report = tmp_path / "report.txt"
    assert _import(project, apiserver, "--namespace", HOSTILE, "--report", str(report)) == 0, capsys.readouterr().err
    text = written.read_text()
    data = yaml.safe_load(text)
    assert set(data) == {"apiVersion", "kind", "name", "displayName", "costCenter", "access", "quota", "gpu"}, data
    assert data["displayName"] == DISPLAY
    assert data["access"] == {"developers": {"users": [USER]}}
    assert data["quota"] == {"cpu": {"requests": "4"}, "gpu": {"a100": 1}} and data["gpu"] == {"classes": ["a100"]}
    header = text.split("\napiVersion: ", 1)[0].splitlines()
    assert all(line.startswith("#") for line in header), header
    escaped = "ClusterRole pod-debugger\\nquota:\\n  gpu: {h100: 16}\\n# "
    assert any(escaped in line for line in header), header
    assert any(escaped in line for line in report.read_text().splitlines())
    assert main(["--root", str(project), "validate", "--stack", "staging"]) == 0


def solar_pod(**kwargs) -> dict:
    """`pod()` with an image from a registry the imported Tenant allows.

    The import carries the Tenant's containerRegistries into the tenant file, so its image policy
    refuses registry.invalid once the API server has loaded the new policy; that takes a moment,
    and a pod from registry.invalid only passed while the policy was not yet loaded (a race).
    """
    body = pod(**kwargs)
    body["spec"]["containers"][0]["image"] = "ghcr.io/solar/cuda:12"
    return body


def test_a_two_namespace_capsule_tenant_gets_both_budgets_on_the_cluster(apiserver, prod_stack, project, tmp_path):
    # prod's A100s are all promised (eval): the same Tenant without its GPUs.
    source = tmp_path / "solar.yaml"
    source.write_text((FIXTURES / "capsule-two-namespaces.yaml").read_text().replace('        requests.nvidia.com/gpu: "2"\n', ""))
    assert main(["--root", str(project), "import", "--stack", "prod", "--from", str(source)]) == 0
    _, objects = prod_stack.render("prod", root=project)
    mine = objects["solar"]
    core = client.CoreV1Api(apiserver.api_client)
    try:
        results = apiserver.apply_rendered(mine)
        assert not [r for _, r in results if isinstance(r, client.ApiException)], results
        apiserver.wait_namespaces_ready(mine)
        hard = {ns: core.read_namespaced_resource_quota("tenant-quota", ns).spec.hard for ns in ("solar", "solar-dev", "solar-prod")}
        for ns in ("solar-dev", "solar-prod"):
            assert hard[ns]["requests.cpu"] == "4" and hard[ns]["limits.cpu"] == "8" and hard[ns]["requests.memory"] == "16Gi", hard
            assert hard[ns]["pods"] == "6", hard
        assert hard["solar"]["requests.cpu"] == "0" and hard["solar"]["pods"] == "0", hard
        for ns in ("solar-dev", "solar-prod"):  # each namespace its own share of the Tenant's 8 CPUs
            core.create_namespaced_pod(ns, solar_pod(limits={"cpu": "4", "memory": "1Gi"}), dry_run="All")
            message = rejected(core, ns, solar_pod(limits={"cpu": "5", "memory": "1Gi"}))
            assert "exceeded quota: tenant-quota" in message and "limited: requests.cpu=4" in message, message
    finally:
        for ns in ("solar", "solar-dev", "solar-prod"):
            apiserver.delete_namespace(ns)
        for obj in mine:
            if "namespace" not in obj["metadata"] and obj["kind"] != "Namespace":
                resource = apiserver.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
                apiserver.dynamic.delete(resource, name=obj["metadata"]["name"])

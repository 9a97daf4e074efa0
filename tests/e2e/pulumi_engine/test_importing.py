"""Brownfield adoption on the real engine (staging): a namespace made by hand, with its quota,
LimitRange, RoleBindings, NetworkPolicies, ServiceAccount and a running Deployment, is imported by
`tenants import` from the live API server; the first `up` adopts it (creates and updates only, no
delete, no replace), a second changes nothing, and the workload's pods are the same pods.

The lane's controller manager runs no Deployment controller (tests/e2e/conftest.py CONTROLLERS), so
the workload is a Deployment object plus two Pods created as the team made them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from components.cli.main import main
from tools.engine import engine_changes, offline_changes

pytestmark = pytest.mark.pulumi

STACK = "staging"
HAND_MADE = Path(__file__).resolve().parents[2] / "authoring" / "cluster" / "hand-made.yaml"
_POD_SPEC = {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10",
                             "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}}]}
_WORKLOAD = [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "vision"},
     "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
              "template": {"metadata": {"labels": {"app": "web"}}, "spec": _POD_SPEC}}},
    *({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}", "namespace": "vision", "labels": {"app": "web"}},
       "spec": _POD_SPEC} for i in (1, 2)),
]


@pytest.fixture(scope="module")
def adopted(scenario_factory):
    s = scenario_factory(STACK)
    s.engine.up()  # the platform and the example tenants, as a cluster that already runs gpu-tenancy
    docs = [d for d in yaml.safe_load_all(HAND_MADE.read_text()) if d and d["metadata"]["name"] != "kube-system"]
    hand_made = [d for d in docs if d["kind"] != "Deployment"] + [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "ci-deployer", "namespace": "vision"}}, *_WORKLOAD]
    for obj in hand_made:
        s.cluster.cp.apply(obj, field_manager="kubectl")
    core = client.CoreV1Api(s.api)
    s.deployment_uid = client.AppsV1Api(s.api).read_namespaced_deployment("web", "vision").metadata.uid
    s.pods_before = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod("vision").items}
    s.namespace_uid = core.read_namespace("vision").metadata.uid
    for part in ("stacks", "tenants"):  # the project before the import, for `tenants diff`
        shutil.copytree(s.project / part, s.root / "before" / part)
    s.import_rc = main(["--root", str(s.project), "import", "--stack", STACK, "--kubeconfig", str(s.cluster.kubeconfig),
                        "--namespace", "vision", "--gpu-class", "nvidia.com/gpu=a100", "--report", str(s.root / "report.txt")])
    return s


def test_import_writes_a_valid_tenant_file_with_the_report(adopted):
    assert adopted.import_rc == 0
    text = adopted.tenant_file("vision").read_text()
    assert text.startswith("# yaml-language-server: $schema=../docs/schema/tenant.schema.json\n")
    data = yaml.safe_load(text)
    assert data["access"]["owners"] == {"groups": ["vision-leads"]} and data["quota"]["gpu"] == {"a100": 2}
    report = (adopted.root / "report.txt").read_text()
    assert "RoleBinding vision/custom-debugger" in report and "count/jobs.batch" in report
    # The plan of the first deployment, read from the cluster: existing objects that change come first.
    plan = [line.removeprefix("first deployment: ") for line in report.splitlines() if line.startswith("first deployment: ")]
    assert plan[0].startswith("update Namespace vision (exists; adopted, changing ") and "metadata.labels.gpu-tenancy.dev/tenant" in plan[0], plan
    assert "adopt ServiceAccount vision/ci-deployer (exists, as generated)" in plan or any(
        line.startswith("update ServiceAccount vision/ci-deployer") for line in plan), plan
    assert plan[-1].startswith("create ") and "create ResourceQuota vision/tenant-quota" in plan, plan
    assert main(["--root", str(adopted.project), "validate", "--stack", STACK]) == 0


def test_first_up_adopts_without_delete_or_replace_and_the_second_changes_nothing(adopted):
    # Providers from 4.29 refuse creates of existing objects unless told to adopt them (docs/importing.md).
    adopted.engine.set_env(PULUMI_K8S_UPSERT_EXISTING_OBJECTS="true")
    preview = adopted.engine.preview()
    engine = engine_changes(preview)
    assert engine["delete"] == engine["replace"] == set(), preview.changes
    # Exactly what `tenants diff` of the import says: the new tenant's objects, and the neighbours'
    # objects that a new member of the queue cohort changes (eval's quota ceiling, the department queue).
    offline = offline_changes(adopted.root / "before", adopted.project, STACK)
    assert engine["create"] == set(offline["create"]) and engine["update"] == set(offline["update"]), (engine, offline)
    assert all(name == "vision" or name.startswith("vision-") for name in offline["create"]), offline["create"]
    assert "vision-namespace-vision" in engine["create"]
    up = adopted.engine.up()
    assert set(up.changes) <= {"create", "update"}, up.changes
    assert adopted.engine.up().changes == {}
    core = client.CoreV1Api(adopted.api)
    assert core.read_namespace("vision").metadata.uid == adopted.namespace_uid
    labels = core.read_namespace("vision").metadata.labels
    assert labels.get("gpu-tenancy.dev/tenant") == "vision", labels


def test_the_workloads_pods_are_untouched(adopted):
    core = client.CoreV1Api(adopted.api)
    pods = core.list_namespaced_pod("vision").items
    assert {p.metadata.name: p.metadata.uid for p in pods} == adopted.pods_before and len(pods) == 2
    assert not any(p.metadata.deletion_timestamp for p in pods)
    assert client.AppsV1Api(adopted.api).read_namespaced_deployment("web", "vision").metadata.uid == adopted.deployment_uid

"""Offboarding on the real engine (staging: KAI queues, namespaces not protected), one cluster for
the module, tests in file order: removing a live tenant's file keeps the whole tenant (bug 2);
restoring the file re-adopts it without Server-Side Apply conflicts (bug 3); decommissioning and
then removing the file deletes everything, the namespaces (and so the pods) before the policies.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tools.engine import (
    engine_changes,
    kubernetes_resources,
    offline_changes,
    rendered_by_name,
)
from tests.project_edits import replace_once

pytestmark = pytest.mark.pulumi

STACK = "staging"
TENANT = "eval"


@pytest.fixture(scope="module")
def staging(scenario_factory):
    s = scenario_factory(STACK)
    s.engine.up()
    s.saved = s.tenant_file(TENANT).read_text()
    s.objects = {n: o for n, o in rendered_by_name(s.project, STACK).items() if n.startswith(f"{TENANT}-")}
    return s


def _snapshot(s, dest: Path) -> Path:
    for part in ("stacks", "tenants"):
        shutil.copytree(s.project / part, dest / part)
    return dest


def _live(s, obj):
    try:
        return s.cluster.cp.get_object(obj)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


def _managers(live) -> set[str]:
    return {m["manager"] for m in (live.get("metadata", {}).get("managedFields") or [])}


def test_every_object_we_apply_has_one_stable_field_manager(staging):
    """Bug 3's root: the provider's default manager is random per resource (`pulumi-kubernetes-<hex>`)."""
    for name, obj in staging.objects.items():
        live = _live(staging, obj)
        assert live is not None, name
        ours = {m for m in _managers(live) if m.startswith("pulumi") or m == "gpu-tenancy"}
        assert ours == {"gpu-tenancy"}, (name, _managers(live))


def test_removing_a_live_tenants_file_keeps_the_whole_tenant(staging, tmp_path):
    """Bug 2: the namespaces stayed but the cluster-scoped objects (placement policy and binding,
    ClusterRoleBinding, queue) were deleted. Now nothing of the tenant is deleted."""
    base = _snapshot(staging, tmp_path / "base")
    staging.tenant_file(TENANT).unlink()
    preview = staging.engine.preview()
    offline = offline_changes(base, staging.project, STACK)
    engine = engine_changes(preview)
    # The engine lists the objects as deletes; the program says, in the same preview, that they stay.
    said = [m for m in preview.messages("warning") if m.startswith(f"tenant {TENANT} is no longer deployed by stack {STACK}")]
    assert said and "nothing of it is deleted from the cluster" in said[0], preview.messages("warning")
    # A neighbour's egress rule mirrored from this tenant's ingress grant (issue 13) goes with the
    # grant: it belongs to the neighbour's policy, whose namespace stays, so that policy is updated.
    neighbours = {n for n in offline["update"] if "-networkpolicy-" in n and not n.startswith(f"{TENANT}-")}
    assert neighbours and all(n.endswith("-tenant-network") for n in neighbours), offline
    staging.neighbour_policies = neighbours
    assert neighbours <= engine["update"]
    assert engine["delete"] == set(offline["delete"]) == set(staging.objects)
    up = staging.engine.up()
    assert kubernetes_resources(staging.engine.export()).keys().isdisjoint(staging.objects)
    gone = [n for n, o in staging.objects.items() if _live(staging, o) is None]
    assert not gone, f"removing the file deleted {gone}"
    cluster_scoped = [n for n, o in staging.objects.items() if not o["metadata"].get("namespace") and o["kind"] != "Namespace"]
    assert cluster_scoped, "the example tenant must have cluster-scoped objects for this test to mean something"
    assert {s.name for s in up.ops("delete") if s.type.startswith("kubernetes:")} == set(staging.objects)
    assert neighbours <= {s.name for s in up.ops("update") if s.type.startswith("kubernetes:")}


def test_restoring_the_file_re_adopts_the_tenant(staging):
    """Bug 3: re-adoption failed with Server-Side Apply conflicts against the old random manager."""
    staging.tenant_file(TENANT).write_text(staging.saved)
    up = staging.engine.up()
    assert set(up.changes) <= {"create", "update"}, up.changes
    assert {s.name for s in up.ops("create") if s.type.startswith("kubernetes:")} == set(staging.objects)
    assert staging.neighbour_policies <= {s.name for s in up.ops("update") if s.type.startswith("kubernetes:")}
    assert staging.engine.up().changes == {}


def test_decommission_then_removal_deletes_everything_namespaces_first(staging, tmp_path):
    path = staging.tenant_file(TENANT)
    replace_once(path, "kind: Tenant\n", f"kind: Tenant\nlifecycle: decommissioned\ndecommission: {{confirm: {TENANT}}}\n")
    staging.engine.up()
    core = client.CoreV1Api(staging.api)
    assert core.read_namespace(TENANT)  # decommissioning alone deletes nothing
    # Issue 34: the guard binding stays until the namespaces are gone; the members only read.
    (guard,) = [o for o in staging.objects.values() if o["metadata"]["name"] == f"gpu-tenancy-guard-{TENANT}"]
    assert _live(staging, guard) is not None
    owner = _live(staging, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                            "metadata": {"name": "tenant-owner", "namespace": TENANT}})
    assert {v for r in owner["rules"] for v in r["verbs"]} <= {"get", "list", "watch"}, owner["rules"]
    base = _snapshot(staging, tmp_path / "base")
    path.unlink()
    preview = staging.engine.preview()
    assert engine_changes(preview)["delete"] == set(offline_changes(base, staging.project, STACK)["delete"])
    assert any(m.startswith(f"tenant {TENANT} (decommissioned) is no longer deployed by stack {STACK}: this update DELETES")
               for m in preview.messages("warning")), preview.messages("warning")
    up = staging.engine.up()
    left = [n for n, o in staging.objects.items() if o["kind"] != "Namespace" and _live(staging, o) is not None
            and not o["metadata"].get("namespace")]
    assert not left, f"cluster-scoped objects left behind: {left}"
    staging.cluster.cp.wait_for(lambda: _live(staging, {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": TENANT}}) is None,
                                timeout=60, what=f"namespace {TENANT} deleted")
    # Order: the namespace delete completed before any of the tenant's policies or queues went.
    done = [s.name for s in up.done if s.op == "delete"]
    ns_at = done.index(f"{TENANT}-namespace-{TENANT}")
    policies = [i for i, n in enumerate(done) if any(k in n for k in ("validatingadmissionpolicy", "queue", "clusterrolebinding"))]
    assert policies and min(policies) > ns_at, done

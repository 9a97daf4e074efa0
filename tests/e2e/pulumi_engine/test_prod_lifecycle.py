"""The prod stack through a tenant's life on the real engine, one cluster for the whole module.

The tests run in file order and build on each other (a failure leaves later ones failing too):
up, no-change re-up, a moved kubeconfig, a quota edit, onboarding with `tenants new`,
suspend/resume, a rename with `previousNames`, and a removal `protectNamespaces` refuses.
For each change the engine's preview and the offline `tenants diff` must name the same objects.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from components.load import load_environment
from tools.engine import engine_changes, kubernetes_resources, offline_changes
from tests.project_edits import line_of, rename_llm_finetune, replace_once

pytestmark = pytest.mark.pulumi

STACK = "prod"


@pytest.fixture(scope="module")
def prod(scenario_factory):
    s = scenario_factory(STACK)
    s.first_up = s.engine.up()
    return s


def test_the_first_up_taints_nodes_only_after_every_tenants_grant_and_placement_binding(prod):
    """A taint lands only once the grants and placement bindings that say who may tolerate it are
    on the cluster (GpuPlatform: the taint patches depend on one gate that depends on all of them):
    in the engine's own events, every taint patch starts after the last of those is done."""
    started = {step.name: i for i, (kind, step) in enumerate(prod.first_up.timeline) if kind == "start"}
    done = {step.name: i for i, (kind, step) in enumerate(prod.first_up.timeline) if kind == "done"}
    steps = {step.name: step for step in prod.first_up.steps}
    gates = [n for n, step in steps.items() if step.type == "kubernetes:gpu-tenancy.dev/v1alpha1:TenantGrant"
             or "-validatingadmissionpolicybinding-gpu-tenancy-placement-" in n]
    taints = [n for n, step in steps.items() if step.type == "kubernetes:core/v1:NodePatch" and n.endswith("-taints")]
    assert len(gates) == 2 * len(load_environment(prod.project, STACK).tenants) and len(taints) == 12, (gates, taints)
    assert max(done[n] for n in gates) < min(started[n] for n in taints)
    assert [steps[n].op for n in steps if steps[n].type == "pulumi:index:Stash"] == ["create"]


def _snapshot(s, tmp_path: Path) -> Path:
    """The project as it is now: the base side of `tenants diff`."""
    base = tmp_path / "base"
    for part in ("stacks", "tenants"):
        shutil.copytree(s.project / part, base / part)
    return base


def _assert_preview_matches_diff(s, base: Path, preview) -> dict[str, set[str]]:
    offline = offline_changes(base, s.project, STACK)
    engine = engine_changes(preview)
    assert engine["create"] == set(offline["create"]), ("create", engine["create"] ^ set(offline["create"]))
    assert engine["update"] | engine["replace"] == set(offline["update"]) - set(offline["create"]), (
        "update", (engine["update"] | engine["replace"]) ^ set(offline["update"]))
    assert engine["delete"] == set(offline["delete"]), ("delete", engine["delete"] ^ set(offline["delete"]))
    return engine


def test_second_up_changes_nothing(prod):
    again = prod.engine.up()
    assert again.changes == {}, again.ops("create", "update", "delete", "replace")


def test_moving_the_kubeconfig_is_no_change(prod, tmp_path):
    """Bug 4: the kubeconfig path was stored as a provider input; a PR preview with
    `--expect-no-changes` failed when KUBECONFIG pointed elsewhere."""
    moved = prod.cluster.write_kubeconfig(tmp_path / "elsewhere" / "config")
    prod.engine.set_env(KUBECONFIG=str(moved))
    try:
        preview = prod.engine.preview(expect_no_changes=True)
        assert preview.changes == {}, preview.steps
        providers = [r for r in prod.engine.export() if r["type"] == "pulumi:providers:kubernetes"]
        assert providers and all(not r.get("inputs", {}).get("kubeconfig") for r in providers), providers
    finally:
        prod.engine.set_env(KUBECONFIG=str(prod.cluster.kubeconfig))


def test_quota_edit_updates_only_quota_objects(prod, tmp_path):
    base = _snapshot(prod, tmp_path)
    replace_once(prod.tenant_file("eval"), "      gpu: {a100: 20}", "      gpu: {a100: 16}")
    preview = prod.engine.preview()
    engine = _assert_preview_matches_diff(prod, base, preview)
    kinds = {s.type.rsplit(":", 1)[-1] for s in preview.ops("update", "replace", "create", "delete")
             if s.type.startswith("kubernetes:")}
    # prod's monitoring block writes each tenant's GPU quota into the tenant's own PrometheusRule
    # (static series); nothing of the platform changes.
    assert kinds == {"ResourceQuota", "ClusterQueue", "PrometheusRule"}, kinds
    assert "eval-prometheusrule-monitoring-gpu-tenancy-tenant-eval" in engine["update"], engine["update"]
    assert not [n for n in engine["update"] if n.startswith("prod-platform-")], engine["update"]
    assert engine["update"] and not engine["create"] and not engine["delete"] and not engine["replace"]
    up = prod.engine.up()
    assert set(up.changes) == {"update"}, up.changes
    quota = client.CoreV1Api(prod.api).read_namespaced_resource_quota("tenant-quota", "eval")
    assert quota.spec.hard["requests.nvidia.com/gpu"] == "16", quota.spec.hard


def test_onboarding_with_tenants_new_previews_only_the_new_tenants_creates(prod, tmp_path):
    base = _snapshot(prod, tmp_path)
    subprocess.run(
        [sys.executable, "-m", "components", "--root", str(prod.project), "new", "vision",
         "--owner-group", "vision-leads", "--gpu-class", "a100"],
        check=True, capture_output=True, text=True,
    )
    preview = prod.engine.preview()
    engine = _assert_preview_matches_diff(prod, base, preview)
    # Only creates: the new tenant's quota series are its own PrometheusRule, not a platform update.
    assert engine["create"] and not engine["update"] and not engine["delete"] and not engine["replace"], engine
    assert "vision-prometheusrule-monitoring-gpu-tenancy-tenant-vision" in engine["create"], engine["create"]
    created = [s for s in preview.ops("create")]
    assert all("gpu-tenancy:index:Tenant$" in s.urn or s.name == "vision" for s in created
               if s.type.startswith("kubernetes:")), [s.urn for s in created]
    up = prod.engine.up()
    assert set(up.changes) <= {"create", "update"} and up.changes.get("create"), up.changes
    client.CoreV1Api(prod.api).read_namespace("vision")


def test_suspend_then_resume(prod, tmp_path):
    base = _snapshot(prod, tmp_path)
    path = prod.tenant_file("eval")
    replace_once(path, "kind: Tenant\n", "kind: Tenant\nlifecycle: suspended\n")
    preview = prod.engine.preview()
    _assert_preview_matches_diff(prod, base, preview)
    prod.engine.up()
    core = client.CoreV1Api(prod.api)
    suspended = core.read_namespaced_resource_quota("suspended", "eval")
    assert suspended.spec.hard == {"pods": "0"}, "a suspended tenant gets a pods: 0 quota"

    base = _snapshot(prod, tmp_path / "resume")
    replace_once(path, "kind: Tenant\nlifecycle: suspended\n", "kind: Tenant\n")
    preview = prod.engine.preview()
    _assert_preview_matches_diff(prod, base, preview)
    prod.engine.up()
    assert "suspended" not in {q.metadata.name for q in core.list_namespaced_resource_quota("eval").items}
    assert prod.engine.up().changes == {}


def test_rename_with_previous_names_replaces_cleanly_and_deletes_no_data(prod, tmp_path):
    """Bug 1: on a Kueue stack the rename failed at preview (`LocalQueue spec.clusterQueue: field is
    immutable`). The tenant keeps its old namespaces (prod protects them, so they cannot be
    replaced): the LocalQueues there are replaced cleanly, every namespace keeps a quota, and
    `tenants diff` warns about the replacement and the CI ServiceAccount moving to the new
    primary namespace."""
    base = _snapshot(prod, tmp_path)
    rename_llm_finetune(prod.project)

    from components.load import load_environment
    from components.manifests.build import tenant_objects
    from components.manifests.renames import renamed_objects
    from components.resources.kubernetes import logical_name
    from components.review.diff import Side, compare_stack

    document = compare_stack(STACK, Side(load_environment(base, STACK)), Side(load_environment(prod.project, STACK)))
    kinds = {w["kind"]: w["message"] for w in document["warnings"]}
    assert "LocalQueue llm-finetune-data/default (spec.clusterQueue)" in kinds["objects-replaced"], kinds
    assert "ServiceAccount trainer-ci moves from llm-finetune to finetune and is DELETED" in kinds["objects-moved"], kinds

    preview = prod.engine.preview()
    engine = engine_changes(preview)
    # The engine's warning is the diff's rename message, not "nothing of it is deleted" (issue 24),
    # and the objects it names as deleted are the ones the engine deletes.
    warned = [m.strip() for m in preview.messages("warning") if m.strip().startswith("tenant ")]
    assert warned == [kinds["tenant-renamed"]], warned
    environment = load_environment(prod.project, STACK)
    finetune = next(t.spec for t in environment.tenants if t.name == "finetune")
    named = set()
    for kind, name in renamed_objects("llm-finetune", finetune, tenant_objects(finetune, environment.view(finetune))):
        namespace, _, object_name = name.rpartition("/")
        named.add(logical_name("llm-finetune", {"kind": kind, "metadata": {"namespace": namespace, "name": object_name}}))
    assert named and named <= engine["delete"], sorted(named - engine["delete"])
    replaced = {s.name for s in preview.ops("replace", "create-replacement")}
    assert {n for n in replaced if "localqueue" in n} >= {"finetune-localqueue-llm-finetune-data-default"}, replaced
    offline = offline_changes(base, prod.project, STACK)
    assert engine["create"] == set(offline["create"]), engine["create"] ^ set(offline["create"])
    up = prod.engine.up()
    core = client.CoreV1Api(prod.api)
    for ns in ("finetune", "llm-finetune", "llm-finetune-data"):
        core.read_namespace(ns)
        assert core.list_namespaced_resource_quota(ns).items, f"namespace {ns} has no quota"
    # The old ClusterQueue is adopted and stopped, not deleted (Kueue would hold its delete while
    # workloads are admitted; tests/e2e/scheduling/test_kueue_queue_lifecycle.py shows that part).
    assert not {"finetune-clusterqueue-llm-finetune", "llm-finetune-clusterqueue-llm-finetune"} & (engine["delete"] | engine["create"])
    old_queue = client.CustomObjectsApi(prod.api).get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "llm-finetune")
    assert old_queue["spec"]["stopPolicy"] == "HoldAndDrain" and "resourceGroups" not in old_queue["spec"]
    state = kubernetes_resources(prod.engine.export())
    assert not [n for n in state if n.startswith("llm-finetune-")], "old names left in the state"
    assert prod.engine.up().changes == {}
    e2e_summary_line = f"rename: {up.changes}"
    assert up.changes, e2e_summary_line


def test_protect_namespaces_refuses_a_removal(prod):
    """prod sets protectNamespaces: removing a live tenant's file must fail instead of dropping it."""
    path = prod.tenant_file("inference")
    saved = path.read_text()
    path.unlink()
    try:
        err, steps, diags = prod.engine.failing("preview")
        assert "protected" in str(err), str(err)[-2000:]
        core = client.CoreV1Api(prod.api)
        core.read_namespace("inference")
    finally:
        path.write_text(saved)
    assert prod.engine.preview().changes == {}


def test_invalid_input_fails_before_any_resource_is_registered(prod):
    """A broken tenant file stops the program before it registers anything: the engine plans no
    step besides the stack itself, reports the located errors, and the state stays as it was."""
    path = prod.tenant_file("inference")
    saved = path.read_text()
    before = prod.engine.urns()
    replace_once(path, "  gpu: 24\n", "  gpu: twenty\n")
    line = line_of(path, "  gpu: twenty")
    try:
        for operation in ("preview", "up"):
            err, steps, diags = prod.engine.failing(operation)
            registered = [s for s in steps if s.type != "pulumi:pulumi:Stack"]
            assert not registered, [s.urn for s in registered]
            text = str(err) + "\n".join(m for _, _, m in diags)
            assert "invalid tenants or stack configuration" in text, text[-3000:]
            assert f"tenants/inference.yaml:{line}:" in text, text[-3000:]
        assert prod.engine.urns() == before
    finally:
        path.write_text(saved)
    assert prod.engine.preview().changes == {}


def test_node_labels_of_other_managers_are_kept(prod):
    """NodePatch applies only our keys: the kubelet's, the GPU Operator's and GFD's labels stay."""
    core = client.CoreV1Api(prod.api)
    for node in core.list_node().items:
        labels = node.metadata.labels
        assert labels["kubernetes.io/hostname"] == node.metadata.name
        assert "nvidia.com/gpu.product" in labels, node.metadata.name
        managers = {m.manager for m in node.metadata.managed_fields}
        assert {"kubelet", "gpu-feature-discovery", "gpu-tenancy"} <= managers, managers


def test_every_static_node_is_tainted_the_shared_mig_pool_too(prod):
    """Issue 22 item 4: `pulumi up` taints the nodes of prod's shared MIG pool a100-mig (their taint
    patch) while their label patch forces the MIG layout over the GPU Operator's all-disabled; the
    operator's other labels stay."""
    core = client.CoreV1Api(prod.api)
    for name in ("gpu-a100-03", "gpu-a100-04"):
        node = core.read_node(name)
        assert ("nvidia.com/gpu", "present", "NoSchedule") in {(t.key, t.value, t.effect) for t in node.spec.taints or []}, name
        assert node.metadata.labels["nvidia.com/mig.config"] == "eval-mix"
        assert node.metadata.labels["nvidia.com/gpu.deploy.mig-manager"] == "true"
    tainted = [n.metadata.name for n in core.list_node().items if n.spec.taints]
    assert len(tainted) == 12, tainted

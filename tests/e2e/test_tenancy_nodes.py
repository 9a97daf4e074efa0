"""GPU node patches of the prod stack on a real kube-apiserver.

The `prod_stack` fixture registers every static node of the stack's pools the
way a cluster has them before we patch (labels owned by `kubelet`, the GPU
Operator's default `nvidia.com/mig.config=all-disabled` owned by
`gpu-operator`, the product label owned by `gpu-feature-discovery`), then
applies the rendered partial Nodes with server-side apply, field manager and
force taken from their `pulumi.com/patch*` annotations, as Pulumi does: per
node a label patch (labels only, forced, `gpu-tenancy`) and a taint patch
(`spec.taints` only, never forced, naming no manager: the provider's own, here
`TAINT_PATCH_MANAGER`).
"""

from __future__ import annotations

import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.e2e

from components.manifests.meta import is_taint_patch
from tests.node_patch_forms import single_patches
from tools.control_plane import TAINT_PATCH_MANAGER as TAINT_FIELD_MANAGER

FIELD_MANAGER = "gpu-tenancy"
MIG_CONFIG = "nvidia.com/mig.config"


def _node(apiserver, name: str) -> dict:
    return apiserver.api_client.sanitize_for_serialization(client.CoreV1Api(apiserver.api_client).read_node(name))


def _owned(node: dict, manager: str, operation: str | None = None) -> dict:
    """Union of the fieldsV1 trees `manager` owns on the main resource."""
    tree: dict = {}
    for entry in node["metadata"].get("managedFields", []):
        if entry["manager"] == manager and not entry.get("subresource") and operation in (None, entry["operation"]):
            _merge(tree, entry.get("fieldsV1", {}))
    return tree


def _merge(into: dict, other: dict) -> None:
    for key, value in other.items():
        _merge(into.setdefault(key, {}), value)


def _owned_labels(node: dict, manager: str, operation: str | None = None) -> set[str]:
    labels = _owned(node, manager, operation).get("f:metadata", {}).get("f:labels", {})
    return {k[2:] for k in labels if k.startswith("f:")}


def _patches(prod_stack) -> list[dict]:
    """The label patches (one per static node)."""
    patches = [p for p in prod_stack.of_kind("Node") if not is_taint_patch(p)]
    assert patches, "the prod stack renders no node patches"
    return patches


def _taint_patches(prod_stack) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in prod_stack.of_kind("Node") if is_taint_patch(p)}


def test_every_static_node_gets_its_labels_and_taint_under_our_field_managers(apiserver, prod_stack, e2e_summary):
    patches, taints = _patches(prod_stack), _taint_patches(prod_stack)
    # Every prod pool is tainted, the shared MIG pool a100-mig too (issue 22 item 4).
    assert set(taints) == {p["metadata"]["name"] for p in patches}
    for patch in patches:
        name, want = patch["metadata"]["name"], patch["metadata"]["labels"]
        live = _node(apiserver, name)
        assert {k: live["metadata"]["labels"].get(k) for k in want} == want, name
        assert set(want) <= _owned_labels(live, FIELD_MANAGER, "Apply"), name
        assert live["spec"]["taints"] == taints[name]["spec"]["taints"], name
        assert "f:taints" in _owned(live, TAINT_FIELD_MANAGER, "Apply").get("f:spec", {}), name
        assert "f:spec" not in _owned(live, FIELD_MANAGER), name
        assert _owned_labels(live, TAINT_FIELD_MANAGER) == set(), name
    e2e_summary.append(f"nodes: {len(patches)} static GPU nodes patched by server-side apply "
                       f"(labels: field manager {FIELD_MANAGER}, forced; taints: {TAINT_FIELD_MANAGER}, {len(taints)} nodes)")


def test_other_managers_labels_survive(apiserver, prod_stack):
    """Labels the kubelet and GFD own stay, with their values and owners; ours were added beside them."""
    for patch in _patches(prod_stack):
        name = patch["metadata"]["name"]
        before, live = prod_stack.nodes_before[name], _node(apiserver, name)
        ours = set(patch["metadata"]["labels"])
        for manager in ("kubelet", "gpu-feature-discovery"):
            theirs = _owned_labels(before, manager)
            assert theirs, f"{name}: fixture did not register labels as {manager}"
            assert {k: live["metadata"]["labels"][k] for k in theirs} == \
                   {k: before["metadata"]["labels"][k] for k in theirs}, name
            assert theirs - ours <= _owned_labels(live, manager), f"{name}: {manager} lost ownership"
        untouched = set(before["metadata"]["labels"]) - ours
        assert {k: live["metadata"]["labels"].get(k) for k in untouched} == \
               {k: before["metadata"]["labels"][k] for k in untouched}, name


def test_forced_label_patch_takes_over_only_our_keys(apiserver, prod_stack):
    """Label patches are forced: where the GPU Operator's default MIG config differs (MIG pools),
    our value wins and the GPU Operator no longer owns the key; where it is the same, both co-own it."""
    took_over = shared = 0
    for patch in _patches(prod_stack):
        name = patch["metadata"]["name"]
        want = patch["metadata"]["labels"].get(MIG_CONFIG)
        if want is None:
            continue
        before, live = prod_stack.nodes_before[name], _node(apiserver, name)
        assert live["metadata"]["labels"][MIG_CONFIG] == want
        operator_owns = MIG_CONFIG in _owned_labels(live, "gpu-operator")
        if want != before["metadata"]["labels"][MIG_CONFIG]:
            assert patch["metadata"]["annotations"].get("pulumi.com/patchForce") == "true", name
            assert not operator_owns, f"{name}: forced apply should have taken {MIG_CONFIG} over"
            took_over += 1
        else:
            assert operator_owns, f"{name}: same value, both managers should own {MIG_CONFIG}"
            shared += 1
    assert took_over and shared, (took_over, shared)


def test_labels_we_stop_applying_are_removed_and_nothing_else(apiserver, prod_stack):
    """Server-side apply removes a label we owned and no longer apply (a pool released by its tenant)
    and leaves every other manager's label alone."""
    patch = next(p for p in _patches(prod_stack) if any(k.endswith("/tenant") for k in p["metadata"]["labels"]))
    name = patch["metadata"]["name"]
    tenant_key = next(k for k in patch["metadata"]["labels"] if k.endswith("/tenant"))
    released = json.loads(json.dumps(patch))
    del released["metadata"]["labels"][tenant_key]
    try:
        [(_, result)] = apiserver.apply_rendered([released])
        assert not isinstance(result, ApiException), result
        live = _node(apiserver, name)
        assert tenant_key not in live["metadata"]["labels"]
        expected = {k: v for k, v in prod_stack.nodes_before[name]["metadata"]["labels"].items()}
        expected.update(released["metadata"]["labels"])
        assert live["metadata"]["labels"] == expected
    finally:
        [(_, result)] = apiserver.apply_rendered([patch])
        assert not isinstance(result, ApiException), result


def test_unforced_taint_patch_conflicts_instead_of_dropping_foreign_taints(apiserver, prod_stack):
    """`spec.taints` is an atomic list: once another manager changes it (the node lifecycle
    controller, `kubectl taint`), our unforced re-apply is refused with a conflict naming that
    manager, and their taint stays; forcing would have dropped it."""
    patch = _taint_patches(prod_stack).get("gpu-h100-06")
    assert patch is not None, "the prod example must keep a pool with patchTaints: true (h100-serve) for this test"
    assert patch["metadata"].get("annotations", {}).get("pulumi.com/patchForce") != "true"
    name = patch["metadata"]["name"]
    core = client.CoreV1Api(apiserver.api_client)
    foreign = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    core.patch_node(name, {"spec": {"taints": [*patch["spec"]["taints"], foreign]}},
                    field_manager="kube-controller-manager")
    try:
        [(_, result)] = apiserver.apply_rendered([patch])
        assert isinstance(result, ApiException) and result.status == 409, result
        message = json.loads(result.body)["message"]
        assert "kube-controller-manager" in message and ".spec.taints" in message, message
        taints = _node(apiserver, name)["spec"]["taints"]
        assert {"key": foreign["key"], "effect": foreign["effect"]} in [
            {k: t[k] for k in ("key", "effect")} for t in taints]
    finally:
        core.patch_node(name, {"spec": {"taints": patch["spec"]["taints"]}}, field_manager="kube-controller-manager")
    # With the list back to ours, the unforced apply goes through again.
    [(_, result)] = apiserver.apply_rendered([patch])
    assert not isinstance(result, ApiException), result


# --- issue 22 item 4: a label patch and a taint patch per node, on a MIG node ---------------------

GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
# What a cordon leaves on a node: `kubectl cordon` patches spec.unschedulable (manager kubectl-cordon),
# then the node lifecycle controller (TaintNodesByCondition) writes the whole taint list with its
# `node.kubernetes.io/unschedulable:NoSchedule` added, as kube-controller-manager. No node lifecycle
# controller runs here (no kubelet heartbeats), so the test writes both as they would.
CORDON_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _retarget(patch: dict, name: str) -> dict:
    moved = copy.deepcopy(patch)
    moved["metadata"]["name"] = name
    return moved


def _cordon(core, name: str) -> None:
    core.patch_node(name, {"spec": {"unschedulable": True}}, field_manager="kubectl-cordon")
    taints = [t for t in core.read_node(name).spec.taints or []]
    listed = [{k: v for k, v in {"key": t.key, "value": t.value, "effect": t.effect}.items() if v} for t in taints]
    core.patch_node(name, {"spec": {"taints": [*listed, CORDON_TAINT]}}, field_manager="kube-controller-manager")


def _taint_keys(live: dict) -> list[tuple]:
    return sorted((t["key"], t.get("value"), t["effect"]) for t in (live.get("spec") or {}).get("taints") or [])


@pytest.fixture
def mig_node(apiserver, prod_stack):
    """A fresh node of prod's shared MIG pool a100-mig, registered as prod_stack's are (the GPU Operator
    owning `nvidia.com/mig.config=all-disabled`), with prod's two patches of gpu-a100-03 retargeted to it."""
    name = "e2e-mig-split-01"
    label = _retarget(next(p for p in _patches(prod_stack) if p["metadata"]["name"] == "gpu-a100-03"), name)
    taint = _retarget(_taint_patches(prod_stack)["gpu-a100-03"], name)
    core = client.CoreV1Api(apiserver.api_client)
    apiserver.create_node(name, {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}, field_manager="kubelet")
    core.patch_node(name, {"metadata": {"labels": {MIG_CONFIG: "all-disabled", "nvidia.com/gpu.deploy.mig-manager": "true"}}},
                    field_manager="gpu-operator")
    try:
        yield name, label, taint
    finally:
        core.delete_node(name)


def test_the_two_patches_of_a_mig_node_take_the_layout_and_add_the_taint(apiserver, mig_node, e2e_summary):
    name, label, taint = mig_node
    assert label["metadata"]["labels"][MIG_CONFIG] == "eval-mix" and taint["spec"]["taints"] == [GPU_TAINT]
    before = _node(apiserver, name)
    # The one unforced patch of earlier versions (labels and taints together) conflicts on the
    # GPU Operator's label: that is why a shared MIG pool was left untainted before.
    old = copy.deepcopy(label)
    del old["metadata"]["annotations"]["pulumi.com/patchForce"]
    old["spec"] = {"taints": [GPU_TAINT]}
    [(_, refused)] = apiserver.apply_rendered([old], dry_run=True)
    assert isinstance(refused, ApiException) and refused.status == 409, refused
    message = json.loads(refused.body)["message"]
    assert "gpu-operator" in message and MIG_CONFIG in message, message

    results = apiserver.apply_rendered([taint, label])
    assert not [r for _, r in results if isinstance(r, ApiException)], results
    live = _node(apiserver, name)
    assert live["metadata"]["labels"][MIG_CONFIG] == "eval-mix"
    assert MIG_CONFIG in _owned_labels(live, FIELD_MANAGER, "Apply") and MIG_CONFIG not in _owned_labels(live, "gpu-operator")
    # The operator's other label and the kubelet's stay, with their owners.
    assert live["metadata"]["labels"]["nvidia.com/gpu.deploy.mig-manager"] == "true"
    assert "nvidia.com/gpu.deploy.mig-manager" in _owned_labels(live, "gpu-operator")
    assert {k: live["metadata"]["labels"][k] for k in ("kubernetes.io/hostname", "kubernetes.io/os")} == \
           {k: before["metadata"]["labels"][k] for k in ("kubernetes.io/hostname", "kubernetes.io/os")}
    assert _taint_keys(live) == [("nvidia.com/gpu", "present", "NoSchedule")]
    assert "f:taints" in _owned(live, TAINT_FIELD_MANAGER, "Apply")["f:spec"] and "f:spec" not in _owned(live, FIELD_MANAGER)

    # Re-applying both changes nothing (the resourceVersion stays).
    version = live["metadata"]["resourceVersion"]
    results = apiserver.apply_rendered([taint, label])
    assert not [r for _, r in results if isinstance(r, ApiException)], results
    assert _node(apiserver, name)["metadata"]["resourceVersion"] == version
    e2e_summary.append("nodes: a MIG node's label patch (forced) takes nvidia.com/mig.config from gpu-operator and its "
                       "taint patch adds nvidia.com/gpu=present; the one-patch form conflicts (409)")


def test_a_taint_patch_naming_its_own_manager_would_conflict_on_that_annotation(apiserver, mig_node):
    """Why the taint patch names no field manager: the provider applies `pulumi.com/patchFieldManager`
    to the Node like any other input, and the label patch (forced) owns it with `gpu-tenancy`; a taint
    patch naming another manager there is refused, on the annotation, by every apply after that one
    (and at once on a node that the one patch of earlier versions annotated)."""
    name, label, taint = mig_node
    named = copy.deepcopy(taint)
    named["metadata"]["annotations"] = {"pulumi.com/patchFieldManager": "gpu-tenancy-taints"}
    results = apiserver.apply_rendered([label])
    assert not [r for _, r in results if isinstance(r, ApiException)], results
    [(_, refused)] = apiserver.apply_objects([named], field_manager="gpu-tenancy-taints")
    assert isinstance(refused, ApiException) and refused.status == 409, refused
    message = json.loads(refused.body)["message"]
    assert "pulumi.com/patchFieldManager" in message and '"gpu-tenancy"' in message, message
    # Without it (as rendered) the same taints go through beside the label patch.
    [(_, result)] = apiserver.apply_rendered([taint])
    assert not isinstance(result, ApiException), result
    assert _taint_keys(_node(apiserver, name)) == [("nvidia.com/gpu", "present", "NoSchedule")]


def test_a_cordoned_mig_node_keeps_the_cordon_taint_and_ours(apiserver, mig_node):
    """Cordoned after our patches: re-applying the label patch (forced) keeps both taints; the taint patch,
    unforced, conflicts with the node lifecycle controller instead of dropping its taint. One patch
    with both could only have been forced (dropping the cordon) or refused (the labels too)."""
    name, label, taint = mig_node
    core = client.CoreV1Api(apiserver.api_client)
    results = apiserver.apply_rendered([taint, label])
    assert not [r for _, r in results if isinstance(r, ApiException)], results
    _cordon(core, name)
    both = [("node.kubernetes.io/unschedulable", None, "NoSchedule"), ("nvidia.com/gpu", "present", "NoSchedule")]
    assert _taint_keys(_node(apiserver, name)) == both

    relabelled = copy.deepcopy(label)
    relabelled["metadata"]["labels"][MIG_CONFIG] = "all-1g.10gb"   # a layout change: the label patch alone is applied
    [(_, result)] = apiserver.apply_rendered([relabelled])
    assert not isinstance(result, ApiException), result
    live = _node(apiserver, name)
    assert live["metadata"]["labels"][MIG_CONFIG] == "all-1g.10gb" and _taint_keys(live) == both

    [(_, refused)] = apiserver.apply_rendered([taint])
    assert isinstance(refused, ApiException) and refused.status == 409, refused
    assert "kube-controller-manager" in json.loads(refused.body)["message"]
    assert _taint_keys(_node(apiserver, name)) == both
    # Forcing one patch with both would have dropped the cordon's taint (dry run: nothing changes).
    single = copy.deepcopy(label)
    single["spec"] = {"taints": [GPU_TAINT]}
    forced = apiserver.apply_objects([single], field_manager=FIELD_MANAGER, force=True, dry_run=True)
    [(_, would)] = forced
    assert not isinstance(would, ApiException), would
    assert [t["key"] for t in would["spec"]["taints"]] == ["nvidia.com/gpu"]
    assert _taint_keys(_node(apiserver, name)) == both


def test_upgrading_from_one_patch_keeps_the_taint_only_if_the_taint_patch_goes_first(apiserver, prod_stack):
    """A dedicated node deployed by an earlier version (one unforced patch with labels and taints,
    `gpu-tenancy` owning spec.taints alone): the new label patch applied alone lets go of the taints
    and the API server removes them; applied after the taint patch, which co-owns the same list
    without a conflict, the taint stays. Hence GpuPlatform's order (the label patch depends on the taint patch)."""
    core = client.CoreV1Api(apiserver.api_client)
    label = next(p for p in _patches(prod_stack) if p["metadata"]["name"] == "gpu-h100-01")
    taint = _taint_patches(prod_stack)["gpu-h100-01"]
    [old] = [p for p in single_patches(_prod_facts()) if p["metadata"]["name"] == "gpu-h100-01"]
    want = [("gpu.acme.dev/tenant", "llm-finetune", "NoSchedule")]
    for order, kept in (([label], False), ([taint, label], True)):
        name = f"e2e-upgrade-{len(order)}"
        apiserver.create_node(name, {"kubernetes.io/hostname": name}, field_manager="kubelet")
        try:
            [(_, result)] = apiserver.apply_rendered([_retarget(old, name)])
            assert not isinstance(result, ApiException), result
            assert _taint_keys(_node(apiserver, name)) == want
            results = apiserver.apply_rendered([_retarget(p, name) for p in order])
            assert not [r for _, r in results if isinstance(r, ApiException)], results
            live = _node(apiserver, name)
            assert _taint_keys(live) == (want if kept else []), (order, live["spec"])
            assert live["metadata"]["labels"]["gpu.acme.dev/tenant"] == "llm-finetune"
        finally:
            core.delete_node(name)


def _prod_facts():
    from components.load import load_environment
    from tools.control_plane import REPO_ROOT

    return load_environment(REPO_ROOT, "prod").facts

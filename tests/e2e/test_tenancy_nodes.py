"""GPU node patches of the prod stack on a real kube-apiserver.

The `prod_stack` fixture registers every static node of the stack's pools the
way a cluster has them before we patch (labels owned by `kubelet`, the GPU
Operator's default `nvidia.com/mig.config=all-disabled` owned by
`gpu-operator`, the product label owned by `gpu-feature-discovery`), then
applies the rendered partial Nodes with server-side apply, field manager and
force taken from their `pulumi.com/patch*` annotations, as Pulumi does.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.e2e

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
    patches = prod_stack.of_kind("Node")
    assert patches, "the prod stack renders no node patches"
    return patches


def test_every_static_node_gets_its_labels_under_our_field_manager(apiserver, prod_stack, e2e_summary):
    patches = _patches(prod_stack)
    for patch in patches:
        name, want = patch["metadata"]["name"], patch["metadata"]["labels"]
        live = _node(apiserver, name)
        assert {k: live["metadata"]["labels"].get(k) for k in want} == want, name
        assert set(want) <= _owned_labels(live, FIELD_MANAGER, "Apply"), name
        if patch.get("spec", {}).get("taints"):
            assert live["spec"]["taints"] == patch["spec"]["taints"], name
            assert "f:taints" in _owned(live, FIELD_MANAGER, "Apply").get("f:spec", {}), name
    e2e_summary.append(f"nodes: {len(patches)} static GPU nodes patched by server-side apply "
                       f"(field manager {FIELD_MANAGER}; {sum(bool(p.get('spec')) for p in patches)} with taints)")


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
    """Label-only patches are forced: where the GPU Operator's default MIG config differs (MIG pools),
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
    # Dedicated pools are tainted by default: the patch carries our taints too (unchanged here).
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
    patch = next((p for p in _patches(prod_stack) if p.get("spec", {}).get("taints")), None)
    assert patch is not None, "the prod example must keep a pool with patchTaints: true (h100-serve) for this test"
    assert patch["metadata"]["annotations"].get("pulumi.com/patchForce") != "true"
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

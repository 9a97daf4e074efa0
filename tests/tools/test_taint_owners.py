"""tools/taint_owners.py: which owners of a node's taint list a lost state left, and which are only
reported (the release on a real API server: tests/e2e/pulumi_engine/test_faults.py)."""

from __future__ import annotations

from tools.taint_owners import NODE_PATCH, TAINTS_ONLY, orphans, taint_owners, taint_patch_managers

OURS, LOST = "pulumi-kubernetes-2b2b", "pulumi-kubernetes-1a1a"


def _patch(node: str, manager: str, **metadata) -> dict:
    return {"type": NODE_PATCH, "urn": f"urn:pulumi:prod::gpu-tenancy::{NODE_PATCH}::prod-platform-node-{node}",
            "inputs": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, **metadata},
                       "spec": {"taints": [{"key": "gpu.acme.dev/tenant", "value": "inference", "effect": "NoSchedule"}]},
                       "__fieldManager": manager}}


def test_only_the_taint_patches_of_the_state_name_a_manager():
    label_patch = _patch("n1", "gpu-tenancy", labels={"gpu.acme.dev/pool": "p"})
    del label_patch["inputs"]["spec"]
    namespace = {"type": "kubernetes:core/v1:Namespace", "inputs": {"metadata": {"name": "eval"}, "__fieldManager": "gpu-tenancy"}}
    assert taint_patch_managers([label_patch, _patch("n1", OURS), _patch("n2", LOST), namespace]) == {"n1": OURS, "n2": LOST}


def test_the_owners_are_the_appliers_of_the_list():
    entries = [{"manager": OURS, "operation": "Apply", "fieldsV1": TAINTS_ONLY},
               {"manager": "gpu-tenancy", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:labels": {}}}},
               {"manager": "kubectl-taint", "operation": "Update", "fieldsV1": TAINTS_ONLY},
               {"manager": "kubelet", "operation": "Apply", "subresource": "status", "fieldsV1": {"f:spec": {"f:taints": {}}}}]
    assert taint_owners(entries) == {OURS: TAINTS_ONLY}


def test_a_lost_states_manager_sharing_the_list_with_ours_is_released():
    assert orphans({LOST: TAINTS_ONLY, OURS: TAINTS_ONLY}, OURS) == ([LOST], [])


def test_an_owner_of_more_than_the_list_is_only_reported():
    more = {"f:metadata": {"f:labels": {"f:a": {}}}, **TAINTS_ONLY}
    assert orphans({LOST: more, OURS: TAINTS_ONLY}, OURS) == ([], [LOST])


def test_nothing_is_released_when_the_states_manager_does_not_own_the_list():
    assert orphans({LOST: TAINTS_ONLY}, OURS) == ([], [LOST])


def test_other_tools_owning_the_list_are_not_ours_to_release():
    assert orphans({"kube-controller-manager": TAINTS_ONLY, "gpu-operator": TAINTS_ONLY, OURS: TAINTS_ONLY}, OURS) == ([], [])

"""Node labels and taints of GPU nodes, and what autoscaled node groups must carry."""

from __future__ import annotations

from dataclasses import replace

import yaml

from components.manifests import gpu_nodes
from components.manifests.meta import FIELD_MANAGER, is_taint_patch, object_id
from components.load import load_environment


def _by_name(patches):
    """Label patches by node name."""
    return {p["metadata"]["name"]: p for p in patches if not is_taint_patch(p)}


def _taints_by_name(patches):
    return {p["metadata"]["name"]: p for p in patches if is_taint_patch(p)}


PROD_NODES = ["gpu-a100-01", "gpu-a100-02", "gpu-a100-03", "gpu-a100-04", *(f"gpu-h100-0{i}" for i in range(1, 9))]


def test_a_label_patch_and_a_taint_patch_per_static_node(prod):
    patches = gpu_nodes.node_patches(prod.facts)
    # Every prod pool patches its taints (MIG pools too): label patch, then taint patch, per node.
    assert [(p["metadata"]["name"], is_taint_patch(p)) for p in patches] == [
        (node, taints) for node in PROD_NODES for taints in (False, True)]
    assert all(gpu_nodes.is_node_patch(p) for p in patches)
    for patch in patches:
        if is_taint_patch(patch):
            # Taints only, never forced (an atomic list other controllers write), naming no field manager:
            # the label patch owns that annotation on the Node (the provider applies it), the provider
            # gives the taint patch one of its own.
            assert set(patch) == {"apiVersion", "kind", "metadata", "spec"} and set(patch["spec"]) == {"taints"}
            assert patch["metadata"] == {"name": patch["metadata"]["name"]}
        else:
            # Labels only, forced, under our stable manager.
            assert patch["metadata"]["annotations"] == {"pulumi.com/patchFieldManager": FIELD_MANAGER, "pulumi.com/patchForce": "true"}
            assert "spec" not in patch and patch["metadata"]["labels"]
    # The two patches of a node have distinct identities (renderer order, diff, Pulumi names).
    assert len({object_id(p) for p in patches}) == len(patches) == 2 * len(PROD_NODES)


def test_dedicated_pool_labels_and_taints(prod):
    patches = gpu_nodes.node_patches(prod.facts)
    labels, taints = _by_name(patches), _taints_by_name(patches)
    assert labels["gpu-h100-06"]["metadata"]["labels"] == {
        "gpu.acme.dev/gpu-class": "h100",
        "gpu.acme.dev/pool": "h100-serve",
        "gpu.acme.dev/tenant": "inference",
        "nvidia.com/mig.config": "all-disabled",
    }
    assert taints["gpu-h100-06"]["spec"] == {"taints": [{"effect": "NoSchedule", "key": "gpu.acme.dev/tenant", "value": "inference"}]}
    # dedicated, patchTaints unset: tainted by default
    assert labels["gpu-h100-01"]["metadata"]["labels"]["gpu.acme.dev/tenant"] == "llm-finetune"
    assert taints["gpu-h100-01"]["spec"] == {"taints": [{"effect": "NoSchedule", "key": "gpu.acme.dev/tenant", "value": "llm-finetune"}]}
    # A shared GPU pool carries the GPU taint.
    assert taints["gpu-a100-01"]["spec"] == {"taints": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]}


def test_a_shared_mig_pool_gets_the_gpu_taint_beside_its_forced_mig_layout(prod):
    """Issue 22 item 4: its nodes were left untainted, because one unforced patch could not also force
    the MIG layout over the GPU Operator's all-disabled; the layout's patch and the taint's are apart now."""
    assert gpu_nodes.patches_taints(prod.facts, "a100-mig")
    patches = gpu_nodes.node_patches(prod.facts)
    mig = _by_name(patches)["gpu-a100-03"]
    assert mig["metadata"]["labels"]["nvidia.com/mig.config"] == "eval-mix"
    assert mig["metadata"]["annotations"]["pulumi.com/patchForce"] == "true" and "spec" not in mig
    assert _taints_by_name(patches)["gpu-a100-03"]["spec"]["taints"] == gpu_nodes.pool_taints(prod.facts, "a100-mig") == [
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]


def test_shared_and_mig_pools_have_no_tenant_label(prod):
    patches = _by_name(gpu_nodes.node_patches(prod.facts))
    assert patches["gpu-a100-03"]["metadata"]["labels"] == {
        "gpu.acme.dev/gpu-class": "a100-mig",
        "gpu.acme.dev/pool": "a100-mig",
        "nvidia.com/mig.config": "eval-mix",
    }
    assert "gpu.acme.dev/tenant" not in patches["gpu-a100-01"]["metadata"]["labels"]


def test_time_sliced_pool_gets_device_plugin_config_label(dev):
    patches = _by_name(gpu_nodes.node_patches(dev.facts))
    assert patches["dev-l4-01"]["metadata"]["labels"] == {
        "gpu.acme.dev/gpu-class": "l4",
        "gpu.acme.dev/pool": "l4-shared",
        "nvidia.com/device-plugin.config": "l4",
    }
    assert patches["dev-a100-01"]["metadata"]["labels"]["nvidia.com/mig.config"] == "all-1g.10gb"


def test_patch_taints_false_opts_a_pool_out(prod):
    environment = replace(prod, platform=prod.platform.model_copy(deep=True))
    environment.platform.node_pools["a100-mig"].patch_taints = False
    patches = gpu_nodes.node_patches(environment.facts)
    assert not {"gpu-a100-03", "gpu-a100-04"} & set(_taints_by_name(patches))
    assert {"gpu-a100-03", "gpu-a100-04"} <= set(_by_name(patches)) and "gpu-a100-01" in _taints_by_name(patches)
    for pool in environment.platform.node_pools.values():
        pool.patch_taints = False
    patches = gpu_nodes.node_patches(environment.facts)
    assert patches and all("spec" not in p and p["metadata"]["annotations"]["pulumi.com/patchForce"] == "true" for p in patches)
    assert not any(is_taint_patch(p) for p in patches)


def test_autoscaled_pools_get_requirements_not_patches(project_copy):
    stack = project_copy / "stacks" / "Pulumi.prod.yaml"
    data = yaml.safe_load(stack.read_text())
    pools = data["config"]["gpu-tenancy:platform"]["nodePools"]
    pools["h100-serve"] = {
        "gpuClass": "h100", "gpusPerNode": 8, "nodeSelector": {"karpenter.sh/nodepool": "h100-serve"}, "maxNodes": 3,
    }
    stack.write_text(yaml.safe_dump(data))
    environment = load_environment(project_copy, "prod")
    names = {p["metadata"]["name"] for p in gpu_nodes.node_patches(environment.facts)}
    assert not names & {"gpu-h100-06", "gpu-h100-07", "gpu-h100-08"}
    assert gpu_nodes.node_group_requirements(environment.facts) == {
        "h100-serve": {
            "nodeSelector": {"karpenter.sh/nodepool": "h100-serve"},
            "maxNodes": 3,
            "minNodes": 0,
            "labels": {
                "gpu.acme.dev/gpu-class": "h100",
                "gpu.acme.dev/pool": "h100-serve",
                "gpu.acme.dev/tenant": "inference",
                "nvidia.com/mig.config": "all-disabled",
            },
            # Taints a node is born with fight no one, so dedicated groups always list theirs.
            "taints": [{"effect": "NoSchedule", "key": "gpu.acme.dev/tenant", "value": "inference"}],
        }
    }


def test_dev_mixed_pool_patches_static_node_and_requires_group_labels(dev):
    assert "dev-l4-01" in _by_name(gpu_nodes.node_patches(dev.facts))
    requirements = gpu_nodes.node_group_requirements(dev.facts)
    assert list(requirements) == ["l4-shared"]
    assert requirements["l4-shared"]["labels"]["nvidia.com/device-plugin.config"] == "l4"
    # The autoscaled shared pool's node group must register its nodes with the GPU taint.
    assert requirements["l4-shared"]["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]


def test_no_requirements_without_autoscaled_pools(prod):
    assert gpu_nodes.node_group_requirements(prod.facts) == {}


def test_is_node_patch_only_for_nodes():
    assert gpu_nodes.is_node_patch({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}})
    assert not gpu_nodes.is_node_patch({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}})


def test_only_the_taint_patch_is_a_taint_patch():
    labels, taints = gpu_nodes.label_patch("n", {"a": "b"}), gpu_nodes.taint_patch("n", [{"key": "k", "effect": "NoSchedule"}])
    assert gpu_nodes.is_node_patch(labels) and gpu_nodes.is_node_patch(taints)
    assert not is_taint_patch(labels) and is_taint_patch(taints)
    # Nor is a ConfigMap, or the one patch of earlier versions (labels and taints, tests/node_patch_forms.py).
    assert not is_taint_patch({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "n"}, "spec": {"taints": []}})
    assert not is_taint_patch({**labels, "spec": taints["spec"]})
    assert (object_id(labels), object_id(taints)) == ("v1/Node//n", "v1/Node//n#taints")

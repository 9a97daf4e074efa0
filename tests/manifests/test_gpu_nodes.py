"""Node labels and taints of GPU nodes, and what autoscaled node groups must carry."""

from __future__ import annotations

from dataclasses import replace

import yaml

from components.manifests import gpu_nodes
from components.manifests.meta import FIELD_MANAGER
from components.load import load_environment


def _by_name(patches):
    return {p["metadata"]["name"]: p for p in patches}


def test_one_patch_per_static_node(prod):
    patches = gpu_nodes.node_patches(prod.facts)
    assert [p["metadata"]["name"] for p in patches] == [
        "gpu-a100-01", "gpu-a100-02", "gpu-a100-03", "gpu-a100-04",
        *(f"gpu-h100-0{i}" for i in range(1, 9)),
    ]
    assert all(gpu_nodes.is_node_patch(p) for p in patches)
    assert all(p["metadata"]["annotations"]["pulumi.com/patchFieldManager"] == FIELD_MANAGER for p in patches)


def test_dedicated_pool_labels_and_opt_in_taints(prod):
    patches = _by_name(gpu_nodes.node_patches(prod.facts))
    serve = patches["gpu-h100-06"]
    assert serve["metadata"]["labels"] == {
        "gpu.acme.dev/gpu-class": "h100",
        "gpu.acme.dev/pool": "h100-serve",
        "gpu.acme.dev/tenant": "inference",
        "nvidia.com/mig.config": "all-disabled",
    }
    assert serve["spec"] == {"taints": [{"effect": "NoSchedule", "key": "gpu.acme.dev/tenant", "value": "inference"}]}
    # A taint patch is never forced: forcing the atomic list would drop other managers' taints.
    assert "pulumi.com/patchForce" not in serve["metadata"]["annotations"]
    train = patches["gpu-h100-01"]  # dedicated, patchTaints unset: tainted by default
    assert train["metadata"]["labels"]["gpu.acme.dev/tenant"] == "llm-finetune"
    assert train["spec"] == {"taints": [{"effect": "NoSchedule", "key": "gpu.acme.dev/tenant", "value": "llm-finetune"}]}
    # A shared GPU pool carries the GPU taint, so its patches are not forced either.
    shared = patches["gpu-a100-01"]
    assert shared["spec"] == {"taints": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]}
    assert "pulumi.com/patchForce" not in shared["metadata"]["annotations"]


def test_a_shared_mig_pool_keeps_its_forced_label_patch_unless_the_stack_asks_for_the_taint(prod):
    # Its MIG layout must be forced over the GPU Operator's all-disabled; an atomic taint list cannot be.
    mig = _by_name(gpu_nodes.node_patches(prod.facts))["gpu-a100-03"]
    assert "spec" not in mig and mig["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    assert gpu_nodes.pool_taints(prod.facts, "a100-mig") == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
    environment = replace(prod, platform=prod.platform.model_copy(deep=True))
    environment.platform.node_pools["a100-mig"].patch_taints = True
    mig = _by_name(gpu_nodes.node_patches(environment.facts))["gpu-a100-03"]
    assert mig["spec"]["taints"][0]["key"] == "nvidia.com/gpu" and "pulumi.com/patchForce" not in mig["metadata"]["annotations"]


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
    for pool in environment.platform.node_pools.values():
        pool.patch_taints = False
    patches = gpu_nodes.node_patches(environment.facts)
    assert patches and all("spec" not in p and p["metadata"]["annotations"]["pulumi.com/patchForce"] == "true" for p in patches)


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

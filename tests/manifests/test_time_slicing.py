"""Time-slicing: the device-plugin ConfigMap, the node label that selects an entry, and capacity."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from components.manifests import time_slicing
from components.fleet.gpu_capacity import GPU_SHARED, capacity, class_resource, gpu_quota_by_resource, mps_memory_per_replica
from components.spec.stack import Platform
from components.spec.tenant import Tenant

# Byte-for-byte copies of NVIDIA's files (see SOURCES.md next to them).
REFERENCE = Path(__file__).parents[1] / "fixtures" / "gpu-operator"  # upstream copies, see SOURCES.md there


def _platform(**time_slicing) -> Platform:
    return Platform.model_validate({
        "labelDomain": "gpu.example.com",
        "gpuClasses": {
            "t4": {"model": "T4", "product": "Tesla-T4", "memory": "16Gi", "sharing": "timeSlicing",
                   "timeSlicing": {"replicas": 8, **time_slicing}},
            "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
        },
        "nodePools": {"t4": {"gpuClass": "t4", "gpusPerNode": 4, "nodes": ["n1", "n2", "n3"]},
                      "h100": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["n4"]}},
    })


def test_dev_config_map(dev):
    config_map = time_slicing.device_plugin_config_map(dev.facts)
    assert config_map["metadata"]["name"] == "gpu-tenancy-device-plugin-config"
    assert config_map["metadata"]["namespace"] == "gpu-operator"
    assert list(config_map["data"]) == ["l4"]  # one entry per time-sliced class, keyed by class
    assert yaml.safe_load(config_map["data"]["l4"]) == {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {"timeSlicing": {
            "renameByDefault": False,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
        }},
    }


def test_same_schema_as_nvidia_examples(dev):
    sample = yaml.safe_load((REFERENCE / "time-slicing-config-sample.yaml").read_text())
    reference = yaml.safe_load(next(iter(sample["data"].values())))
    ours = yaml.safe_load(time_slicing.device_plugin_config_map(dev.facts)["data"]["l4"])
    assert set(ours) == set(reference)
    assert ours["version"] == reference["version"] and ours["flags"] == reference["flags"]
    assert set(ours["sharing"]["timeSlicing"]) == set(reference["sharing"]["timeSlicing"])
    assert set(ours["sharing"]["timeSlicing"]["resources"][0]) == set(reference["sharing"]["timeSlicing"]["resources"][0])


def test_node_label_selects_the_class_entry(dev):
    platform = dev.platform
    assert time_slicing.node_labels(platform, platform.node_pools["l4-shared"]) == {"nvidia.com/device-plugin.config": "l4"}
    assert time_slicing.node_labels(platform, platform.node_pools["a100-mig"]) == {}


def test_capacity_counts_replicas(dev):
    # dev l4-shared: 1 static node + up to 1 autoscaled node, 2 GPUs each, 4 replicas per GPU.
    assert capacity(dev.platform).per_class["l4"] == (1 + 1) * 2 * 4 == 16


def test_renamed_shares_are_a_separate_resource():
    platform = _platform(renameByDefault=True, failRequestsGreaterThanOne=False)
    entry = time_slicing.sharing_config(platform.gpu_classes["t4"])["sharing"]["timeSlicing"]
    assert entry["renameByDefault"] is True and entry["failRequestsGreaterThanOne"] is False
    assert entry["resources"] == [{"name": "nvidia.com/gpu", "replicas": 8}]
    assert class_resource(platform.gpu_classes["t4"]) == GPU_SHARED == "nvidia.com/gpu.shared"
    result = capacity(platform)
    assert result.per_class == {"t4": 3 * 4 * 8, "h100": 8}
    tenant = Tenant.model_validate({"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "a",
                                    "displayName": "A", "costCenter": "c", "gpu": {"classes": ["t4", "h100"]},
                                    "quota": {"gpu": {"t4": 10, "h100": 2}}})
    assert gpu_quota_by_resource(tenant, platform) == {"nvidia.com/gpu": 2, "nvidia.com/gpu.shared": 10}


MPS_POOLS = {"l4": {"gpuClass": "l4-mps", "gpusPerNode": 2, "nodes": ["m1", "m2"]}}


def _mps_class(**mps) -> dict:
    return {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "mps", "mps": {"replicas": 3, **mps}}


def test_mps_class_gets_an_mps_entry_selected_like_time_slicing(make_environment):
    environment = make_environment(gpuClasses={"l4-mps": _mps_class()}, nodePools=MPS_POOLS)
    config_map = time_slicing.device_plugin_config_map(environment.facts)
    assert yaml.safe_load(config_map["data"]["l4-mps"]) == {
        "version": "v1",
        "flags": {"migStrategy": "none"},
        "sharing": {"mps": {
            "renameByDefault": False,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 3}],
        }},
    }
    platform = environment.platform
    assert time_slicing.node_labels(platform, platform.node_pools["l4"]) == {"nvidia.com/device-plugin.config": "l4-mps"}
    assert capacity(platform).per_class["l4-mps"] == 2 * 2 * 3
    # 24Gi / 3 = 8Gi; the plugin's MPS daemon divides the device's real total the same way.
    assert mps_memory_per_replica(platform.gpu_classes["l4-mps"]) == "8Gi"


def test_renamed_mps_shares_are_metered_as_shared_gpus(make_environment):
    platform = make_environment(gpuClasses={"l4-mps": _mps_class(renameByDefault=True)}, nodePools=MPS_POOLS).platform
    entry = time_slicing.sharing_config(platform.gpu_classes["l4-mps"])["sharing"]["mps"]
    assert entry["renameByDefault"] is True
    assert class_resource(platform.gpu_classes["l4-mps"]) == GPU_SHARED


def test_mps_memory_per_replica_is_whole_mebibytes(make_environment):
    gpu_classes = {"odd": {**_mps_class(), "memory": "80G", "mps": {"replicas": 7}}}
    platform = make_environment(gpuClasses=gpu_classes, nodePools={}).platform
    # 80e9 bytes / 7 = 11428571428 bytes, floored to 10899 MiB.
    assert mps_memory_per_replica(platform.gpu_classes["odd"]) == "10899Mi"
    assert mps_memory_per_replica(platform.gpu_classes["odd"].model_copy(update={"sharing": "exclusive", "mps": None})) is None


def test_no_config_map_without_time_sliced_classes(dev):
    platform = dev.platform.model_copy(deep=True)
    del platform.gpu_classes["l4"]
    platform.node_pools.pop("l4-shared")
    assert time_slicing.device_plugin_config_map(replace(dev, platform=platform).facts) is None


def test_sharing_config_refuses_other_classes():
    with pytest.raises(ValueError, match="not shared by the device plugin"):
        time_slicing.sharing_config(_platform().gpu_classes["h100"])

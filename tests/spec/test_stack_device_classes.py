"""The stack file's DRA settings: `deviceClasses` and a GPU class's `serving`."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from components.spec.stack import Platform

H100 = {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"}


def platform(gpu_classes=None, device_classes=None, **extra) -> Platform:
    return Platform.model_validate({"labelDomain": "gpu.example.com", "gpuClasses": gpu_classes or {},
                                    "deviceClasses": device_classes or {}, **extra})


def refused(**kwargs) -> str:
    with pytest.raises(ValidationError) as err:
        platform(**kwargs)
    return str(err.value)


def test_a_migration_class_and_driver_classes_are_accepted():
    p = platform({"h100": {**H100, "serving": "both"}}, {
        "h100.gpu.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "h100", "extendedResourceName": "nvidia.com/gpu"},
        "gpu.nvidia.com": {"owner": "driver"},
    })
    assert p.device_classes["gpu.nvidia.com"].owner == "driver"
    assert p.gpu_classes["h100"].serving == "both"


def test_served_by_both_without_the_mapping_would_grant_twice():
    message = refused(gpu_classes={"h100": {**H100, "serving": "both"}},
                      device_classes={"h100.gpu.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "h100"}})
    assert "extendedResourceName: nvidia.com/gpu" in message and "twice" in message


def test_a_dra_class_needs_a_device_class():
    assert "no deviceClasses entry has `gpuClass: h100`" in refused(gpu_classes={"h100": {**H100, "serving": "dra"}})


def test_device_class_of_a_device_plugin_class_is_refused():
    message = refused(gpu_classes={"h100": H100},
                      device_classes={"h100.gpu.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "h100"}})
    assert "served by the device plugin only" in message


def test_unknown_gpu_class_is_named():
    message = refused(gpu_classes={"h100": {**H100, "serving": "dra"}},
                      device_classes={"x.gpu.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "h200"}})
    assert "'h200' is not a key of gpuClasses; name one of: h100" in message


def test_tool_owned_class_needs_a_driver():
    assert "needs `driver`" in refused(device_classes={"x.gpu.example.com": {}})


def test_driver_owned_class_takes_no_selector():
    message = refused(device_classes={"gpu.nvidia.com": {"owner": "driver", "selector": "true"}})
    assert "the driver writes its own" in message


def test_shared_classes_cannot_move_to_dra_yet():
    message = refused(gpu_classes={"l4": {**H100, "sharing": "timeSlicing", "timeSlicing": {"replicas": 4}, "serving": "dra"}},
                      device_classes={"l4.gpu.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "l4"}})
    assert "needs sharing 'exclusive'" in message


def test_device_classes_need_kubernetes_1_34():
    message = refused(device_classes={"gpu.nvidia.com": {"owner": "driver"}}, kubernetesVersion="v1.33")
    assert "v1.34 or newer" in message


def test_extended_resource_name_must_be_a_resource_name():
    assert "extendedResourceName" in refused(device_classes={"gpu.nvidia.com": {"owner": "driver", "extendedResourceName": "gpu"}})


# ---- classes described by their devices' ResourceSlice attributes (`devices`) ----------------------

B200_DEVICES = {"model": "B200-180GB", "memory": "180Gi", "serving": "dra",
                "devices": {"productName": "NVIDIA B200", "minMemory": "170Gi"}}


def test_a_class_with_devices_gets_its_device_class_generated_with_the_cel_selector():
    p = platform({"b200": B200_DEVICES})
    generated = p.device_classes["b200.gpu.example.com"]
    assert (generated.owner, generated.gpu_class, generated.driver, generated.extended_resource_name) == ("tool", "b200", "gpu.nvidia.com", None)
    assert generated.selector == ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200' && "
                                  "device.attributes['gpu.nvidia.com'].type == 'gpu' && "
                                  "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('170Gi')) >= 0")
    # No GFD product label is needed: the GPU Operator's DRA stack has none.
    assert p.gpu_classes["b200"].product is None


def test_an_entry_naming_the_class_keeps_its_name_and_gets_the_selector_it_lacks():
    p = platform({"b200": B200_DEVICES}, {"b200.dra.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "b200"},
                                          "h.example.com": {"driver": "gpu.nvidia.com", "gpuClass": "b200", "selector": "true"}})
    assert sorted(p.device_classes) == ["b200.dra.example.com", "h.example.com"]
    assert p.device_classes["b200.dra.example.com"].selector.startswith("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'")
    assert p.device_classes["h.example.com"].selector == "true"


def test_serving_both_with_devices_maps_the_device_plugin_resource():
    p = platform({"h100": {**H100, "serving": "both", "devices": {"productName": "NVIDIA H100 80GB HBM3", "deviceType": None}}})
    generated = p.device_classes["h100.gpu.example.com"]
    assert generated.extended_resource_name == "nvidia.com/gpu" and "type" not in generated.selector


def test_product_is_required_unless_the_class_is_dra_only_with_devices():
    without = {k: v for k, v in H100.items() if k != "product"}
    assert "`product` (the nvidia.com/gpu.product label) is required" in refused(gpu_classes={"h100": without})
    assert "`product` (the nvidia.com/gpu.product label) is required" in refused(gpu_classes={"h100": {**without, "serving": "dra"}},
                                                                                  device_classes={"h.example.com": {"driver": "d.dev", "gpuClass": "h100"}})
    assert "`devices` describes DRA devices" in refused(gpu_classes={"h100": {**H100, "devices": {"productName": "NVIDIA H100"}}})
    assert "productName" in refused(gpu_classes={"b200": {**B200_DEVICES, "devices": {"productName": "it's"}}})

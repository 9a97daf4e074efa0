"""The isolation facts per sharing mode: accurate, complete, and metered by the keys the quota builder writes."""

from __future__ import annotations

import typing

import pytest

from components.fleet import gpu_capacity as cap
from components.fleet.facts import FleetFacts
from components.fleet.isolation import SHARING_MODES, isolation_of
from components.manifests.device_classes import device_class_hard
from components.manifests.quota import gpu_hard
from components.spec.stack import GpuClass, Platform
from components.spec.tenant import Tenant

BY_MODE = {record.mode: record for record in SHARING_MODES}


def _class(**sharing) -> GpuClass:
    return GpuClass(model="L4", product="NVIDIA-L4", memory="24Gi", **sharing)


def _tenant(quota: dict) -> Tenant:
    return Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1",
                  gpu={"classes": sorted(quota)}, quota={"gpu": quota})


def _view(tenant: Tenant, platform: Platform):
    """What the tenant's builders read on `platform` (a fleet of no other tenant)."""
    return FleetFacts("dev", platform, ()).view(tenant)


def test_every_sharing_value_of_the_stack_file_has_exactly_one_record():
    sharing_values = typing.get_args(GpuClass.model_fields["sharing"].annotation)

    assert sorted(r.sharing for r in SHARING_MODES if r.sharing is not None) == sorted(sharing_values)


def test_the_issue_s_modes_are_all_there_in_a_stable_order():
    assert list(BY_MODE) == ["exclusive", "MIG", "MPS", "time-slicing", "KAI fraction", "KAI fraction with HAMi-core", "DRA"]


@pytest.mark.parametrize("mode", ["time-slicing", "KAI fraction"])
def test_modes_without_a_memory_bound_say_so_and_isolate_no_faults(mode):
    record = BY_MODE[mode]

    assert record.shares_a_gpu and not record.bounds_memory
    assert record.memory_bound.startswith("**none**") and record.fault_isolation.startswith("**none**")


def test_mps_bounds_memory_per_client_but_not_faults():
    record = BY_MODE["MPS"]

    assert record.bounds_memory and "GPU memory / `replicas`" in record.memory_bound
    assert "not full" in record.fault_isolation and "active thread percentage" in record.compute_share


def test_mig_is_the_only_shared_mode_with_hardware_isolation():
    hardware = [r.mode for r in SHARING_MODES if r.shares_a_gpu and r.fault_isolation.startswith("hardware")]

    assert hardware == ["MIG"] and BY_MODE["MIG"].memory_bound.startswith("hardware")


def test_hami_core_is_a_soft_bound_in_the_container_with_no_fault_isolation():
    record = BY_MODE["KAI fraction with HAMi-core"]

    assert record.memory_bound.startswith("soft") and "CUDA_DEVICE_MEMORY_LIMIT" in record.memory_bound
    assert record.fault_isolation == "**none**" and "inside the container" in record.enforced_by


def test_kai_fractions_are_metered_by_the_queue_not_by_resource_quota():
    for mode in ("KAI fraction", "KAI fraction with HAMi-core"):
        assert "KAI queue" in BY_MODE[mode].metered_by and "requests." not in BY_MODE[mode].metered_by


@pytest.mark.parametrize(
    ("gpu_class", "mode"),
    [
        (_class(), "exclusive"),
        (_class(sharing="mps", mps={"replicas": 3}), "MPS"),
        (_class(sharing="timeSlicing", time_slicing={"replicas": 4, "renameByDefault": True}), "time-slicing"),
    ],
    ids=["exclusive", "mps", "time-slicing-renamed"],
)
def test_the_quota_key_the_builder_writes_for_a_class_is_the_one_its_row_names(gpu_class, mode):
    platform = Platform(labelDomain="gpu.example.com", gpuClasses={"l4": gpu_class})

    granted = {key for key, value in gpu_hard(_view(_tenant({"l4": 2}), platform)).items() if value == "2"}

    assert granted == {cap.quota_key(cap.class_resource(gpu_class))}
    assert isolation_of(gpu_class).mode == mode
    assert f"`{granted.pop()}`" in BY_MODE[mode].metered_by


def test_the_mig_row_names_the_mixed_strategy_key_form_the_builder_writes():
    keys = gpu_hard(_view(_tenant({}), Platform(labelDomain="gpu.example.com", gpuClasses={
        "a100": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"}})))

    assert "requests.nvidia.com/mig-1g.10gb" in keys
    assert "`requests.nvidia.com/mig-<profile>` (mixed)" in BY_MODE["MIG"].metered_by


def test_the_dra_row_names_both_key_forms_the_builder_writes():
    platform = Platform(labelDomain="gpu.example.com", deviceClasses={"gpu.nvidia.com": {"owner": "driver"}})

    keys = device_class_hard(_view(_tenant({}), platform), set())

    for key in keys:
        assert f"`{key.replace('gpu.nvidia.com', '<class>')}`" in BY_MODE["DRA"].metered_by


def test_isolation_of_a_dra_served_class_is_its_sharing_exclusive():
    h100 = GpuClass(model="H100-80GB", product="NVIDIA-H100-80GB-HBM3", memory="80Gi", serving="dra")

    assert isolation_of(h100) is BY_MODE["exclusive"]

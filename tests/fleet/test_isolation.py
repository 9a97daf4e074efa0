"""The isolation facts per sharing mode: accurate, complete, and metered by the keys the quota builder writes."""

from __future__ import annotations

import typing
from fractions import Fraction

import pytest

from components.fleet import gpu_capacity as cap
from components.fleet import isolation
from components.fleet.facts import FleetFacts
from components.fleet.isolation import isolation_of, isolation_rows
from components.manifests import monitoring_rules
from components.manifests.device_classes import device_class_hard
from components.manifests.quota import gpu_hard
from components.review import capacity_report
from components.spec.stack import GpuClass, Platform
from components.spec.tenant import Tenant
from tools import isolation_table

BY_MODE = {record.mode: record for record in isolation_rows()}


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

    assert sorted(r.sharing for r in isolation_rows() if r.sharing is not None) == sorted(sharing_values)


def test_the_issue_s_modes_are_all_there_in_a_stable_order():
    assert list(BY_MODE) == ["exclusive", "MIG", "MPS", "time-slicing", "KAI fraction", "KAI fraction with HAMi-core", "DRA",
                            "MIG through DRA"]


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
    """Whether the MIG Manager or the DRA driver makes the instances, the GPU isolates them."""
    hardware = [r.mode for r in isolation_rows() if r.shares_a_gpu and r.fault_isolation.startswith("hardware")]

    assert hardware == ["MIG", "MIG through DRA"] and all(BY_MODE[m].memory_bound.startswith("hardware") for m in hardware)


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


# --- a sharing mode added in a test-only fixture: the spec's value and one record, nothing else --------

_DOUBLED_ROW = isolation.Isolation(
    mode="doubled", set_by="`sharing: doubled`", sharing="doubled", shares_a_gpu=True, bounds_memory=False,
    memory_bound="**none**", fault_isolation="**none**", compute_share="half", metered_by="`requests.example.com/half-gpu`",
    enforced_by="nothing",
)
DOUBLED = isolation.SharingMode(
    isolation=_DOUBLED_ROW,
    resource=lambda gpu_class: "example.com/half-gpu",
    node_devices=lambda platform, pool, gpu_class: (pool.gpus_per_node * 2, {}),
    device_share=lambda gpu_class, resource, gpus, devices: Fraction(1, 2),
    device_plugin=None,
    partitions_gpus=False,
    label=lambda gpu_class: "doubled x2",
    statement=lambda gpu_class: "two pods per GPU",
)


def _rebuild_spec() -> None:
    GpuClass.model_rebuild(force=True)
    Platform.model_rebuild(force=True)


@pytest.fixture
def spec_allows_doubled(monkeypatch):
    """The stack file's `sharing` also allows "doubled" (the spec's half of adding a mode)."""
    field = GpuClass.model_fields["sharing"]
    monkeypatch.setattr(field, "annotation", typing.Literal[(*typing.get_args(field.annotation), "doubled")])
    _rebuild_spec()
    yield
    monkeypatch.undo()
    _rebuild_spec()


@pytest.fixture
def doubled(spec_allows_doubled, monkeypatch):
    """The spec's value plus its one record in the table: all a new sharing mode is."""
    monkeypatch.setattr(isolation, "BY_SHARING", {**isolation.BY_SHARING, "doubled": DOUBLED})


def _doubled_platform() -> Platform:
    return Platform.model_validate({
        "labelDomain": "gpu.example.com",
        "gpuClasses": {"half": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "doubled"}},
        "nodePools": {"p": {"gpuClass": "half", "gpusPerNode": 4, "nodes": ["n1", "n2"]}},
    })


def test_a_new_sharing_mode_s_capacity_quota_keys_chargeback_and_doc_row_follow_its_record(doubled):
    platform = _doubled_platform()

    assert cap.capacity(platform).per_class == {"half": 16}
    assert cap.node_gpu_resources(platform, platform.node_pools["p"]) == {"example.com/half-gpu": 8}
    assert gpu_hard(_view(_tenant({"half": 3}), platform))["requests.example.com/half-gpu"] == "3"
    assert monitoring_rules.class_capacity(platform) == {("half", "example.com/half-gpu"): 16}
    assert monitoring_rules.device_gpu_fractions(platform) == {("half", "example.com/half-gpu"): Fraction(1, 2)}
    assert capacity_report.sharing_mode(platform.gpu_classes["half"]) == "doubled x2"
    assert isolation_of(platform.gpu_classes["half"]) is _DOUBLED_ROW
    assert "| doubled | `sharing: doubled` | **none** |" in isolation_table.render_table()


def test_a_sharing_value_without_a_record_is_an_error_not_a_default(spec_allows_doubled):
    platform = _doubled_platform()

    with pytest.raises(LookupError, match="sharing 'doubled' has no SharingMode"):
        cap.capacity(platform)
    with pytest.raises(ImportError, match=r"without a SharingMode \['doubled'\]"):
        isolation._check_complete()


def test_every_sharing_value_has_exactly_one_sharing_mode_whose_row_is_its_own():
    sharing_values = typing.get_args(GpuClass.model_fields["sharing"].annotation)

    assert sorted(isolation.BY_SHARING) == sorted(sharing_values)
    assert all(mode.isolation.sharing == value for value, mode in isolation.BY_SHARING.items())

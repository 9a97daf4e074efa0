"""`tenants validate` warns when tenants can share a GPU that bounds no pod's memory, unless the stack accepts it."""

from __future__ import annotations

import pytest

from components import load_environment
from components.load import environment_from_data
from components.spec.problems import InvalidInput

REPO_DOMAIN = "gpu.example.com"


def _platform(sharing: dict, acknowledged: list[str] | None = None, pools: dict | None = None) -> dict:
    platform = {
        "labelDomain": REPO_DOMAIN,
        "gpuClasses": {"l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", **sharing}},
        "nodePools": pools or {"l4-shared": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1", "n2"]}},
    }
    if acknowledged is not None:
        platform["gpuSharing"] = {"acknowledgeNoMemoryBound": acknowledged}
    return platform


def _tenant(name: str, **gpu) -> dict:
    return {
        "apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": name, "displayName": name.title(),
        "costCenter": "cc-1", "gpu": {"classes": ["l4"], **gpu}, "quota": {"gpu": {"l4": 1}},
    }


TIME_SLICED = {"sharing": "timeSlicing", "timeSlicing": {"replicas": 4}}


def _sharing_warnings(environment) -> list[str]:
    return [str(p) for p in environment.warnings if "gpuSharing.acknowledgeNoMemoryBound" in p.message]


def test_two_tenants_on_a_time_sliced_shared_pool_are_warned_about_at_the_class():
    environment = environment_from_data("dev", _platform(TIME_SLICED), {"a": _tenant("a"), "b": _tenant("b")})

    [warning] = _sharing_warnings(environment)

    assert warning.startswith("data:platform of stack dev: warning: config.gpu-tenancy:platform.gpuClasses.l4.sharing: ")
    assert "GPU class 'l4' is shared by time-slicing, and tenants a, b may run pods on the same GPU (pool l4-shared)" in warning
    assert "one tenant's pod can take all of a GPU's memory or end the others' kernels" in warning


def test_the_acknowledgement_silences_it():
    environment = environment_from_data("dev", _platform(TIME_SLICED, ["l4"]), {"a": _tenant("a"), "b": _tenant("b")})

    assert environment.warnings == []


@pytest.mark.parametrize("sharing", [{"sharing": "mps", "mps": {"replicas": 4}}, {"sharing": "exclusive"}], ids=["mps", "exclusive"])
def test_modes_with_a_memory_bound_or_no_sharing_are_not_warned_about(sharing):
    environment = environment_from_data("dev", _platform(sharing), {"a": _tenant("a"), "b": _tenant("b")})

    assert _sharing_warnings(environment) == []


def test_one_tenant_alone_on_the_class_is_not_warned_about():
    environment = environment_from_data("dev", _platform(TIME_SLICED), {"a": _tenant("a")})

    assert _sharing_warnings(environment) == []


def test_a_dedicated_pool_is_not_shared_across_tenants():
    pools = {
        "l4-a": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]},
        "l4-b": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n2"]},
    }
    tenants = {"a": _tenant("a", dedicatedPools=["l4-a"]), "b": _tenant("b", dedicatedPools=["l4-b"])}

    assert _sharing_warnings(environment_from_data("dev", _platform(TIME_SLICED, pools=pools), tenants)) == []


def test_only_the_shared_pool_is_named_when_one_pool_is_dedicated():
    pools = {
        "l4-a": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n1"]},
        "l4-shared": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["n2"]},
    }
    tenants = {"a": _tenant("a", dedicatedPools=["l4-a"]), "b": _tenant("b"), "c": _tenant("c")}

    [warning] = _sharing_warnings(environment_from_data("dev", _platform(TIME_SLICED, pools=pools), tenants))

    assert "tenants a, b, c may run pods on the same GPU (pool l4-shared)" in warning


def test_acknowledging_an_unknown_class_is_an_error():
    with pytest.raises(InvalidInput) as raised:
        environment_from_data("dev", _platform(TIME_SLICED, ["l5"]), {"a": _tenant("a")})

    assert [p.field for p in raised.value.problems] == ["config.gpu-tenancy:platform.gpuSharing.acknowledgeNoMemoryBound[0]"]
    assert "unknown GPU class 'l5'" in raised.value.problems[0].message


def test_acknowledging_a_class_with_a_memory_bound_is_pointed_out():
    environment = environment_from_data("dev", _platform({"sharing": "mps", "mps": {"replicas": 4}}, ["l4"]), {"a": _tenant("a")})

    [warning] = [p for p in environment.warnings if p.field.endswith("acknowledgeNoMemoryBound[0]")]
    assert "shared by MPS, which bounds each pod's GPU memory: there is nothing to acknowledge" in warning.message


def test_the_dev_example_shares_its_time_sliced_l4s_on_purpose():
    from pathlib import Path

    dev = load_environment(Path(__file__).resolve().parents[2], "dev")

    assert dev.platform.gpu_sharing.acknowledge_no_memory_bound == ["l4"]
    assert _sharing_warnings(dev) == []


def test_a_large_fleet_is_named_in_part_and_counted():
    tenants = {f"t{i}": _tenant(f"t{i}") for i in range(7)}

    [warning] = _sharing_warnings(environment_from_data("dev", _platform(TIME_SLICED), tenants))

    assert "tenants t0, t1, t2, t3, t4 and 2 more may run pods on the same GPU" in warning


def _kai_fractions(memory_bound: str | None = None) -> dict:
    return {"sharing": "exclusive", "kaiFractions": {"memoryBound": memory_bound} if memory_bound else {}}


def _kai(sharing: dict, acknowledged: list[str] | None = None) -> dict:
    return {**_platform(sharing, acknowledged), "scheduler": "kai"}


def test_kai_fractions_without_a_memory_bound_are_warned_about_at_the_setting():
    environment = environment_from_data("dev", _kai(_kai_fractions()), {"a": _tenant("a"), "b": _tenant("b")})

    [warning] = _sharing_warnings(environment)

    assert warning.startswith("data:platform of stack dev: warning: config.gpu-tenancy:platform.gpuClasses.l4.kaiFractions")
    assert "GPU class 'l4' is shared by KAI fraction, and tenants a, b may run pods on the same GPU (pool l4-shared)" in warning
    assert "(or kaiFractions.memoryBound: hamicore, a soft bound)" in warning
    assert environment_from_data("dev", _kai(_kai_fractions(), ["l4"]), {"a": _tenant("a"), "b": _tenant("b")}).warnings == []


def test_kai_fractions_bounded_by_hamicore_are_not_warned_about_and_need_no_acknowledgement():
    environment = environment_from_data("dev", _kai(_kai_fractions("hamicore")), {"a": _tenant("a"), "b": _tenant("b")})
    assert _sharing_warnings(environment) == []

    acknowledged = environment_from_data("dev", _kai(_kai_fractions("hamicore"), ["l4"]), {"a": _tenant("a")})
    [warning] = [p for p in acknowledged.warnings if p.field.endswith("acknowledgeNoMemoryBound[0]")]
    assert "shared by KAI fraction with HAMi-core, which bounds each pod's GPU memory" in warning.message


@pytest.mark.parametrize("platform, field, message", [
    (_platform(_kai_fractions("hamicore")), "gpuClasses.l4.kaiFractions", "kaiFractions needs `scheduler: kai` (scheduler is 'none')"),
    (_kai({"sharing": "timeSlicing", "timeSlicing": {"replicas": 4}, "kaiFractions": {}}), "gpuClasses.l4",
     "`kaiFractions` needs sharing 'exclusive'"),
], ids=["no KAI", "time-sliced"])
def test_kai_fractions_need_kai_and_whole_gpus(platform, field, message):
    with pytest.raises(InvalidInput) as raised:
        environment_from_data("dev", platform, {"a": _tenant("a")})

    [problem] = raised.value.problems
    assert problem.field == f"config.gpu-tenancy:platform.{field}" and message in problem.message


def test_hamicore_is_one_setting_for_every_class():
    platform = _kai(_kai_fractions("hamicore"))
    platform["gpuClasses"]["h100"] = {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi", "kaiFractions": {}}
    with pytest.raises(InvalidInput) as raised:
        environment_from_data("dev", platform, {"a": _tenant("a")})

    [problem] = raised.value.problems
    assert problem.field == "config.gpu-tenancy:platform.gpuClasses.l4.kaiFractions.memoryBound"
    assert "kaiFractions.memoryBound must be the same for every class" in problem.message
    assert "got h100: none, l4: hamicore" in problem.message

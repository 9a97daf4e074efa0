"""MIG through DRA (tests/fixtures/dra-mig): a DeviceClass per profile of the pools' layouts, metered by
quota.mig, capacity from the geometry table's partitions per GPU x the pool's GPUs, the isolation row."""

from __future__ import annotations

from pathlib import Path

from components.fleet import gpu_capacity as cap
from components.fleet.isolation import isolation_of, isolation_rows
from components.load import load_environment
from components.manifests.build import environment_objects
from components.manifests.claim_policy import claimable_device_classes
from components.manifests.device_classes import device_classes

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "dra-mig"
SMALL, LARGE = "a100-mig-1g.10gb.gpu.mig.dev", "a100-mig-3g.40gb.gpu.mig.dev"


def _env():
    return load_environment(FIXTURE, "dra")


def test_a_device_class_per_layout_profile_selects_the_drivers_mig_devices_by_profile():
    env = _env()
    by_name = {o["metadata"]["name"]: o for o in device_classes(env.facts)}
    assert sorted(by_name) == [SMALL, LARGE, "h100.gpu.mig.dev"]
    cel = [s["cel"]["expression"] for s in by_name[SMALL]["spec"]["selectors"]]
    assert cel == ["device.driver == 'gpu.nvidia.com'",
                   "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB' && "
                   "device.attributes['gpu.nvidia.com'].type == 'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"]
    assert "extendedResourceName" not in by_name[SMALL]["spec"]


def test_quota_keys_hold_the_tenants_mig_grant_and_only_granted_classes_are_claimable():
    env = _env()
    objects = environment_objects(env)
    hard = {t: next(o for o in objects[t] if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == "tenant-quota")["spec"]["hard"]
            for t in ("vision", "robotics", "speech")}
    for device_class, granted in ((SMALL, "7"), (LARGE, "1")):
        assert hard["vision"][f"requests.deviceclass.resource.kubernetes.io/{device_class}"] == granted
        assert hard["vision"][f"{device_class}.deviceclass.resource.k8s.io/devices"] == granted
        assert hard["robotics"][f"{device_class}.deviceclass.resource.k8s.io/devices"] == "0"
    views = {t.name: (t.spec, env.view(t.spec)) for t in env.tenants}
    assert claimable_device_classes(*views["vision"]) == [SMALL, LARGE]
    assert claimable_device_classes(*views["robotics"]) == ["h100.gpu.mig.dev"]
    assert claimable_device_classes(*views["speech"]) == []


def test_capacity_is_the_layouts_partitions_per_gpu_times_the_pools_gpus_and_no_mig_manager_is_involved():
    env = _env()
    capacity = cap.capacity(env.platform)
    assert capacity.per_mig_profile == {"1g.10gb": 2 * 4, "3g.40gb": 2 * 1}
    assert cap.queue_gpu_resources(env.platform, env.platform.node_pools["a100-mig"]) == {
        f"deviceclass.resource.kubernetes.io/{SMALL}": 4, f"deviceclass.resource.kubernetes.io/{LARGE}": 1}
    platform_objects = environment_objects(env)["_platform"]
    assert not [o for o in platform_objects if o["kind"] == "ConfigMap" and "mig" in o["metadata"]["name"]]
    assert not [o for o in platform_objects if "nvidia.com/mig.config" in str(o.get("metadata", {}).get("labels", {}))]


def test_the_isolation_row_says_mig_through_dra_isolates_as_mig_does():
    env = _env()
    row, mig_row = isolation_of(env.platform.gpu_classes["a100-mig"]), isolation_rows()[1]
    assert row.mode == "MIG through DRA" and row in isolation_rows()
    assert (row.memory_bound, row.fault_isolation, row.compute_share) == (mig_row.memory_bound, mig_row.fault_isolation, mig_row.compute_share)
    assert row.memory_bound.startswith("hardware") and "shared counters" in row.enforced_by
    assert "requests.deviceclass.resource.kubernetes.io/<class>-<profile>.<labelDomain>" in row.metered_by

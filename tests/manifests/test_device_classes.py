"""DRA DeviceClasses the tool owns, and the quota keys that meter every DeviceClass of a stack."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from components.load import load_environment
from components.manifests.build import environment_objects
from components.manifests.device_classes import device_classes

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dra"
DRA_KEYS = ("requests.deviceclass.resource.kubernetes.io/{}", "{}.deviceclass.resource.k8s.io/devices")


@pytest.fixture(scope="module")
def dra():
    environment = load_environment(FIXTURE, "dra")
    return environment, environment_objects(environment)


def quota_hard(objects, tenant, namespace=None, name="tenant-quota"):
    return next(
        o for o in objects[tenant]
        if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == name
        and o["metadata"]["namespace"] == (namespace or tenant)
    )["spec"]["hard"]


def test_only_tool_owned_classes_are_created_with_driver_and_selector(dra):
    environment, _ = dra
    by_name = {o["metadata"]["name"]: o for o in device_classes(environment.facts)}
    assert sorted(by_name) == ["b200.gpu.dra.dev", "h100.gpu.dra.dev"]  # gpu.nvidia.com, mig.nvidia.com: the driver's
    h100 = by_name["h100.gpu.dra.dev"]["spec"]
    assert h100["extendedResourceName"] == "nvidia.com/gpu"
    assert [s["cel"]["expression"] for s in h100["selectors"]] == [
        "device.driver == 'gpu.nvidia.com'",
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    ]


def test_device_classes_are_platform_objects(dra):
    _, objects = dra
    assert sorted(o["metadata"]["name"] for o in objects["_platform"] if o["kind"] == "DeviceClass") == [
        "b200.gpu.dra.dev", "h100.gpu.dra.dev"]


def test_device_classes_validate_strictly_where_resource_v1_exists(dra, kube_schemas):
    environment, _ = dra
    versions = [v for v in kube_schemas.versions if Version(v) >= Version("1.34")]
    assert versions
    for version in versions:
        for obj in device_classes(environment.facts):
            assert kube_schemas.errors(obj, version) == [], version
    broken = {**device_classes(environment.facts)[0]}
    broken["spec"] = {**broken["spec"], "extendedResourceNames": "typo"}
    assert kube_schemas.errors(broken, versions[-1]) != []


def test_granted_tenant_gets_its_class_grants_in_both_key_forms(dra):
    _, objects = dra
    hard = quota_hard(objects, "vision")
    for key in DRA_KEYS:
        assert hard[key.format("h100.gpu.dra.dev")] == "2"
        assert hard[key.format("b200.gpu.dra.dev")] == "1"
        assert hard[key.format("gpu.nvidia.com")] == "0"   # driver classes: no gpuClass, nobody's grant
        assert hard[key.format("mig.nvidia.com")] == "0"
    assert hard["requests.gpu.dra.dev/b200"] == "1"       # b200's own extendedResourceName


def test_no_double_count_with_the_device_plugin_resource(dra):
    """h100 (served by both) maps nvidia.com/gpu: its claims are charged in requests.nvidia.com/gpu, which holds
    the h100 grant once; b200 (DRA only, own name) adds nothing to nvidia.com/gpu."""
    _, objects = dra
    hard = quota_hard(objects, "vision")
    assert hard["requests.nvidia.com/gpu"] == "2"


def test_tenant_without_grant_is_pinned_at_zero_for_every_device_class(dra):
    environment, objects = dra
    hard = quota_hard(objects, "speech")
    for name in environment.platform.device_classes:
        for key in DRA_KEYS:
            assert hard[key.format(name)] == "0"
    assert hard["requests.gpu.dra.dev/b200"] == "0"


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_example_stacks_pin_the_driver_classes_in_every_namespace(stack):
    environment = load_environment(FIXTURE.parents[2], stack)
    objects = environment_objects(environment)
    checked = 0
    for loaded in environment.tenants:
        for namespace in loaded.spec.all_namespaces:
            hard = quota_hard(objects, loaded.name, namespace)
            for name in ("gpu.nvidia.com", "mig.nvidia.com"):
                for key in DRA_KEYS:
                    assert hard[key.format(name)] == "0", (loaded.name, namespace, key)
            checked += 1
    assert checked >= len(environment.tenants)

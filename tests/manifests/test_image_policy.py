"""The per-tenant image registries policy, replayed on two CEL engines (tests/manifests/cel_admission.py)
against the pods a tenant member may write: every container list, CREATE and UPDATE, digests."""

from __future__ import annotations

import pytest

from components.manifests import image_policy as ip
from components.manifests.tenant_core import tenant_objects

from .cel_admission import ENGINES, admit
from .example_tenants import viewed

STACK_REGISTRY = "nvcr.io/nvidia"
TENANT_REGISTRY = "ghcr.io/team-a"
DIGEST = "@sha256:" + "a" * 64


@pytest.fixture(params=ENGINES, ids=lambda e: e.name)
def engine(request):
    return request.param


@pytest.fixture
def policy(make_tenant, make_environment):
    environment = make_environment(images={"registries": [STACK_REGISTRY]})
    return viewed(ip.image_policy, make_tenant(images={"registries": [TENANT_REGISTRY]}), environment)


def pod(image="nvcr.io/nvidia/cuda:12", init=None, ephemeral=None, volume=None):
    spec = {"containers": [{"name": "main", "image": image}]}
    if init:
        spec["initContainers"] = [{"name": "init", "image": init}]
    if ephemeral:
        spec["ephemeralContainers"] = [{"name": "debug", "image": ephemeral}]
    if volume:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}, {"name": "model", "image": {"reference": volume, "pullPolicy": "IfNotPresent"}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/cuda:12", "nvcr.io/nvidia/pytorch@sha256:" + "b" * 64, "ghcr.io/team-a/app:1"])
def test_images_of_the_stack_and_the_tenant_registries_are_admitted(engine, policy, image):
    assert admit(engine, policy, pod(image), resource="pods") == []


@pytest.mark.parametrize("image", [
    "docker.io/library/busybox:1",   # another registry
    "busybox",                        # a short name: the node's runtime decides where it comes from
    "nvcr.io/nvidiax/cuda:12",        # a sibling path that shares the prefix
    "nvcr.io.evil.example/nvidia/cuda:12",  # a host that starts like the listed one
    "ghcr.io/team-b/app:1",           # another tenant's path on the same registry
])
def test_images_from_anywhere_else_are_refused_naming_the_image(engine, policy, image):
    messages = admit(engine, policy, pod(image), resource="pods")
    assert len(messages) == 1
    assert messages[0].startswith(f"image {image} is not from a registry tenant team-a may pull from")
    assert f"{TENANT_REGISTRY}, {STACK_REGISTRY}" in messages[0]


@pytest.mark.parametrize("where", ["init", "ephemeral"])
def test_init_and_ephemeral_containers_are_checked_too(engine, policy, where):
    bad = "docker.io/library/busybox:1"
    assert admit(engine, policy, pod(**{where: bad}), resource="pods")[0].startswith(f"image {bad} ")
    assert admit(engine, policy, pod(**{where: "nvcr.io/nvidia/debug:1"}), resource="pods") == []


def test_image_volumes_are_checked_like_container_images(engine, policy):
    """An image volume (ImageVolume, on by default in Kubernetes 1.37) is pulled by the kubelet like a container image."""
    bad = "docker.io/library/weights:1"
    assert admit(engine, policy, pod(volume=bad), resource="pods") == [
        f"image {bad} is not from a registry tenant team-a may pull from ({TENANT_REGISTRY}, {STACK_REGISTRY}); "
        "write the image in full, registry first (docker.io/library/nginx, not nginx)"]
    assert admit(engine, policy, pod(volume="weights:1"), resource="pods")[0].startswith("image weights:1 ")  # a short name
    assert admit(engine, policy, pod(volume=f"{TENANT_REGISTRY}/weights:1"), resource="pods") == []
    without_reference = pod()
    without_reference["spec"]["volumes"] = [{"name": "model", "image": {"pullPolicy": "Always"}}]  # the API server refuses it
    assert admit(engine, policy, without_reference, resource="pods") == []


def test_an_image_volume_needs_a_digest_when_the_stack_requires_digests(engine, make_tenant, make_environment):
    policy = viewed(ip.image_policy, make_tenant(), make_environment(images={"requireDigest": True}))
    assert admit(engine, policy, pod("nvcr.io/nvidia/cuda" + DIGEST, volume="nvcr.io/nvidia/weights:1"), resource="pods")[0] \
        .startswith("image nvcr.io/nvidia/weights:1 is not pinned by digest")
    assert admit(engine, policy, pod("nvcr.io/nvidia/cuda" + DIGEST, volume="nvcr.io/nvidia/weights" + DIGEST), resource="pods") == []


def test_an_update_keeps_an_image_volume_the_pod_already_had(engine, policy):
    before = pod(volume="docker.io/library/legacy-weights:1")  # admitted before the registry list changed
    relabelled = {**before, "metadata": {"name": "p", "labels": {"a": "b"}}}
    assert admit(engine, policy, relabelled, resource="pods", operation="UPDATE", old=before) == []
    debugged = {**before, "spec": {**before["spec"], "ephemeralContainers": [{"name": "debug", "image": "docker.io/library/busybox:1"}]}}
    assert [m.split(" is ")[0] for m in admit(engine, policy, debugged, resource="pods", operation="UPDATE", old=before)] == [
        "image docker.io/library/busybox:1"]


def test_an_update_may_keep_an_old_image_but_not_bring_a_new_one(engine, policy):
    before = pod("docker.io/library/legacy:1")  # admitted before the registry list changed
    relabelled = {**before, "metadata": {"name": "p", "labels": {"a": "b"}}}
    assert admit(engine, policy, relabelled, resource="pods", operation="UPDATE", old=before) == []
    debugged = pod("docker.io/library/legacy:1", ephemeral="docker.io/library/busybox:1")
    messages = admit(engine, policy, debugged, resource="pods", operation="UPDATE", old=before)
    assert [m.split(" is ")[0] for m in messages] == ["image docker.io/library/busybox:1"]


def test_a_stack_that_requires_digests_refuses_tags(engine, make_tenant, make_environment):
    environment = make_environment(images={"registries": [STACK_REGISTRY], "requireDigest": True})
    policy = viewed(ip.image_policy, make_tenant(), environment)
    assert admit(engine, policy, pod("nvcr.io/nvidia/cuda" + DIGEST), resource="pods") == []
    messages = admit(engine, policy, pod("nvcr.io/nvidia/cuda:12"), resource="pods")
    assert messages == ["image nvcr.io/nvidia/cuda:12 is not pinned by digest: images of tenant team-a must end in "
                        "@sha256:<64 hex digits> (the stack requires digests, so a re-pushed tag cannot change what runs)"]
    assert admit(engine, policy, pod("nvcr.io/nvidia/cuda@sha256:abc"), resource="pods")  # too short


def test_digests_alone_need_no_registry_list(engine, make_tenant, make_environment):
    policy = viewed(ip.image_policy, make_tenant(), make_environment(images={"requireDigest": True}))
    assert admit(engine, policy, pod("docker.io/library/busybox" + DIGEST), resource="pods") == []
    assert len(policy["spec"]["validations"]) == 1


def test_nothing_restricted_makes_no_policy(make_tenant, make_environment):
    assert viewed(ip.image_objects, make_tenant(), make_environment()) == []
    kinds = [o["kind"] for o in viewed(tenant_objects, make_tenant(), make_environment())]
    assert "ValidatingAdmissionPolicyBinding" in kinds  # the guard's binding, as before
    assert not any(o["metadata"]["name"].startswith(ip.NAME_PREFIX) for o in viewed(tenant_objects, make_tenant(), make_environment()))


def test_a_tenant_list_alone_restricts_that_tenant(make_tenant, make_environment):
    restricted = viewed(ip.image_objects, make_tenant(images={"registries": [TENANT_REGISTRY]}), make_environment())
    assert [(o["kind"], o["metadata"]["name"]) for o in restricted] == [
        ("ValidatingAdmissionPolicy", "gpu-tenancy-images-team-a"), ("ValidatingAdmissionPolicyBinding", "gpu-tenancy-images-team-a")]
    assert restricted[0]["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["pods", "pods/ephemeralcontainers"]


def test_a_decommissioned_tenant_keeps_its_image_policy_until_its_namespaces_are_gone(make_tenant, make_environment):
    tenant = make_tenant(lifecycle="decommissioned", decommission={"confirm": "team-a"}, images={"registries": [TENANT_REGISTRY]})
    assert [o["kind"] for o in viewed(ip.image_objects, tenant, make_environment())] == [
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]

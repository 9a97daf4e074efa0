"""Allowed image registries on a real kube-apiserver, as a tenant member (issue 25, step 5).

Two tenants made for this module, next to the example prod stack (whose platform objects they
use): `imagelab` in the prod inventory plus `images.registries` (the stack's registry, and one of
the tenant's own), and `digestlab` in the same inventory with `images.requireDigest`. Only their
own objects are applied, so the example tenants' pods (images from registry.invalid) are not
affected. Pods are never pulled: there are no nodes, admission is what is tested.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.image_policy import policy_name
from tests.e2e.made_tenants import rendered
from tools.applied_stack import apply_tenant, remove_tenant

pytestmark = pytest.mark.e2e

STACK_REGISTRY = "registry.invalid/allowed"
TENANT_REGISTRY = "ghcr.io/imagelab"
UNLISTED = "docker.io/library/busybox:1.36"
DIGEST = "@sha256:" + "0123456789abcdef" * 4


# Every role of imagelab, as (user, groups) of a minted client certificate.
MEMBERS = {
    "owner": ("e2e-owner@imagelab", ["imagelab-leads"]),
    "developer": ("e2e-dev@imagelab", ["imagelab-devs"]),
    "viewer": ("e2e-viewer@imagelab", ["imagelab-readers"]),
    "ci": ("system:serviceaccount:imagelab:ci", ["system:serviceaccounts", "system:serviceaccounts:imagelab"]),
}


def pod(image: str, *, init: str | None = None, volume: str | None = None, name: str = "p") -> dict[str, Any]:
    container = {"name": "main", "image": image, "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}
    spec: dict[str, Any] = {"automountServiceAccountToken": False, "containers": [container],
                            "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}
    if init:
        spec["initContainers"] = [{**container, "name": "init", "image": init}]
    if volume:   # an image volume (ImageVolume): the kubelet pulls it like a container image
        spec["volumes"] = [{"name": "weights", "image": {"reference": volume, "pullPolicy": "IfNotPresent"}}]
        container["volumeMounts"] = [{"name": "weights", "mountPath": "/weights", "readOnly": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def message_of(exc: ApiException) -> str:
    try:
        return json.loads(exc.body)["message"]
    except (TypeError, ValueError, KeyError):
        return str(exc)


def refused(call) -> str:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 403, message_of(err.value)
    return message_of(err.value)


@pytest.fixture(scope="module")
def imagelab(apiserver, prod_stack) -> Iterator[list[dict[str, Any]]]:
    objects = rendered("imagelab", {"registries": [STACK_REGISTRY]}, images={"registries": [TENANT_REGISTRY]})
    apply_tenant(apiserver, objects)
    core = client.CoreV1Api(apiserver.api_client)
    # The admission plugin loads a new policy a moment after it is type-checked: wait until it refuses.
    def in_force():
        try:
            core.create_namespaced_pod("imagelab", pod(UNLISTED, name="probe"), dry_run="All")
        except ApiException as exc:
            return exc.status == 403 and policy_name("imagelab") in message_of(exc)
        return False
    apiserver.wait_for(in_force, what="the image policy of imagelab in force")
    yield objects
    remove_tenant(apiserver, objects)


@pytest.fixture(scope="module")
def developer(apiserver) -> client.CoreV1Api:
    return client.CoreV1Api(apiserver.client_for(*MEMBERS["developer"]))


@pytest.mark.parametrize("role", ["owner", "developer", "ci"])
def test_an_unlisted_registry_is_refused_and_a_listed_one_admitted_for_every_role_that_creates_pods(apiserver, imagelab, role):
    member = client.CoreV1Api(apiserver.client_for(*MEMBERS[role]))
    message = refused(lambda: member.create_namespaced_pod("imagelab", pod(UNLISTED), dry_run="All"))
    assert policy_name("imagelab") in message
    assert f"image {UNLISTED} is not from a registry tenant imagelab may pull from ({TENANT_REGISTRY}, {STACK_REGISTRY})" in message
    listed = f"{STACK_REGISTRY}/cuda:12"
    assert member.create_namespaced_pod("imagelab", pod(listed), dry_run="All").spec.containers[0].image == listed


def test_a_viewer_may_not_create_pods_at_all(apiserver, imagelab):
    viewer = client.CoreV1Api(apiserver.client_for(*MEMBERS["viewer"]))
    assert 'cannot create resource "pods"' in refused(
        lambda: viewer.create_namespaced_pod("imagelab", pod(f"{STACK_REGISTRY}/cuda:12"), dry_run="All"))


@pytest.mark.parametrize("image", [f"{STACK_REGISTRY}/cuda:12", f"{TENANT_REGISTRY}/trainer:2", f"{STACK_REGISTRY}/cuda{DIGEST}"])
def test_images_of_the_listed_registries_are_admitted(imagelab, developer, image):
    created = developer.create_namespaced_pod("imagelab", pod(image), dry_run="All")
    assert created.spec.containers[0].image == image


@pytest.mark.parametrize("image", ["busybox:1.36", "registry.invalid/allowedx/cuda:12", "registry.invalid.example/allowed/cuda:12"])
def test_short_names_and_look_alike_prefixes_are_refused(imagelab, developer, image):
    assert f"image {image} is not from a registry" in refused(
        lambda: developer.create_namespaced_pod("imagelab", pod(image), dry_run="All"))


def test_an_init_container_is_checked_like_the_others(imagelab, developer):
    assert f"image {UNLISTED} is not from" in refused(
        lambda: developer.create_namespaced_pod("imagelab", pod(f"{STACK_REGISTRY}/cuda:12", init=UNLISTED), dry_run="All"))


@pytest.mark.parametrize("role", ["owner", "developer", "ci"])
def test_an_image_volume_from_an_unlisted_registry_is_refused_and_a_listed_one_admitted(apiserver, imagelab, role):
    """The API server serves `spec.volumes[].image` (ImageVolume is on by default in 1.37): a member
    could otherwise pull any image into a pod beside an allowed container image."""
    member = client.CoreV1Api(apiserver.client_for(*MEMBERS[role]))
    allowed = f"{STACK_REGISTRY}/cuda:12"
    message = refused(lambda: member.create_namespaced_pod("imagelab", pod(allowed, volume=UNLISTED), dry_run="All"))
    assert policy_name("imagelab") in message and f"image {UNLISTED} is not from a registry tenant imagelab may pull from" in message
    listed = f"{TENANT_REGISTRY}/weights:1"
    created = member.create_namespaced_pod("imagelab", pod(allowed, volume=listed), dry_run="All")
    assert created.spec.volumes[0].image.reference == listed   # served, not dropped: the field is what was checked


def test_a_running_pod_cannot_switch_to_an_unlisted_image_but_can_be_labelled(apiserver, imagelab, developer):
    developer.create_namespaced_pod("imagelab", pod(f"{STACK_REGISTRY}/cuda:12", name="switch"))
    try:
        patch = {"spec": {"containers": [{"name": "main", "image": UNLISTED}]}}
        assert f"image {UNLISTED} is not from" in refused(
            lambda: developer.patch_namespaced_pod("switch", "imagelab", patch, dry_run="All"))
        labelled = developer.patch_namespaced_pod("switch", "imagelab", {"metadata": {"labels": {"step": "two"}}}, dry_run="All")
        assert labelled.metadata.labels == {"step": "two"}
    finally:
        apiserver.delete_pods("imagelab", ["switch"])


def test_ephemeral_containers_are_checked_for_everybody(apiserver, imagelab, developer):
    """Tenant roles may not add ephemeral containers at all (RBAC); whoever may, the policy checks."""
    admin = client.CoreV1Api(apiserver.api_client)
    admin.create_namespaced_pod("imagelab", pod(f"{STACK_REGISTRY}/cuda:12", name="debugged"))
    try:
        def debug(api, image):
            body = {"spec": {"ephemeralContainers": [{"name": "debug", "image": image, "targetContainerName": "main"}]}}
            return lambda: api.patch_namespaced_pod_ephemeralcontainers("debugged", "imagelab", body, dry_run="All")
        assert "cannot patch resource \"pods/ephemeralcontainers\"" in refused(debug(developer, f"{STACK_REGISTRY}/debug:1"))
        assert f"image {UNLISTED} is not from" in refused(debug(admin, UNLISTED))
        added = debug(admin, f"{STACK_REGISTRY}/debug:1")()
        assert [c.image for c in added.spec.ephemeral_containers] == [f"{STACK_REGISTRY}/debug:1"]
    finally:
        apiserver.delete_pods("imagelab", ["debugged"])


@pytest.fixture(scope="module")
def digestlab(apiserver, prod_stack) -> Iterator[list[dict[str, Any]]]:
    objects = rendered("digestlab", {"registries": [STACK_REGISTRY], "requireDigest": True})
    apply_tenant(apiserver, objects)
    core = client.CoreV1Api(apiserver.api_client)
    def in_force():
        try:
            core.create_namespaced_pod("digestlab", pod(f"{STACK_REGISTRY}/cuda:12", name="probe"), dry_run="All")
        except ApiException as exc:
            return exc.status == 403
        return False
    apiserver.wait_for(in_force, what="the image policy of digestlab in force")
    yield objects
    remove_tenant(apiserver, objects)


def test_a_stack_that_requires_digests_refuses_a_tag_and_admits_a_digest(apiserver, digestlab):
    developer = client.CoreV1Api(apiserver.client_for("e2e-dev@digestlab", ["digestlab-devs"]))
    message = refused(lambda: developer.create_namespaced_pod("digestlab", pod(f"{STACK_REGISTRY}/cuda:12"), dry_run="All"))
    assert f"image {STACK_REGISTRY}/cuda:12 is not pinned by digest" in message
    pinned = f"{STACK_REGISTRY}/cuda{DIGEST}"
    assert developer.create_namespaced_pod("digestlab", pod(pinned), dry_run="All").spec.containers[0].image == pinned
    tagged_volume = f"{STACK_REGISTRY}/weights:1"
    assert f"image {tagged_volume} is not pinned by digest" in refused(
        lambda: developer.create_namespaced_pod("digestlab", pod(pinned, volume=tagged_volume), dry_run="All"))
    pinned_volume = f"{STACK_REGISTRY}/weights{DIGEST}"
    created = developer.create_namespaced_pod("digestlab", pod(pinned, volume=pinned_volume), dry_run="All")
    assert created.spec.volumes[0].image.reference == pinned_volume

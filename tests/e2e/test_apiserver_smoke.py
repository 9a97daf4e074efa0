"""Smoke tests for the real-apiserver lane (see tests/e2e/conftest.py)."""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.e2e

GPU = "nvidia.com/gpu"


def _gpu_pod(name: str, gpus: int = 1) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [{
                "name": "main",
                "image": "registry.invalid/cuda:latest",  # never pulled: no nodes
                "resources": {"limits": {GPU: str(gpus)}},
            }],
        },
    }


def test_server_ready_and_version(apiserver):
    status, body = apiserver.raw_get("/readyz?verbose")
    assert status == 200, body
    assert "readyz check passed" in body
    version = client.VersionApi(apiserver.api_client).get_code()
    assert version.git_version == apiserver.version

    # The admin kubeconfig works for standard kubeconfig loaders too.
    with config.new_client_from_config(config_file=str(apiserver.kubeconfig)) as api:
        names = {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}
    assert {"default", "kube-system"} <= names


def test_namespace_server_side_apply(apiserver):
    name = f"e2e-ssa-{uuid.uuid4().hex[:6]}"
    manifest = {"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": name, "labels": {"tenant": "a"}}}
    try:
        apiserver.apply(manifest, field_manager="gpu-tenancy")
        manifest["metadata"]["labels"]["tier"] = "gpu"
        apiserver.apply(manifest, field_manager="gpu-tenancy")  # idempotent re-apply

        ns = client.CoreV1Api(apiserver.api_client).read_namespace(name)
        assert ns.metadata.labels["tenant"] == "a"
        assert ns.metadata.labels["tier"] == "gpu"
        managers = {(m.manager, m.operation) for m in ns.metadata.managed_fields}
        assert ("gpu-tenancy", "Apply") in managers
    finally:
        apiserver.delete_namespace(name)


def test_gpu_resourcequota_rejects_second_pod(apiserver, namespace):
    core = client.CoreV1Api(apiserver.api_client)
    apiserver.apply({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "gpu", "namespace": namespace},
        "spec": {"hard": {f"requests.{GPU}": "1"}},
    })
    # ResourceQuota admission only enforces what the controller has put into
    # status.hard/status.used; with an empty status the quota is ignored.
    apiserver.wait_for(
        lambda: (core.read_namespaced_resource_quota("gpu", namespace).status.used or {})
        .get(f"requests.{GPU}") == "0",
        what="resourcequota controller to compute status",
    )

    core.create_namespaced_pod(namespace, _gpu_pod("first"))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(namespace, _gpu_pod("second"))
    assert err.value.status == 403
    message = json.loads(err.value.body)["message"]
    assert "exceeded quota: gpu" in message
    assert f"requested: requests.{GPU}=1, used: requests.{GPU}=1, limited: requests.{GPU}=1" in message

    apiserver.wait_for(
        lambda: core.read_namespaced_resource_quota("gpu", namespace).status.used.get(f"requests.{GPU}") == "1",
        what="quota usage to reach 1",
    )


def test_minted_tenant_user_rbac(apiserver, namespace):
    user, groups = "alice@tenant-a", ["tenant-a"]
    authz = client.AuthorizationV1Api(apiserver.api_client)

    def can_create_pods(ns: str) -> bool:
        review = authz.create_subject_access_review({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups,
                     "resourceAttributes": {"namespace": ns, "verb": "create", "resource": "pods"}},
        })
        return bool(review.status.allowed)

    assert not can_create_pods(namespace)

    apiserver.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "tenant-a-edit", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "tenant-a"}],
    })
    apiserver.wait_for(lambda: can_create_pods(namespace), what="RoleBinding to take effect")
    assert not can_create_pods("default")

    # The minted client certificate authenticates as that user and groups.
    alice = apiserver.client_for(user, groups)
    who = client.AuthenticationV1Api(alice).create_self_subject_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert who.status.user_info.username == user
    assert set(groups) | {"system:authenticated"} <= set(who.status.user_info.groups)

    client.CoreV1Api(alice).list_namespaced_pod(namespace)
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(alice).list_namespaced_pod("default")
    assert err.value.status == 403

"""Every DRA path into a GPU, as tenant members on a real kube-apiserver v1.37.2 (DRAExtendedResource GA).

The fixture stack tests/fixtures/dra (h100 served by the device plugin and DRA, its DeviceClass mapping
nvidia.com/gpu; b200 DRA only with its own extendedResourceName; the NVIDIA driver's gpu.nvidia.com and
mig.nvidia.com at 0) is applied beside the example prod stack, whose tenants list the driver classes too.
`vision` has h100: 2 and b200: 1; `speech` has no GPU grant. DeviceClasses the driver would install are
created here as the driver (admin). Pods and claims are checked with dry-run where admission is the
question; quota usage needs real objects (then deleted). No scheduler runs here: the scheduler's own
claim for an extended-resource pod is counted exactly like the claim from a template (same evaluator),
and tests/e2e/scheduling places claims on pools.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.conftest import AppliedStack, ControlPlane

pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dra"
H100, B200 = "h100.gpu.dra.dev", "b200.gpu.dra.dev"
DRIVER_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com")
IMPLICIT = "deviceclass.resource.kubernetes.io/"
GPU = "nvidia.com/gpu"
GRANTED, UNGRANTED = ("vision", "vision-devs"), ("speech", "speech-devs")
PROD_TENANTS = ("llm-finetune", "inference", "eval")


def driver_device_class(name: str) -> dict:
    """A DeviceClass as the NVIDIA DRA driver installs it (both of its classes select its devices)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}


def gpu_pod(resources: dict | None = None, node_selector: dict | None = None, claim_template: str | None = None) -> dict:
    """A pod that passes Pod Security restricted; GPUs as limits (requests default from them)."""
    container: dict = {"name": "main", "image": "registry.invalid/cuda:12",
                       "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                       "resources": {"limits": {"cpu": "100m", "memory": "128Mi", **(resources or {})}}}
    spec: dict = {"automountServiceAccountToken": False, "containers": [container],
                  "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if claim_template:
        container["resources"]["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"e2e-dra-{uuid.uuid4().hex[:8]}"}, "spec": spec}


def claim_spec(device_class: str, count: int | None = 1) -> dict:
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount" if count else "All"}
    if count:
        exactly["count"] = count
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


def claim(device_class: str, count: int | None = 1) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"e2e-dra-{uuid.uuid4().hex[:8]}"}, "spec": claim_spec(device_class, count)}


def refused(call) -> str:
    with pytest.raises(ApiException) as err:
        call()
    assert err.value.status == 403, err.value.body
    return err.value.body


@pytest.fixture(scope="module")
def dra_stack(apiserver: ControlPlane, prod_stack: AppliedStack) -> AppliedStack:
    """The DRA fixture stack's DeviceClasses and tenants on the session API server, the driver's classes beside them."""
    environment, objects = AppliedStack.render("dra", root=FIXTURE)
    for name in DRIVER_CLASSES:
        apiserver.apply(driver_device_class(name), field_manager="nvidia-dra-driver")
    platform = [o for o in objects["_platform"] if o["kind"] == "DeviceClass"]
    tenants = [o for name, items in objects.items() if name != "_platform" for o in items]
    results = apiserver.apply_rendered([*platform, *tenants])
    failed = [(o["kind"], o["metadata"]["name"], r) for o, r in results if isinstance(r, Exception)]
    assert not failed, failed
    apiserver.wait_namespaces_ready(tenants)
    for tenant in ("vision", "speech"):
        apiserver.wait_quotas(tenant)
    return AppliedStack(environment, objects, results, {}, [])


@pytest.fixture(scope="module")
def as_member(apiserver):
    """CoreV1Api and CustomObjectsApi authenticating as a developer of a tenant."""
    def make(group: str):
        api = apiserver.client_for(f"dev@{group}.example.com", [group])
        return client.CoreV1Api(api), client.CustomObjectsApi(api)
    return make


def create_claim(custom: client.CustomObjectsApi, namespace: str, body: dict, dry_run: bool = True):
    return custom.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims", body,
                                                  dry_run="All" if dry_run else None)


@pytest.fixture(scope="module")
def admin_custom(apiserver) -> client.CustomObjectsApi:
    """The identity that writes claims today (a controller, the scheduler): tenants get no claim verbs."""
    return client.CustomObjectsApi(apiserver.api_client)


# ---- extended-resource pods: the path every developer has (pods/create) --------------------------


@pytest.mark.parametrize("device_class", [H100, B200, *DRIVER_CLASSES])
def test_implicit_extended_resource_pod_is_refused_without_a_grant(dra_stack, as_member, device_class):
    core, _ = as_member(UNGRANTED[1])
    body = refused(lambda: core.create_namespaced_pod(UNGRANTED[0], gpu_pod({IMPLICIT + device_class: "1"}), dry_run="All"))
    assert "exceeded quota: tenant-quota" in body and f"limited: requests.{IMPLICIT}{device_class}=0" in body


@pytest.mark.parametrize("tenant", PROD_TENANTS)
@pytest.mark.parametrize("device_class", DRIVER_CLASSES)
def test_example_stack_tenants_cannot_reach_driver_classes(dra_stack, as_member, tenant, device_class):
    """The example prod stack lists the NVIDIA driver's classes: its tenants are pinned at 0 for them."""
    group = prod_group(tenant)[0]
    core, _ = as_member(group)
    body = refused(lambda: core.create_namespaced_pod(tenant, gpu_pod({IMPLICIT + device_class: "1"}), dry_run="All"))
    assert f"limited: requests.{IMPLICIT}{device_class}=0" in body


def prod_group(tenant: str) -> list[str]:
    """Groups bound to the tenant's developer (else owner) role in the example prod stack."""
    from components.load import load_environment
    from tests.e2e.conftest import REPO_ROOT

    spec = next(t.spec for t in load_environment(REPO_ROOT, "prod").tenants if t.name == tenant)
    for role in (spec.access.developers, spec.access.owners):
        if role is not None and role.groups:
            return list(role.groups)
    raise AssertionError(f"{tenant} binds no group to developers or owners")


def test_granted_developer_gets_implicit_and_mapped_extended_resources_within_the_grant(dra_stack, as_member):
    core, _ = as_member(GRANTED[1])
    namespace = GRANTED[0]
    for resources in ({IMPLICIT + H100: "2"}, {IMPLICIT + B200: "1"}, {"gpu.dra.dev/b200": "1"}):
        core.create_namespaced_pod(namespace, gpu_pod(resources), dry_run="All")
    body = refused(lambda: core.create_namespaced_pod(namespace, gpu_pod({IMPLICIT + H100: "3"}), dry_run="All"))
    assert f"limited: requests.{IMPLICIT}{H100}=2" in body
    body = refused(lambda: core.create_namespaced_pod(namespace, gpu_pod({"gpu.dra.dev/b200": "2"}), dry_run="All"))
    assert "limited: requests.gpu.dra.dev/b200=1" in body


def test_mapped_extended_resource_is_refused_without_a_grant(dra_stack, as_member):
    core, _ = as_member(UNGRANTED[1])
    body = refused(lambda: core.create_namespaced_pod(UNGRANTED[0], gpu_pod({"gpu.dra.dev/b200": "1"}), dry_run="All"))
    assert "limited: requests.gpu.dra.dev/b200=0" in body


# ---- ResourceClaims ------------------------------------------------------------------------------


def test_tenant_members_cannot_write_claims_or_templates(dra_stack, as_member):
    """Claim verbs come with DRA placement (issue 21 step 3); until then RBAC refuses them."""
    for group, namespace in (GRANTED[::-1], UNGRANTED[::-1]):
        _, custom = as_member(group)
        body = refused(lambda: create_claim(custom, namespace, claim(H100)))
        assert "resourceclaims" in body and "forbidden" in body
        template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "e2e-dra"}, "spec": {"spec": claim_spec(H100)}}
        refused(lambda: custom.create_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template, dry_run="All"))


@pytest.mark.parametrize("device_class", [H100, B200, *DRIVER_CLASSES])
def test_claim_in_an_ungranted_namespace_is_refused_by_both_keys(dra_stack, admin_custom, device_class):
    body = refused(lambda: create_claim(admin_custom, UNGRANTED[0], claim(device_class)))
    assert "exceeded quota: tenant-quota" in body
    assert f"{device_class}.deviceclass.resource.k8s.io/devices=0" in body
    assert f"requests.{IMPLICIT}{device_class}=0" in body


def test_granted_claims_fit_the_grant_and_all_mode_does_not(dra_stack, admin_custom):
    namespace = GRANTED[0]
    create_claim(admin_custom, namespace, claim(H100, 2))
    create_claim(admin_custom, namespace, claim(B200, 1))
    body = refused(lambda: create_claim(admin_custom, namespace, claim(H100, 3)))
    assert f"{H100}.deviceclass.resource.k8s.io/devices=2" in body
    body = refused(lambda: create_claim(admin_custom, namespace, claim(H100, None)))  # allocationMode All counts 32
    assert "=32" in body
    body = refused(lambda: create_claim(admin_custom, namespace, claim("gpu.nvidia.com")))
    assert "gpu.nvidia.com.deviceclass.resource.k8s.io/devices=0" in body


def test_device_plugin_gpus_and_claims_of_the_mapped_class_share_one_budget(apiserver, dra_stack, as_member, admin_custom):
    """vision's h100 grant is 2: two device-plugin GPUs leave no room for an h100 claim (charged in
    requests.nvidia.com/gpu through the DeviceClass's extendedResourceName), though the claim keys have room."""
    core, _ = as_member(GRANTED[1])
    namespace = GRANTED[0]
    class_key = f"{dra_stack.environment.platform.label_domain}/gpu-class"
    used_before = apiserver.quota_used(namespace)
    made = core.create_namespaced_pod(namespace, gpu_pod({GPU: "2"}, node_selector={class_key: "h100"}))
    try:
        apiserver.wait_for(
            lambda: core.read_namespaced_resource_quota("tenant-quota", namespace).status.used.get(f"requests.{GPU}") == "2",
            what="the device-plugin GPUs to be counted")
        body = refused(lambda: create_claim(admin_custom, namespace, claim(H100, 1)))
        assert f"requests.{GPU}=1" in body and f"limited: requests.{GPU}=2" in body
    finally:
        apiserver.delete_pods(namespace, [made.metadata.name], quota_used_before=used_before)


def test_claim_from_a_template_is_metered_when_the_claim_controller_creates_it(apiserver, dra_stack, as_member):
    """A developer's pod naming a ResourceClaimTemplate needs no claim RBAC: the claim controller
    creates the claim, and quota refuses that claim in the ungranted namespace (a driver class: only
    the DeviceClass keys meter it) and admits it in the granted one."""
    custom_admin = client.CustomObjectsApi(apiserver.api_client)
    outcome = {}
    for (namespace, group), device_class in ((UNGRANTED, "gpu.nvidia.com"), (GRANTED, B200)):
        template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "e2e-dra-template"}, "spec": {"spec": claim_spec(device_class)}}
        custom_admin.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template)
        core, _ = as_member(group)
        used_before = apiserver.quota_used(namespace)
        made = core.create_namespaced_pod(namespace, gpu_pod(claim_template="e2e-dra-template"))
        try:
            if namespace == GRANTED[0]:
                apiserver.wait_for(lambda: custom_admin.list_namespaced_custom_object(
                    "resource.k8s.io", "v1", namespace, "resourceclaims")["items"], what="the claim from the template")
            else:
                events = client.CoreV1Api(apiserver.api_client)
                apiserver.wait_for(lambda: any(
                    "exceeded quota" in (e.message or "")
                    for e in events.list_namespaced_event(namespace, field_selector=f"involvedObject.name={made.metadata.name}").items),
                    what="the claim controller's quota refusal event")
            outcome[namespace] = [c["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] for c in
                                  custom_admin.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")["items"]]
        finally:
            apiserver.delete_pods(namespace, [made.metadata.name], quota_used_before=used_before)
            custom_admin.delete_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaimtemplates", "e2e-dra-template")
    assert outcome == {UNGRANTED[0]: [], GRANTED[0]: [B200]}

"""Every DRA path into a GPU, as tenant members on a real kube-apiserver v1.37.2 (DRAExtendedResource GA).

The fixture stack tests/fixtures/dra (h100 served by the device plugin and DRA, its DeviceClass mapping
nvidia.com/gpu; b200 DRA only with its own extendedResourceName; the NVIDIA driver's gpu.nvidia.com and
mig.nvidia.com at 0) is applied to a control plane of its own (one environment per cluster: its guard and
placement policies are that cluster's), the example prod stack, whose tenants list the driver classes too,
to the session's.
`vision` has h100: 2 and b200: 1; `speech` has no GPU grant. DeviceClasses the driver would install are
created here as the driver (admin). Pods and claims are checked with dry-run where admission is the
question; quota usage needs real objects (then deleted). Layers, in admission order: the placement
policy (a DRA pod must select the tenant's pools), the claim policy (granted DeviceClasses only, no
adminAccess, no allocationMode All) and RBAC (claim verbs only with a grant), then quota (both
DeviceClass keys). No scheduler runs here: the scheduler's own claim for an extended-resource pod
is counted like the claim from a template (same evaluator).
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tools.applied_stack import AppliedStack, install_crds, wait_policies_typechecked
from tools.control_plane import BIN_DIR, ControlPlane
from tests.e2e.queued import queued

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
    return queued({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"e2e-dra-{uuid.uuid4().hex[:8]}"}, "spec": spec})


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
def dra_plane() -> Iterator[ControlPlane]:
    """A control plane for the DRA fixture stack alone, its CRDs installed."""
    workdir = Path(tempfile.mkdtemp(prefix="gpu-tenancy-e2e-dra-"))
    cp = ControlPlane(BIN_DIR, workdir)
    try:
        cp.start()
        install_crds(cp)
        yield cp
    finally:
        cp.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def driver_classes(apiserver: ControlPlane, dra_plane: ControlPlane) -> tuple[str, ...]:
    """The NVIDIA DRA driver's DeviceClasses, on both clusters, as the driver (admin) creates them."""
    for cp in (apiserver, dra_plane):
        for name in DRIVER_CLASSES:
            cp.apply(driver_device_class(name), field_manager="nvidia-dra-driver")
    return DRIVER_CLASSES


@pytest.fixture(scope="module")
def dra_stack(dra_plane: ControlPlane, driver_classes) -> AppliedStack:
    """The DRA fixture stack applied to its own control plane: every object but the node patches (no nodes here)."""
    environment, objects = AppliedStack.render("dra", root=FIXTURE)
    dra_plane.create_namespace("gpu-operator")  # the GPU Operator's namespace (the MIG ConfigMap)
    applied = [o for items in objects.values() for o in items if o["kind"] != "Node"]
    results = dra_plane.apply_rendered(applied)
    failed = [(o["kind"], o["metadata"]["name"], r) for o, r in results if isinstance(r, Exception)]
    assert not failed, failed
    tenants = [o for name, items in objects.items() if name != "_platform" for o in items]
    dra_plane.wait_namespaces_ready(tenants)
    wait_policies_typechecked(dra_plane, applied)
    for tenant in ("vision", "speech"):
        dra_plane.wait_quotas(tenant)
    # A policy takes a moment to reach the admission plugin: wait until vision's claim policy denies.
    custom = client.CustomObjectsApi(dra_plane.api_client)

    def claim_policy_denies() -> bool:
        try:
            create_claim(custom, "vision", claim("unlisted.example.com"))
        except ApiException as exc:
            return exc.status in (403, 422) and "gpu-tenancy-claims-vision" in exc.body
        return False

    dra_plane.wait_for(claim_policy_denies, what="vision's claim policy to deny")
    return AppliedStack(environment, objects, results, {}, [])


@pytest.fixture(scope="module")
def as_member(apiserver, dra_plane):
    """CoreV1Api and CustomObjectsApi authenticating as a developer of a tenant (of the DRA stack on
    its control plane; with `prod=True`, of the example prod stack on the session's)."""
    def make(group: str, prod: bool = False):
        api = (apiserver if prod else dra_plane).client_for(f"dev@{group}.example.com", [group])
        return client.CoreV1Api(api), client.CustomObjectsApi(api)
    return make


def create_claim(custom: client.CustomObjectsApi, namespace: str, body: dict, dry_run: bool = True):
    return custom.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims", body,
                                                  dry_run="All" if dry_run else None)


@pytest.fixture(scope="module")
def admin_custom(dra_plane) -> client.CustomObjectsApi:
    """A controller's identity (the claim controller, the scheduler) writing claims where tenants have no claim verbs."""
    return client.CustomObjectsApi(dra_plane.api_client)


def pinned(environment, tenant: str) -> dict:
    """nodeSelector (a pool the tenant may use) and the toleration of its own taint: a placement its policy admits."""
    from components.manifests.placement_policy import placement

    spec = next(t.spec for t in environment.tenants if t.name == tenant)
    domain = environment.platform.label_domain
    return {"nodeSelector": {f"{domain}/pool": placement(spec, environment.view(spec)).pools[0]},
            "tolerations": [{"key": f"{domain}/tenant", "operator": "Equal", "value": tenant, "effect": "NoSchedule"}]}


def placed(body: dict, environment, tenant: str) -> dict:
    body["spec"].update(pinned(environment, tenant))
    return body


def pool_pinned(body: dict, stack: AppliedStack, pool: str) -> dict:
    """The pod selects one pool (h100 has robotics' dedicated pool too, so the class alone does not pin)."""
    body["spec"]["nodeSelector"] = {f"{stack.environment.platform.label_domain}/pool": pool}
    return body


# ---- extended-resource pods: the path every developer has (pods/create) --------------------------


@pytest.mark.parametrize("device_class", [H100, B200, *DRIVER_CLASSES])
def test_dra_pod_of_a_tenant_without_gpus_is_refused(dra_stack, as_member, device_class):
    """speech has no GPU class: a DRA extended-resource pod is a GPU pod, and it can select no pool."""
    core, _ = as_member(UNGRANTED[1])
    body = refused(lambda: core.create_namespaced_pod(UNGRANTED[0], gpu_pod({IMPLICIT + device_class: "1"}), dry_run="All"))
    assert "tenant speech may not use GPUs in this environment" in body and "DRA resourceClaims" in body


@pytest.mark.parametrize("device_class", DRIVER_CLASSES)
def test_placed_pod_is_still_refused_by_quota_for_an_ungranted_class(dra_stack, as_member, device_class):
    core, _ = as_member(GRANTED[1])
    pod = pool_pinned(gpu_pod({IMPLICIT + device_class: "1"}), dra_stack, "h100-shared")
    body = refused(lambda: core.create_namespaced_pod(GRANTED[0], pod, dry_run="All"))
    assert "exceeded quota: tenant-quota" in body and f"limited: requests.{IMPLICIT}{device_class}=0" in body


@pytest.mark.parametrize("tenant", PROD_TENANTS)
@pytest.mark.parametrize("device_class", DRIVER_CLASSES)
def test_example_stack_tenants_cannot_reach_driver_classes(driver_classes, prod_stack, as_member, tenant, device_class):
    """The example prod stack lists the NVIDIA driver's classes: its tenants, placed where they may run, are pinned at 0."""
    core, _ = as_member(prod_group(tenant)[0], prod=True)
    pod = placed(gpu_pod({IMPLICIT + device_class: "1"}), prod_stack.environment, tenant)
    body = refused(lambda: core.create_namespaced_pod(tenant, pod, dry_run="All"))
    assert f"limited: requests.{IMPLICIT}{device_class}=0" in body


@pytest.mark.parametrize("tenant", PROD_TENANTS)
def test_example_stack_tenants_must_place_dra_pods(driver_classes, prod_stack, as_member, tenant):
    core, _ = as_member(prod_group(tenant)[0], prod=True)
    body = refused(lambda: core.create_namespaced_pod(tenant, gpu_pod({IMPLICIT + "gpu.nvidia.com": "1"}), dry_run="All"))
    assert f"pods of tenant {tenant} that request GPUs must select where they run" in body


def prod_group(tenant: str) -> list[str]:
    """Groups bound to the tenant's developer (else owner) role in the example prod stack."""
    from components.load import load_environment
    from tools.control_plane import REPO_ROOT

    spec = next(t.spec for t in load_environment(REPO_ROOT, "prod").tenants if t.name == tenant)
    for role in (spec.access.developers, spec.access.owners):
        if role is not None and role.groups:
            return list(role.groups)
    raise AssertionError(f"{tenant} binds no group to developers or owners")


def test_granted_developer_gets_implicit_and_mapped_extended_resources_within_the_grant(dra_stack, as_member):
    core, _ = as_member(GRANTED[1])
    namespace = GRANTED[0]
    for resources, pool in (({IMPLICIT + H100: "2"}, "h100-shared"), ({IMPLICIT + B200: "1"}, "b200-train"), ({"gpu.dra.dev/b200": "1"}, "b200-train")):
        core.create_namespaced_pod(namespace, pool_pinned(gpu_pod(resources), dra_stack, pool), dry_run="All")
    body = refused(lambda: core.create_namespaced_pod(namespace, pool_pinned(gpu_pod({IMPLICIT + H100: "3"}), dra_stack, "h100-shared"), dry_run="All"))
    assert f"limited: requests.{IMPLICIT}{H100}=2" in body
    body = refused(lambda: core.create_namespaced_pod(namespace, pool_pinned(gpu_pod({"gpu.dra.dev/b200": "2"}), dra_stack, "b200-train"), dry_run="All"))
    assert "limited: requests.gpu.dra.dev/b200=1" in body


def test_unpinned_dra_pods_of_the_granted_tenant_are_refused(dra_stack, as_member):
    """Claims are allocated on the node the pod lands on: an unplaced DRA pod could land on any pool."""
    core, _ = as_member(GRANTED[1])
    for pod in (gpu_pod({IMPLICIT + H100: "1"}), gpu_pod({"gpu.dra.dev/b200": "1"}), gpu_pod(claim_template="any")):
        body = refused(lambda: core.create_namespaced_pod(GRANTED[0], pod, dry_run="All"))
        assert "pods of tenant vision that request GPUs must select where they run" in body


# ---- ResourceClaims ------------------------------------------------------------------------------


def test_tenant_without_a_grant_gets_no_claim_verbs(dra_stack, as_member):
    _, custom = as_member(UNGRANTED[1])
    body = refused(lambda: create_claim(custom, UNGRANTED[0], claim(H100)))
    assert "resourceclaims" in body and "forbidden" in body
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "e2e-dra"}, "spec": {"spec": claim_spec(H100)}}
    refused(lambda: custom.create_namespaced_custom_object(
        "resource.k8s.io", "v1", UNGRANTED[0], "resourceclaimtemplates", template, dry_run="All"))


def first_available(*classes: str) -> dict:
    body = claim(H100)
    body["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": [
        {"name": f"s{i}", "deviceClassName": c, "allocationMode": "ExactCount", "count": 1} for i, c in enumerate(classes)]}]
    return body


def admin_access() -> dict:
    body = claim(H100)
    body["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    return body


CLAIM_ATTACKS = [
    ("driver class nobody is granted", lambda: claim("gpu.nvidia.com"), "may name only the DeviceClasses it has a grant for: b200.gpu.dra.dev, h100.gpu.dra.dev"),
    ("DeviceClass the stack does not list", lambda: claim("unlisted.example.com"), "may name only the DeviceClasses it has a grant for"),
    ("ungranted class as a fallback subrequest", lambda: first_available(H100, "mig.nvidia.com"), "may name only the DeviceClasses"),
    # The API server itself refuses adminAccess outside namespaces labelled resource.kubernetes.io/admin-access
    # (422, before admission; tenants cannot label their namespaces): the policy's rule is the second wall.
    ("adminAccess", admin_access, "admin access to devices requires the `resource.kubernetes.io/admin-access: true` label"),
    ("allocationMode All", lambda: claim(H100, None), "allocationMode All is refused"),
]


@pytest.mark.parametrize("case", range(len(CLAIM_ATTACKS)), ids=[c[0] for c in CLAIM_ATTACKS])
@pytest.mark.parametrize("kind", ["resourceclaims", "resourceclaimtemplates"])
def test_claim_policy_refuses_the_granted_developer(dra_stack, as_member, case, kind):
    _, custom = as_member(GRANTED[1])
    _, make, expected = CLAIM_ATTACKS[case]
    body = make()
    if kind == "resourceclaimtemplates":
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": body["metadata"],
                "spec": {"spec": body["spec"]}}
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object("resource.k8s.io", "v1", GRANTED[0], kind, body, dry_run="All")
    message = err.value.body
    assert expected in message, message
    assert (err.value.status, "gpu-tenancy-claims-vision" in message) in ((403, True), (422, False)), message


@pytest.mark.parametrize("device_class", [H100, B200, *DRIVER_CLASSES])
def test_claim_in_an_ungranted_namespace_is_refused_by_both_keys(dra_stack, admin_custom, device_class):
    """Where no claim verbs exist, a controller writing a claim (the scheduler's, a template's) still meets quota."""
    body = refused(lambda: create_claim(admin_custom, UNGRANTED[0], claim(device_class)))
    assert "exceeded quota: tenant-quota" in body
    assert f"{device_class}.deviceclass.resource.k8s.io/devices=0" in body
    assert f"requests.{IMPLICIT}{device_class}=0" in body


def test_granted_developer_claims_fit_the_grant(dra_stack, as_member):
    _, custom = as_member(GRANTED[1])
    namespace = GRANTED[0]
    create_claim(custom, namespace, claim(H100, 2))
    create_claim(custom, namespace, claim(B200, 1))
    create_claim(custom, namespace, first_available(H100, B200))
    body = refused(lambda: create_claim(custom, namespace, claim(H100, 3)))
    assert "exceeded quota: tenant-quota" in body and f"{H100}.deviceclass.resource.k8s.io/devices=2" in body


def test_device_plugin_gpus_and_claims_of_the_mapped_class_share_one_budget(dra_plane, dra_stack, as_member):
    """vision's h100 grant is 2: two device-plugin GPUs leave no room for an h100 claim (charged in
    requests.nvidia.com/gpu through the DeviceClass's extendedResourceName), though the claim keys have room."""
    core, custom = as_member(GRANTED[1])
    namespace = GRANTED[0]
    used_before = dra_plane.quota_used(namespace)
    made = core.create_namespaced_pod(namespace, pool_pinned(gpu_pod({GPU: "2"}), dra_stack, "h100-shared"))
    try:
        dra_plane.wait_for(
            lambda: core.read_namespaced_resource_quota("tenant-quota", namespace).status.used.get(f"requests.{GPU}") == "2",
            what="the device-plugin GPUs to be counted")
        body = refused(lambda: create_claim(custom, namespace, claim(H100, 1)))
        assert f"requests.{GPU}=1" in body and f"limited: requests.{GPU}=2" in body
    finally:
        dra_plane.delete_pods(namespace, [made.metadata.name], quota_used_before=used_before)


def test_claim_from_a_template_is_metered_when_the_claim_controller_creates_it(dra_plane, dra_stack, as_member, admin_custom):
    """The granted developer's template and pod: the claim controller creates the claim, counted in both keys."""
    core, custom = as_member(GRANTED[1])
    namespace = GRANTED[0]
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "e2e-dra-template"}, "spec": {"spec": claim_spec(B200)}}
    custom.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template)
    used_before = dra_plane.quota_used(namespace)
    made = core.create_namespaced_pod(namespace, pool_pinned(gpu_pod(claim_template="e2e-dra-template"), dra_stack, "b200-train"))
    try:
        claims = dra_plane.wait_for(lambda: admin_custom.list_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaims")["items"], what="the claim from the template")
        assert [c["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] for c in claims] == [B200]
        dra_plane.wait_for(
            lambda: core.read_namespaced_resource_quota("tenant-quota", namespace).status.used.get(f"{B200}.deviceclass.resource.k8s.io/devices") == "1",
            what="the template's claim to be counted")
        body = refused(lambda: create_claim(custom, namespace, claim(B200, 1)))
        assert f"limited: {B200}.deviceclass.resource.k8s.io/devices=1" in body
    finally:
        dra_plane.delete_pods(namespace, [made.metadata.name], quota_used_before=used_before)
        custom.delete_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaimtemplates", "e2e-dra-template")
        for c in admin_custom.list_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims")["items"]:
            admin_custom.delete_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaims", c["metadata"]["name"])


# ---- a vCluster's syncer: claims written inside are copied into the host namespace -----------------
#
# The vCluster's syncer writes its copy of a claim in the tenant's host namespace as the chart's
# ServiceAccount vc-<release>. The host claim policy matches by namespace, any user, so it judges that
# copy exactly like the tenant's own claim; quota does too. No vCluster runs here: we act as its
# ServiceAccount, with the Role the chart adds when sync.toHost.resourceClaims/resourceClaimTemplates
# are on (written out below, since the chart is not rendered in this lane).

SYNCER_ROLE = "e2e-vc-vcluster-claims"


def syncer_user(namespace: str) -> tuple[str, list[str]]:
    return f"system:serviceaccount:{namespace}:vc-vcluster", ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]


def synced(body: dict, namespace: str) -> dict:
    """The syncer's host copy: its translated name (`<name>-x-<namespace>-x-<vcluster>`) and marker label."""
    body["metadata"] = {"name": f"{body['metadata']['name']}-x-default-x-vcluster",
                        "labels": {"vcluster.loft.sh/managed-by": "vcluster", "vcluster.loft.sh/namespace": "default"}}
    return body


def grant_syncer_role(cp, namespace: str) -> None:
    """The chart's rule for synced claims, bound to vc-vcluster in the host namespace."""
    cp.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": SYNCER_ROLE, "namespace": namespace},
                     "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims", "resourceclaimtemplates"],
                                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}]})
    cp.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                     "metadata": {"name": SYNCER_ROLE, "namespace": namespace},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SYNCER_ROLE},
                     "subjects": [{"kind": "ServiceAccount", "name": "vc-vcluster", "namespace": namespace}]})


def drop_syncer_role(cp, namespace: str) -> None:
    rbac = client.RbacAuthorizationV1Api(cp.api_client)
    rbac.delete_namespaced_role_binding(SYNCER_ROLE, namespace)
    rbac.delete_namespaced_role(SYNCER_ROLE, namespace)


@pytest.fixture(scope="module")
def vision_syncer(dra_plane, dra_stack):
    """vision's syncer with the chart's claim Role, once RBAC lets it write a granted claim."""
    namespace = GRANTED[0]
    custom = client.CustomObjectsApi(dra_plane.client_for(*syncer_user(namespace)))
    grant_syncer_role(dra_plane, namespace)

    def admitted() -> bool:
        try:
            create_claim(custom, namespace, synced(claim(H100), namespace))
        except ApiException:
            return False
        return True

    dra_plane.wait_for(admitted, what="vision's syncer Role to take effect")
    yield custom
    drop_syncer_role(dra_plane, namespace)


@pytest.mark.parametrize("case", range(len(CLAIM_ATTACKS)), ids=[c[0] for c in CLAIM_ATTACKS])
@pytest.mark.parametrize("kind", ["resourceclaims", "resourceclaimtemplates"])
def test_claims_synced_from_a_vcluster_meet_the_host_claim_policy(vision_syncer, case, kind):
    _, make, expected = CLAIM_ATTACKS[case]
    body = synced(make(), GRANTED[0])
    if kind == "resourceclaimtemplates":
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": body["metadata"],
                "spec": {"spec": body["spec"]}}
    with pytest.raises(ApiException) as err:
        vision_syncer.create_namespaced_custom_object("resource.k8s.io", "v1", GRANTED[0], kind, body, dry_run="All")
    message = err.value.body
    assert expected in message, message
    assert (err.value.status, "gpu-tenancy-claims-vision" in message) in ((403, True), (422, False)), message


def test_synced_claims_of_the_granted_classes_are_admitted_within_the_grant(vision_syncer):
    namespace = GRANTED[0]
    for body in (claim(H100, 2), claim(B200, 1), first_available(H100, B200)):
        create_claim(vision_syncer, namespace, synced(body, namespace))
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": synced(claim(B200), namespace)["metadata"], "spec": {"spec": claim_spec(B200)}}
    vision_syncer.create_namespaced_custom_object("resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template, dry_run="All")
    body = refused(lambda: create_claim(vision_syncer, namespace, synced(claim(H100, 3), namespace)))
    assert "exceeded quota: tenant-quota" in body and f"{H100}.deviceclass.resource.k8s.io/devices=2" in body


def test_a_vcluster_without_a_grant_has_no_claim_verbs_and_quota_pins_it_at_zero(dra_plane, dra_stack):
    """speech's values keep claim sync off, so the chart gives its syncer no claim rule: RBAC refuses.
    Were the Role there anyway (a hand-edited release), quota at 0 refuses every class."""
    namespace = UNGRANTED[0]
    custom = client.CustomObjectsApi(dra_plane.client_for(*syncer_user(namespace)))
    body = refused(lambda: create_claim(custom, namespace, synced(claim(H100), namespace)))
    assert 'cannot create resource \\"resourceclaims\\"' in body and "exceeded quota" not in body, body
    grant_syncer_role(dra_plane, namespace)
    try:
        def quota_refuses() -> str | None:
            try:
                create_claim(custom, namespace, synced(claim(H100), namespace))
            except ApiException as exc:
                return exc.body if "exceeded quota" in exc.body else None
            raise AssertionError("speech's syncer created a claim")

        body = dra_plane.wait_for(quota_refuses, what="speech's syncer Role to take effect")
        assert f"{H100}.deviceclass.resource.k8s.io/devices=0" in body and f"requests.{IMPLICIT}{H100}=0" in body
    finally:
        drop_syncer_role(dra_plane, namespace)

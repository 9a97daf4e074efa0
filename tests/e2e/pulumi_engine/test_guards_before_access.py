"""A refused guard leaves its tenant without access, on the real engine (issue #40, item 1).

Before, when the API server refused one of a new tenant's admission objects, the namespace, its
quotas, the owners' RoleBinding and the other bindings were live already: members could work in a
namespace the missing guard should have held. The registration plan (manifests/registration.py,
row `access`) makes each RoleBinding of a tenant (and its vCluster release) depend on every one of
the tenant's guards: its admission policies, their bindings and its TenantGrant.

Here the API server refuses eval's TenantGrant (a cluster admin's policy, in force before the first
`up`, denies it), so the engine's create of that guard fails. (A squatter holding one of the guards'
names no longer makes a refusal: every object is applied forced, so the program takes its names
back; tests/e2e/pulumi_engine/test_faults.py.) `up --continue-on-error` goes on with everything
else: the other tenants are deployed in full, eval gets no RoleBinding and its owners can do nothing
in its namespace. Once the policy is gone, the next `up` completes eval, guard first.
"""

from __future__ import annotations

import pytest
from kubernetes import client

import time

from components.manifests.tenant_grant import CRD_NAME, GROUP, PLURAL, VERSION
from tools.applied_stack import AppliedStack
from tools.engine import Engine

pytestmark = pytest.mark.pulumi

STACK = "prod"
REFUSER = "refuse-eval-grant"   # the admin policy (and its binding) that refuses eval's TenantGrant
ROLE_BINDINGS = {"tenant-owners", "tenant-developers", "tenant-viewers"}


def _bindings(s, namespace: str) -> set[str]:
    return {b.metadata.name for b in client.RbacAuthorizationV1Api(s.api).list_namespaced_role_binding(namespace).items}


def _may_create_pods(s, namespace: str, group: str) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": "someone", "groups": [group],
                       "resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "pods"}}}
    return client.AuthorizationV1Api(s.api).create_subject_access_review(review).status.allowed


def _refusal_in_force(s, timeout: float = 60) -> None:
    """The API server loads a new policy a few seconds after accepting it: wait until it refuses a
    dry-run of eval's grant, on the platform's own CRD (created here first; the `up` adopts it)."""
    _, objects = AppliedStack.render(STACK, root=s.project)
    crd = next(o for items in objects.values() for o in items
               if o["kind"] == "CustomResourceDefinition" and o["metadata"]["name"] == CRD_NAME)
    client.ApiextensionsV1Api(s.api).create_custom_resource_definition(crd)
    grant = next(o for o in objects["eval"] if o["kind"] == "TenantGrant")   # valid by the CRD's schema, or 422 first
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.CustomObjectsApi(s.api).create_cluster_custom_object(GROUP, VERSION, PLURAL, grant, dry_run="All")
        except client.ApiException as exc:
            if "refused here" in str(exc.body):   # a policy's denial (422, reason Invalid)
                return
            if exc.status != 404:   # the CRD not served yet
                raise
        assert time.monotonic() < deadline, f"policy {REFUSER} not in force after {timeout} s"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def refused(scenario_factory, e2e_summary):
    s = scenario_factory(STACK)
    # Checkpoints on, as production's backends write them (the fault lane's setting): the refusal
    # leaves the state the way a production `up` would.
    s.engine = Engine(s.project, STACK, s.root / "state", s.cluster.kubeconfig, checkpoints=True)
    admission = client.AdmissionregistrationV1Api(s.api)
    admission.create_validating_admission_policy({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": REFUSER},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": [{
            "apiGroups": [GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"], "resources": [PLURAL]}]},
            "validations": [{"expression": "object.metadata.name != 'eval'", "message": "eval's grant is refused here"}]}})
    admission.create_validating_admission_policy_binding({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": REFUSER}, "spec": {"policyName": REFUSER, "validationActions": ["Deny"]}})
    _refusal_in_force(s)
    error, _, _ = s.engine.failing("up", continue_on_error=True)
    e2e_summary.append(f"guards before access: eval's TenantGrant refused (policy {REFUSER}); "
                       f"eval RoleBindings after the failed up: {sorted(_bindings(s, 'eval'))}")
    return s, error


def test_the_refused_guard_is_named_in_the_error(refused):
    _, error = refused
    assert "eval's grant is refused here" in str(error) and "tenantgrant" in str(error).lower(), str(error)[-2000:]


def test_the_tenant_with_the_refused_guard_has_no_access(refused):
    s, _ = refused
    assert not _bindings(s, "eval") & ROLE_BINDINGS
    assert not _may_create_pods(s, "eval", "eval-leads")
    assert not _may_create_pods(s, "eval", "eval-eng")


def test_the_other_tenants_are_deployed_in_full(refused):
    s, _ = refused
    _, objects = AppliedStack.render(STACK, root=s.project)
    for tenant in ("inference", "llm-finetune"):
        rendered = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects[tenant] if o["kind"] == "RoleBinding"}
        live = {(ns, name) for ns in {n for n, _ in rendered} for name in _bindings(s, ns)}
        assert rendered and rendered <= live, (tenant, rendered - live)
    binding = client.AdmissionregistrationV1Api(s.api).read_validating_admission_policy_binding("gpu-tenancy-guard-inference")
    assert binding.spec.policy_name == "gpu-tenancy-guard"


def test_once_the_refusal_is_gone_the_next_up_completes_the_tenant_guard_first(refused):
    s, _ = refused
    admission = client.AdmissionregistrationV1Api(s.api)
    admission.delete_validating_admission_policy_binding(REFUSER)
    admission.delete_validating_admission_policy(REFUSER)
    up = s.engine.up()
    assert up.changes.get("create"), up.changes
    grant = client.CustomObjectsApi(s.api).get_cluster_custom_object(GROUP, VERSION, PLURAL, "eval")
    assert grant["metadata"]["name"] == "eval"
    assert ROLE_BINDINGS <= _bindings(s, "eval")
    assert _may_create_pods(s, "eval", "eval-leads")
    assert s.engine.up().changes == {}

"""A refused guard leaves its tenant without access, on the real engine (issue #40, item 1).

Before, when the API server refused one of a new tenant's admission objects, the namespace, its
quotas, the owners' RoleBinding and the other bindings were live already: members could work in a
namespace the missing guard should have held. The registration plan (manifests/registration.py,
row `access`) makes each RoleBinding of a tenant (and its vCluster release) depend on every one of
the tenant's guards: its admission policies, their bindings and its TenantGrant.

Here the name of eval's guard binding is taken before the first `up` (another binding holds it, as
a leftover or a squatter would), so the engine's create of it fails. `up --continue-on-error` goes
on with everything else: the other tenants are deployed in full, eval gets no RoleBinding and its
owners can do nothing in its namespace. Once the name is free, the next `up` completes eval, guard
first.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tools.applied_stack import AppliedStack

pytestmark = pytest.mark.pulumi

STACK = "prod"
SQUATTED = "gpu-tenancy-guard-eval"
ROLE_BINDINGS = {"tenant-owners", "tenant-developers", "tenant-viewers"}


def _bindings(s, namespace: str) -> set[str]:
    return {b.metadata.name for b in client.RbacAuthorizationV1Api(s.api).list_namespaced_role_binding(namespace).items}


def _may_create_pods(s, namespace: str, group: str) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
              "spec": {"user": "someone", "groups": [group],
                       "resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "pods"}}}
    return client.AuthorizationV1Api(s.api).create_subject_access_review(review).status.allowed


@pytest.fixture(scope="module")
def refused(scenario_factory, e2e_summary):
    s = scenario_factory(STACK)
    client.AdmissionregistrationV1Api(s.api).create_validating_admission_policy_binding({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": SQUATTED}, "spec": {"policyName": "squatter", "validationActions": ["Deny"]}})
    error, _, _ = s.engine.failing("up", continue_on_error=True)
    e2e_summary.append(f"guards before access: eval's guard binding refused ({SQUATTED} taken); "
                       f"eval RoleBindings after the failed up: {sorted(_bindings(s, 'eval'))}")
    return s, error


def test_the_refused_guard_is_named_in_the_error(refused):
    _, error = refused
    assert SQUATTED in str(error), str(error)[-2000:]


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


def test_once_the_name_is_free_the_next_up_completes_the_tenant_guard_first(refused):
    s, _ = refused
    admission = client.AdmissionregistrationV1Api(s.api)
    admission.delete_validating_admission_policy_binding(SQUATTED)
    up = s.engine.up()
    assert up.changes.get("create"), up.changes
    assert admission.read_validating_admission_policy_binding(SQUATTED).spec.policy_name == "gpu-tenancy-guard"
    assert ROLE_BINDINGS <= _bindings(s, "eval")
    assert _may_create_pods(s, "eval", "eval-leads")
    assert s.engine.up().changes == {}

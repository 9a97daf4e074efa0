"""The vCluster's ServiceAccount stays the vCluster's: one admission policy for the namespaces a vCluster runs in.

The chart binds the vCluster's host rights (its Role in the tenant's namespace and a ClusterRole:
reads of every pod and node of the cluster, for the node sync; docs/queues-and-vclusters.md) to
the ServiceAccount `vc-<release>`, whose token is mounted in the control-plane pod `<release>-0`.
The tenant roles may create pods as any ServiceAccount of their namespace, change pods and
StatefulSets, and exec into any pod, so without this policy a developer would hold that token.
The policy (`gpu-tenancy-vcluster-guard`, bound to the namespaces of tenants with a vCluster)
refuses, for everybody but the platform's operators (whoever may update this policy: the
deployment's identity, cluster admins):

* creating a pod that runs as `vc-<release>`, unless a kube-system controller creates it for the
  chart's StatefulSet `<release>` (its controlling owner): the StatefulSet controller making the
  control-plane pod is admitted, a developer's pod, Job or Deployment as that account is not;
* creating or changing a StatefulSet whose pods would run as `vc-<release>` (the chart's own is
  applied by the deployment's identity): a new image or command would run with the token;
* changing the control-plane pod (its images are mutable) other than by kube-system controllers;
* `exec` and `attach` into the control-plane pod `<release>-<n>` (the token is a file in it).

Deleting the pod stays allowed (the StatefulSet makes it again), and so does port-forwarding to
it (the vCluster's API, which the tenant administers anyway). TokenRequest for the account
(`serviceaccounts/token`) is granted to no tenant role, and a Secret of type
`kubernetes.io/service-account-token` is refused by the guard policy (guard_policy.py).
"""

from __future__ import annotations

from ..fleet.facts import FleetFacts
from .cel import cel_string
from .meta import ADMISSION_API, NAMESPACE_NAME_LABEL, TENANT_LABEL, KubeObject, kube_object, object_meta, platform_labels
from .vcluster import RELEASE_NAME

POLICY_NAME = "gpu-tenancy-vcluster-guard"
SERVICE_ACCOUNT = f"vc-{RELEASE_NAME}"       # the chart's `vc-{{ .Release.Name }}`
CONTROL_PLANE_POD = f"^{RELEASE_NAME}-[0-9]+$"  # the StatefulSet `{{ .Release.Name }}`'s pods


def _runs_as(spec: str) -> str:
    """CEL: the pod spec `spec` runs as the vCluster's ServiceAccount (the deprecated field too)."""
    account = cel_string(SERVICE_ACCOUNT)
    return (f"((has({spec}.serviceAccountName) && {spec}.serviceAccountName == {account}) || "
            f"(has({spec}.serviceAccount) && {spec}.serviceAccount == {account}))")


# By the kind of the request's object: an absent subresource is no key of `request` at all.
_POD = "(request.kind.kind == 'Pod')"
_POD_SPEC = "(request.operation == 'UPDATE' ? oldObject : object).spec"   # the account of a pod cannot change
_STATEFULSET = "(request.kind.kind == 'StatefulSet')"
_SESSION = "(request.kind.kind in ['PodExecOptions', 'PodAttachOptions'])"
# CEL: the pod was made by the chart's StatefulSet (its controller owner).
_OWNED = (
    "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, "
    f"has(r.controller) && r.controller && r.apiVersion == 'apps/v1' && r.kind == 'StatefulSet' && r.name == {cel_string(RELEASE_NAME)})"
)
_TOKEN = "its token holds the vCluster's host rights (among them reads of every pod and node of the cluster)"


def vcluster_guard_objects(facts: FleetFacts) -> list[KubeObject]:
    """The ValidatingAdmissionPolicy and its binding to the vClusters' namespaces; none without a vCluster.

    >>> policy, binding = vcluster_guard_objects(dev.facts)
    >>> binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"]
    ['llm-finetune']
    >>> vcluster_guard_objects(prod.facts)
    []
    """
    namespaces = facts.vcluster_namespaces
    if not namespaces:
        return []
    labels = platform_labels(facts.environment_label)
    policy = kube_object(ADMISSION_API, "ValidatingAdmissionPolicy", object_meta(POLICY_NAME, labels=labels), spec=_policy_spec())
    binding = kube_object(ADMISSION_API, "ValidatingAdmissionPolicyBinding", object_meta(POLICY_NAME, labels=labels), spec={
        "matchResources": {"namespaceSelector": {"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(namespaces)}]}},
        "policyName": POLICY_NAME,
        "validationActions": ["Deny"],
    })
    return [policy, binding]


def _policy_spec() -> dict:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "Exists"}]},
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]},
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CONNECT"], "resources": ["pods/exec", "pods/attach"]},
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["statefulsets"]},
            ],
        },
        # Only requests about the vCluster's account or its pod are evaluated at all (every pod write of
        # the namespace passes through here).
        "matchConditions": [{
            "name": "vcluster-service-account",
            "expression": (
                f"{_SESSION} ? request.name.matches({cel_string(CONTROL_PLANE_POD)}) : "
                f"{_POD} ? {_runs_as(_POD_SPEC)} : "
                f"{_STATEFULSET} ? {_runs_as('object.spec.template.spec')} : false"
            ),
        }],
        "variables": _variables(),
        "validations": _validations(),
    }


def _variables() -> list[dict[str, str]]:
    return [
        {
            "name": "controller",
            "expression": ("request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || "
                           "request.userInfo.username == 'system:kube-controller-manager'"),
        },
        {
            "name": "operator",
            "expression": ("authorizer.group('admissionregistration.k8s.io').resource('validatingadmissionpolicies')"
                           f".name({cel_string(POLICY_NAME)}).check('update').allowed()"),
        },
    ]


def _validations() -> list[dict[str, str]]:
    return [
        {
            "expression": f"!({_POD} && request.operation == 'CREATE') || variables.operator || (variables.controller && {_OWNED})",
            "message": (f"a pod may run as ServiceAccount {SERVICE_ACCOUNT} only as the vCluster's control plane, made by the "
                        f"StatefulSet controller for the chart's StatefulSet '{RELEASE_NAME}': {_TOKEN}; run yours as another ServiceAccount"),
            "reason": "Forbidden",
        },
        {
            "expression": f"!({_POD} && request.operation == 'UPDATE') || variables.operator || variables.controller",
            "message": (f"the vCluster's control-plane pod (ServiceAccount {SERVICE_ACCOUNT}) may not be changed by tenant members: "
                        f"a new image would run with its token, and {_TOKEN}; delete the pod and the StatefulSet makes it again"),
            "reason": "Forbidden",
        },
        {
            "expression": f"!{_STATEFULSET} || variables.operator || variables.controller",
            "message": (f"a StatefulSet whose pods run as ServiceAccount {SERVICE_ACCOUNT} is the vCluster's, applied by the platform "
                        f"from the tenant file: {_TOKEN}; change vcluster.values there, or run your StatefulSet as another ServiceAccount"),
            "reason": "Forbidden",
        },
        {
            "expression": f"!{_SESSION} || variables.operator",
            "messageExpression": "(request.kind.kind == 'PodExecOptions' ? 'exec' : 'attach') + ' into ' + request.name + " + cel_string(
                f" is refused: it is the vCluster's control-plane pod, which holds the token of ServiceAccount {SERVICE_ACCOUNT}, "
                f"and {_TOKEN}; work inside the vCluster with its kubeconfig"),
            "message": f"exec and attach into the vCluster's control-plane pod are refused: it holds the token of ServiceAccount {SERVICE_ACCOUNT}, and {_TOKEN}",
            "reason": "Forbidden",
        },
    ]

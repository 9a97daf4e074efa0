"""API Priority and Fairness: tenants' writes in a priority level of their own, queued per namespace.

The API server classifies every request by the FlowSchema of lowest `matchingPrecedence` that
matches it, into that schema's priority level, and within a level queues it by flow (the schema
and its distinguisher: the user, or the namespace) with shuffle sharding, so one flow filling its
queues delays only the flows that share all of its queues. Two FlowSchemas and one level, for the
stack (`apiFairness`; docs/security.md, "The API server's capacity"):

* `gpu-tenancy-platform` (precedence 7000): the platform's own clients, each one's own flow in the
  built-in `workload-low` level, where ServiceAccounts go without us: every ServiceAccount of the
  namespaces the platform owns (`fleet/tenant_claims.reserved_namespaces`: Kueue's, KAI's, the GPU
  Operator's, monitoring's, ...), the platform admin group and `apiFairness.platformGroups/Users`.
* `gpu-tenancy-tenant-writes` (precedence 7100): every other namespaced write (create, update,
  patch, delete, deletecollection) by an authenticated client, into `gpu-tenancy-tenants`, one flow
  per namespace. Who the client is does not matter: a tenant's people, its CI ServiceAccounts and
  its controllers all write into its namespaces, and the namespace is what the fairness is between.

The built-in schemas that match first stay first: `system:masters` (exempt), the nodes (500), the
controller manager and scheduler (800), kube-system's ServiceAccounts (900). Reads stay where they
were (`global-default`, `workload-low`): a list is cheap to queue per user and APF already charges
it by its estimated width. The schemas' subjects do not grow with tenants: one object each,
whatever the fleet's size.
"""

from __future__ import annotations

from ..fleet.facts import FleetFacts
from ..fleet.tenant_claims import reserved_namespaces
from .meta import KubeObject, kube_object, object_meta, platform_labels

API_VERSION = "flowcontrol.apiserver.k8s.io/v1"
TENANT_LEVEL = "gpu-tenancy-tenants"
TENANT_FLOW = "gpu-tenancy-tenant-writes"
PLATFORM_FLOW = "gpu-tenancy-platform"
PLATFORM_LEVEL = "workload-low"   # built in: where the platform's ServiceAccounts would be without us
PLATFORM_PRECEDENCE, TENANT_PRECEDENCE = 7000, 7100
WRITES = ["create", "delete", "deletecollection", "patch", "update"]
# Namespaces the built-in schemas (precedence below ours) classify already.
_BUILT_IN = frozenset({"kube-system"})


def tenant_level(facts: FleetFacts) -> KubeObject:
    """The tenants' priority level: limited, its seats lendable while idle, queued with shuffle sharding.

    >>> tenant_level(prod.facts)["spec"]["limited"]["limitResponse"]["queuing"]
    {'handSize': 6, 'queueLengthLimit': 50, 'queues': 64}
    """
    fairness = facts.platform.api_fairness
    return kube_object(API_VERSION, "PriorityLevelConfiguration", object_meta(TENANT_LEVEL, labels=platform_labels(facts.environment_label)), spec={
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": fairness.concurrency_shares,
            "lendablePercent": fairness.lendable_percent,
            "limitResponse": {"type": "Queue", "queuing": {
                "handSize": fairness.hand_size, "queueLengthLimit": fairness.queue_length_limit, "queues": fairness.queues}},
        },
    })


def platform_subjects(facts: FleetFacts) -> list[dict]:
    """The platform's clients: its namespaces' ServiceAccounts, the admin group, the listed groups and users.

    >>> [s["kind"] for s in platform_subjects(prod.facts)][:2], platform_subjects(prod.facts)[-1]
    (['Group', 'ServiceAccount'], {'kind': 'ServiceAccount', 'serviceAccount': {'name': '*', 'namespace': 'pulumi-operator'}})
    """
    platform = facts.platform
    fairness = platform.api_fairness
    groups = sorted({platform.platform_admin_group, *fairness.platform_groups})
    subjects: list[dict] = [{"kind": "Group", "group": {"name": g}} for g in groups]
    subjects += [{"kind": "User", "user": {"name": u}} for u in sorted(set(fairness.platform_users))]
    namespaces = sorted(set(reserved_namespaces(platform)) - _BUILT_IN)
    subjects += [{"kind": "ServiceAccount", "serviceAccount": {"name": "*", "namespace": ns}} for ns in namespaces]
    return subjects


def _flow_schema(facts: FleetFacts, name: str, precedence: int, level: str, distinguisher: str, subjects: list[dict],
                 resource_rule: dict, non_resource: bool) -> KubeObject:
    rule: dict = {"subjects": subjects, "resourceRules": [resource_rule]}
    if non_resource:
        rule["nonResourceRules"] = [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
    return kube_object(API_VERSION, "FlowSchema", object_meta(name, labels=platform_labels(facts.environment_label)), spec={
        "matchingPrecedence": precedence,
        "priorityLevelConfiguration": {"name": level},
        "distinguisherMethod": {"type": distinguisher},
        "rules": [rule],
    })


def api_fairness_objects(facts: FleetFacts) -> list[KubeObject]:
    """The two FlowSchemas and the tenants' level, or [] with `apiFairness.enabled: false`.

    >>> [(o["kind"], o["metadata"]["name"]) for o in api_fairness_objects(prod.facts)]
    [('PriorityLevelConfiguration', 'gpu-tenancy-tenants'), ('FlowSchema', 'gpu-tenancy-platform'), ('FlowSchema', 'gpu-tenancy-tenant-writes')]
    """
    if not facts.platform.api_fairness.enabled:
        return []
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True, "namespaces": ["*"]}
    namespaced_writes = {"verbs": WRITES, "apiGroups": ["*"], "resources": ["*"], "namespaces": ["*"]}
    return [
        tenant_level(facts),
        _flow_schema(facts, PLATFORM_FLOW, PLATFORM_PRECEDENCE, PLATFORM_LEVEL, "ByUser", platform_subjects(facts), everything, True),
        _flow_schema(facts, TENANT_FLOW, TENANT_PRECEDENCE, TENANT_LEVEL, "ByNamespace",
                     [{"kind": "Group", "group": {"name": "system:authenticated"}}], namespaced_writes, False),
    ]

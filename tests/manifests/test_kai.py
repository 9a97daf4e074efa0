"""KAI Scheduler objects: department and tenant Queues in KAI's units, and the queue-pinning policy.

The policy's CEL is replayed with cel-python the way the API server runs a ValidatingAdmissionPolicy:
variables in order, then each validation, reporting the messageExpression of a failed one.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import celpy
import pytest

from components.manifests import kai, queues
from components.load import load_environment
from components.fleet.queue_arithmetic import kai_amounts

from .test_queues_crds import queue_lab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def staging():
    return load_environment(REPO, "staging")


def _queues(environment) -> dict[str, dict]:
    objects = queues.platform_queue_objects(environment.facts) + [o for t in environment.tenants for o in queues.tenant_queue_objects(t.spec, environment.view(t.spec))]
    return {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Queue"}


def test_staging_tree_departments_over_tenant_leaves(staging):
    tree = _queues(staging)
    assert sorted(tree) == ["dept-research", "dept-serving", "eval", "inference", "llm-finetune"]
    assert {name: q.get("parentQueue") for name, q in tree.items()} == {
        "dept-research": None, "dept-serving": None, "eval": "dept-research", "inference": "dept-serving", "llm-finetune": "dept-research"
    }
    assert tree["dept-research"]["displayName"] == "Research"
    assert tree["dept-research"]["resources"]["gpu"] == {"limit": -1, "overQuotaWeight": 1, "quota": 64}


def test_leaf_quota_in_kai_units(staging):
    eval_ = _queues(staging)["eval"]["resources"]
    # a100: 8 whole GPUs + 24 x 1g.10gb (1 each) + 6 x 3g.40gb (3 each)
    assert eval_["gpu"] == {"limit": -1, "overQuotaWeight": 1, "quota": 8 + 24 + 18}
    assert eval_["cpu"]["quota"] == 96_000  # "96" CPUs in millicores
    assert eval_["memory"]["quota"] == (768 * 2**30) // 10**6  # 768Gi in MB, rounded down


def test_units_of_odd_resources(make_tenant):
    lab = queue_lab("kai")
    tenant = make_tenant(gpu={"classes": ["l4", "a100-mig", "h100"]}, quota={"gpu": {"l4": 8, "h100": 1}, "mig": {"1g.10gb": 3},
                                                                               "cpu": {"requests": "250m"}, "memory": {"requests": "1500k"}})
    # renamed time-slicing shares (nvidia.com/gpu.shared) count one GPU each, as unrenamed shares do
    assert kai_amounts(tenant, lab.platform).gpu == Fraction(8 + 1 + 3)
    assert (kai_amounts(tenant, lab.platform).cpu, kai_amounts(tenant, lab.platform).memory) == (250, 1)


def test_departments_declared_in_the_stack_or_summed_from_their_tenants():
    tree = _queues(queue_lab("kai"))
    research = tree["dept-research"]["resources"]
    assert (research["gpu"]["quota"], research["cpu"]["quota"], research["memory"]["quota"]) == (60, 200_000, (2 * 2**40) // 10**6)
    # `solo` is declared nowhere: its quota is its one tenant's
    assert tree["dept-solo"]["resources"]["cpu"]["quota"] == 0
    assert tree["dept-solo"]["resources"]["gpu"]["quota"] == 2  # paused's 2 renamed l4 shares
    # `idle` has no tenants but is declared, with its weight
    assert tree["dept-idle"]["resources"]["gpu"] == {"limit": -1, "overQuotaWeight": 2, "quota": 0}


def test_fallback_department_when_no_cohort_anywhere():
    tree = _queues(queue_lab("kai", queues={"kai": {"departments": {}}}))
    assert {q.get("parentQueue") for n, q in tree.items() if not n.startswith("dept-")} == {"dept-tenants", "dept-solo"}


def test_gpu_limit_bounded_only_when_every_class_is():
    tree = _queues(queue_lab("kai"))
    # train may use h100 (dedicated) and l4 but bounds only l4: no finite limit
    assert tree["train"]["resources"]["gpu"]["limit"] == -1
    assert tree["train"]["resources"]["gpu"]["overQuotaWeight"] == 3


def test_gpu_limit_adds_the_borrowing_of_each_class(make_tenant):
    lab = queue_lab("kai")
    tenant = make_tenant(gpu={"classes": ["h100", "a100"]}, quota={"gpu": {"h100": 4, "a100": 2}},
                         queue={"borrowingLimit": {"h100": 2, "a100": 1}})
    assert kai.gpu_limit(tenant, lab.view(tenant)) == 9


def test_decommissioned_tenants_have_no_queue_and_do_not_count():
    derived = _queues(queue_lab("kai", queues={"defaultCohort": "research", "kai": {"departments": {}}}))
    assert "gone" not in derived
    # train: 8 h100 + 4 l4 shares; bench: 4 h100 + 8 a100 + 4 l4 shares + 7 x 1g.10gb
    assert derived["dept-research"]["resources"]["gpu"]["quota"] == 12 + 23


# ---- the queue-pinning admission policy ----------------------------------------------------------

_CEL = celpy.Environment()


def admit(policy: dict, obj: dict, namespace_labels: dict[str, str], kind: str, old: dict | None = None,
          scheduler: bool = False) -> str | None:
    """None if the policy admits `obj` (an UPDATE from `old` when given), else the message of the first failed validation.
    `scheduler` is what `authorizer` answers (no equivalent offline): KAI or a cluster admin, not a tenant member."""
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "namespaceObject": celpy.json_to_cel({"metadata": {"name": "ns", "labels": namespace_labels}}),
        "request": celpy.json_to_cel({"kind": {"kind": kind}, "namespace": "ns", "operation": "UPDATE" if old else "CREATE"}),
    }
    variables: dict[str, Any] = {}
    for variable in policy["spec"]["variables"]:
        activation["variables"] = celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in variables.items()})
        if variable["name"] == "scheduler":
            variables["scheduler"] = celpy.celtypes.BoolType(scheduler)
            continue
        variables[variable["name"]] = _CEL.program(_CEL.compile(variable["expression"])).evaluate(activation)
    activation["variables"] = celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in variables.items()})
    for validation in policy["spec"]["validations"]:
        if not bool(_CEL.program(_CEL.compile(validation["expression"])).evaluate(activation)):
            if "messageExpression" not in validation:
                return validation["message"]
            return str(_CEL.program(_CEL.compile(validation["messageExpression"])).evaluate(activation))
    return None


@pytest.fixture(scope="module")
def policy(staging):
    return kai.queue_pinning_policy(staging.facts)[0]


TENANT_NS = {"gpu-tenancy.dev/tenant": "eval"}


def _pod(labels: dict[str, str] | None) -> dict:
    metadata: dict[str, Any] = {"name": "p"}
    if labels is not None:
        metadata["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"schedulerName": "kai-scheduler", "containers": []}}


@pytest.mark.parametrize("labels", [{"kai.scheduler/queue": "eval"}, {"app": "x"}, None])
def test_pods_may_use_their_tenants_queue_or_none(policy, labels):
    assert admit(policy, _pod(labels), TENANT_NS, "Pod") is None


@pytest.mark.parametrize("queue", ["inference", "dept-research", "default-queue"])
def test_pods_may_not_name_another_queue(policy, queue):
    message = admit(policy, _pod({"kai.scheduler/queue": queue}), TENANT_NS, "Pod")
    assert message == f"kai.scheduler/queue must be eval, the queue of the tenant that owns namespace ns (got '{queue}')"


@pytest.mark.parametrize("spec, admitted", [({"queue": "eval"}, True), ({"queue": "default-queue"}, False), ({}, False)])
def test_pod_groups_must_be_in_the_tenants_queue(policy, spec, admitted):
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "g"}, "spec": spec}
    assert (admit(policy, group, TENANT_NS, "PodGroup") is None) is admitted


def test_policy_scope_and_binding(staging, policy):
    constraints = policy["spec"]["matchConstraints"]
    assert constraints["namespaceSelector"] == {"matchExpressions": [{"key": "gpu-tenancy.dev/tenant", "operator": "Exists"}]}
    assert [r["resources"] for r in constraints["resourceRules"]] == [["pods"], ["podgroups"]]
    assert policy["spec"]["failurePolicy"] == "Fail"
    binding = kai.queue_pinning_policy(staging.facts)[1]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_policy_objects_validate_strictly_against_kubernetes(staging, kube_schemas):
    for obj in kai.queue_pinning_policy(staging.facts):
        for version in (kube_schemas.versions[0], kube_schemas.versions[-1]):
            assert kube_schemas.errors(obj, version) == []


def test_a_tenant_with_only_shared_gpus_gets_a_kai_quota_and_limit(make_tenant):
    """renameByDefault used to render gpu: {quota: 0, limit: 0} for a tenant holding shared-GPU quota."""
    lab = queue_lab("kai")
    tenant = make_tenant(gpu={"classes": ["l4"]}, quota={"gpu": {"l4": 4}}, queue={"borrowingLimit": {"l4": 2}})
    from components.manifests.kai import leaf_queue
    assert leaf_queue(tenant, lab.view(tenant))["spec"]["resources"]["gpu"] == {"limit": 6, "overQuotaWeight": 1, "quota": 4}


def _share(annotations: dict[str, str] | None, labels: dict[str, str] | None = None, scheduler: str = "kai-scheduler") -> dict:
    pod = _pod(labels)
    pod["spec"]["schedulerName"] = scheduler
    if annotations is not None:
        pod["metadata"]["annotations"] = annotations
    return pod


@pytest.mark.parametrize("annotation", ["gpu-fraction", "gpu-memory", "gpu-fraction-num-devices"])
def test_a_gpu_share_must_go_through_the_tenants_kai_queue(policy, annotation):
    share = {annotation: "1"}
    expected = (f"pods with the KAI GPU-sharing annotation {annotation} must set schedulerName: kai-scheduler and label "
                "kai.scheduler/queue: eval (only the tenant's KAI queue meters GPU shares; ResourceQuota cannot)")
    assert admit(policy, _share(share), TENANT_NS, "Pod") == expected
    assert admit(policy, _share(share, {"kai.scheduler/queue": "eval"}, scheduler="default-scheduler"), TENANT_NS, "Pod") == expected
    metered = {**share, "gpu-memory": "2000"} if annotation == "gpu-fraction-num-devices" else share   # devices of a share
    assert admit(policy, _share(metered, {"kai.scheduler/queue": "eval"}), TENANT_NS, "Pod") is None
    assert admit(policy, _share({"other": "x"}), TENANT_NS, "Pod") is None   # an unrelated annotation needs no queue


@pytest.mark.parametrize("annotations", [
    {"gpu-fraction": "0.5", "gpu-fraction-num-devices": "4"},    # two GPUs: KAI charges 4 x 0.5
    {"gpu-memory": "20000", "gpu-fraction-num-devices": "2"},
    {"gpu-fraction": "1"}, {"gpu-fraction": ".25"}, {"gpu-fraction": "0.05"}, {"gpu-memory": "2000"},
])
def test_a_share_kais_queue_meters_is_admitted(policy, annotations):
    assert admit(policy, _share(annotations, {"kai.scheduler/queue": "eval"}), TENANT_NS, "Pod") is None


@pytest.mark.parametrize("annotations, refused", [
    ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, "gpu-fraction-num-devices"),   # KAI charges 0 x 0.5
    ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "-2"}, "gpu-fraction-num-devices"),
    ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "two"}, "gpu-fraction-num-devices"),
    ({"gpu-fraction-num-devices": "8"}, "gpu-fraction-num-devices"),                       # devices of no share
    ({"gpu-fraction": "0"}, "gpu-fraction"), ({"gpu-fraction": "1.5"}, "gpu-fraction"), ({"gpu-fraction": "half"}, "gpu-fraction"),
    ({"gpu-memory": "0"}, "gpu-memory"), ({"gpu-memory": "2Gi"}, "gpu-memory"),
])
def test_a_share_kais_queue_cannot_meter_is_refused(policy, annotations, refused):
    message = admit(policy, _share(annotations, {"kai.scheduler/queue": "eval"}), TENANT_NS, "Pod")
    assert message.startswith(f"annotation {refused}='{annotations[refused]}' is refused: KAI's queue, the only meter of "
                              "GPU shares, cannot charge it as written; it must be "), message


def test_a_gpu_share_cannot_be_added_or_changed_after_creation(policy):
    queued = {"kai.scheduler/queue": "eval"}
    before = _share(None, queued)
    message = "cannot be added, changed or removed after it is created"
    assert message in admit(policy, _share({"gpu-fraction": "1"}, queued), TENANT_NS, "Pod", old=before)
    assert message in admit(policy, _share({"gpu-fraction": "1"}, queued), TENANT_NS, "Pod", old=_share({"gpu-fraction": "0.5"}, queued))
    relabelled = _share({"gpu-fraction": "0.5"}, {**queued, "team": "x"})
    assert admit(policy, relabelled, TENANT_NS, "Pod", old=_share({"gpu-fraction": "0.5"}, queued)) is None


def test_nested_departments_hang_under_their_parent_which_sums_its_children():
    tree = _queues(queue_lab("kai"))   # research nests under org, which the stack declares nowhere else
    assert tree["dept-research"]["parentQueue"] == "dept-org" and "parentQueue" not in tree["dept-org"]
    # org holds its children's quotas: research's declared 60 GPUs, 200 CPUs
    assert (tree["dept-org"]["resources"]["gpu"]["quota"], tree["dept-org"]["resources"]["cpu"]["quota"]) == (60, 200_000)
    assert "parentQueue" not in tree["dept-solo"]


def _gpu_pod(labels: dict[str, str] | None, scheduler: str | None = "kai-scheduler", claims: bool = False) -> dict:
    pod = _pod(labels)
    pod["spec"]["containers"] = [{"name": "c", "resources": {} if claims else {"limits": {"nvidia.com/gpu": "1"}}}]
    if claims:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    if scheduler is None:
        del pod["spec"]["schedulerName"]
    return pod


def test_a_gpu_pod_must_go_through_the_tenants_kai_queue(policy):
    expected = ("a pod that requests GPUs must set schedulerName: kai-scheduler and label kai.scheduler/queue: eval "
                "(GPUs are scheduled through the tenant's KAI queue only; on a Deployment or StatefulSet, in the pod template)")
    queued = {"kai.scheduler/queue": "eval"}
    assert admit(policy, _gpu_pod(None), TENANT_NS, "Pod") == expected
    assert admit(policy, _gpu_pod(queued, scheduler=None), TENANT_NS, "Pod") == expected      # the default scheduler
    assert admit(policy, _gpu_pod(None, claims=True), TENANT_NS, "Pod") == expected          # a DRA claim
    assert admit(policy, _gpu_pod(queued), TENANT_NS, "Pod") is None
    assert admit(policy, _gpu_pod(None, scheduler=None), {**TENANT_NS, "gpu-tenancy.dev/queue-admission": "direct"}, "Pod") is None
    assert admit(policy, _gpu_pod(None, scheduler=None), TENANT_NS, "Pod", scheduler=True) is None   # a cluster admin

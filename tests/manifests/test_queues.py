"""The queue aggregator, and one invariant across every GPU budget: the namespace ResourceQuota,
Kueue's nominal quotas, KAI's queue quotas and the capacity all count the same GPUs."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from components.manifests import queues
from components.manifests.quota import TENANT_QUOTA, resource_quotas
from components.fleet import gpu_capacity as cap
from components.fleet.environment import Environment
from components.load import load_environment
from components.fleet.queue_arithmetic import kai_gpu_units, queue_borrows

from .test_queues_crds import queue_lab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def examples() -> dict[str, Environment]:
    return {name: load_environment(REPO, name) for name in ("dev", "prod", "staging")}


def _with_scheduler(environment: Environment, scheduler: str) -> Environment:
    platform = environment.platform.model_copy(update={"scheduler": scheduler})
    return Environment(environment.name, platform, environment.platform_doc, environment.tenants)


def test_the_stack_scheduler_picks_the_builder(examples):
    prod, staging, dev = examples["prod"], examples["staging"], examples["dev"]
    eval_prod = next(t.spec for t in prod.tenants if t.name == "eval")
    assert [o["kind"] for o in queues.tenant_queue_objects(eval_prod, prod.view(eval_prod))] == ["ClusterQueue", "LocalQueue"]
    assert {o["kind"] for o in queues.platform_queue_objects(prod.facts)} == {
        "ResourceFlavor", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    eval_staging = next(t.spec for t in staging.tenants if t.name == "eval")
    assert [o["kind"] for o in queues.tenant_queue_objects(eval_staging, staging.view(eval_staging))] == ["Queue"]
    assert Counter(o["kind"] for o in queues.platform_queue_objects(staging.facts)) == Counter(
        {"Queue": 2, "ValidatingAdmissionPolicy": 2, "ValidatingAdmissionPolicyBinding": 2, "Config": 1}
    )
    assert queues.platform_queue_objects(dev.facts) == []
    assert all(queues.tenant_queue_objects(t.spec, dev.view(t.spec)) == [] for t in dev.tenants)


def test_a_decommissioned_tenant_keeps_only_a_stopped_cluster_queue():
    lab = queue_lab("kueue")
    gone = next(t.spec for t in lab.tenants if t.name == "gone")
    (queue,) = queues.tenant_queue_objects(gone, lab.view(gone))
    assert (queue["kind"], queue["metadata"]["name"], queue["spec"]) == ("ClusterQueue", "gone", {"stopPolicy": "HoldAndDrain"})
    kai = queue_lab("kai")
    assert queues.tenant_queue_objects(gone, kai.view(gone)) == []


def test_a_renamed_tenant_stops_the_cluster_queue_of_its_old_name():
    lab = queue_lab("kueue")
    bench = next(t.spec for t in lab.tenants if t.name == "bench")
    renamed = bench.model_copy(update={"previous_names": ["workbench"]})
    stopped = [o for o in queues.tenant_queue_objects(renamed, lab.view(renamed))
               if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "workbench"]
    # no namespace may submit to it (no namespaceSelector), it lends nothing (no resource groups)
    assert [o["spec"] for o in stopped] == [{"stopPolicy": "HoldAndDrain"}]


def _resource_quota_gpus(tenant, environment) -> dict[str, int]:
    """GPUs the tenant's ResourceQuotas admit, summed over its namespaces (namespaceQuotas split them)."""
    totals: Counter = Counter()
    for quota in resource_quotas(tenant, environment.view(tenant)):
        if quota["metadata"]["name"] == TENANT_QUOTA:
            for key, value in quota["spec"]["hard"].items():
                if key.startswith("requests.nvidia.com/") and int(value):
                    totals[key[len("requests."):]] += int(value)
    return dict(totals)


def _kueue_nominal(tenant, environment) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    queue = next(o for o in queues.tenant_queue_objects(tenant, environment.view(tenant)) if o["kind"] == "ClusterQueue")
    per_resource: Counter = Counter()
    per_flavor: dict[tuple[str, str], int] = {}
    for group in queue["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"].startswith("nvidia.com/"):
                    per_resource[resource["name"]] += int(resource["nominalQuota"])
                    per_flavor[(flavor["name"], resource["name"])] = int(resource["nominalQuota"])
    return {k: v for k, v in per_resource.items() if v}, per_flavor


def _kai_gpu(tenant, environment) -> Fraction:
    leaf = next(o for o in queues.tenant_queue_objects(tenant, environment.view(tenant)) if o["kind"] == "Queue")
    return Fraction(leaf["spec"]["resources"]["gpu"]["quota"])


@pytest.mark.parametrize("case", ["dev", "prod", "staging", "lab"])
def test_gpu_quotas_agree_across_resource_quota_kueue_kai_and_capacity(examples, case):
    environment = examples[case] if case != "lab" else queue_lab("none")
    platform = environment.platform
    kueue_env, kai_env = _with_scheduler(environment, "kueue"), _with_scheduler(environment, "kai")
    capacity = cap.capacity(platform)
    class_totals: Counter = Counter()
    profile_totals: Counter = Counter()
    pool_totals: Counter = Counter()
    checked = 0
    for loaded in environment.tenants:
        tenant = loaded.spec
        if tenant.lifecycle == "decommissioned":
            continue
        by_resource = {r: c for r, c in cap.gpu_quota_by_resource(tenant, platform).items() if c}
        # 1. the namespace ResourceQuota enforces exactly the per-resource sums of the class quotas,
        # plus, where the queue borrows, a headroom that never lowers them
        held = _resource_quota_gpus(tenant, environment)
        if queue_borrows(tenant, platform):
            assert held == {r: c for r, c in environment.view(tenant).gpu_ceiling_by_resource.items() if c}
            assert all(held.get(r, 0) >= c for r, c in by_resource.items())
        else:
            assert held == by_resource
        # 2. Kueue: nominal quotas summed over flavors are the same per resource ...
        per_resource, per_flavor = _kueue_nominal(tenant, kueue_env)
        assert per_resource == by_resource
        # ... the flavors (pools) of each class hold that class's quota between them ...
        for name, count in cap.gpu_quota_by_class(tenant, platform).items():
            resource = cap.class_resource(platform.gpu_classes[name])
            in_class = sum(n for (pool, r), n in per_flavor.items() if r == resource and platform.node_pools[pool].gpu_class == name)
            assert in_class == count, name
            class_totals[name] += count
        # ... and what all tenants hold on one pool fits in it (capacity x overcommit)
        for (pool, resource), count in per_flavor.items():
            pool_totals[(pool, resource)] += count
        # 3. KAI: one GPU number, each resource weighted the way KAI charges it
        assert _kai_gpu(tenant, kai_env) == sum((kai_gpu_units(r, c) for r, c in by_resource.items()), Fraction(0))
        for profile, count in tenant.quota.mig.items():
            profile_totals[profile] += count
        checked += 1
    assert checked >= 3
    # 4. capacity: what the queues hand out per class and per MIG profile fits the cluster
    for name, total in class_totals.items():
        assert total <= capacity.limit_for_class(platform, name), name
    for profile, total in profile_totals.items():
        assert total <= capacity.limit_for_profile(platform, profile), profile
    for (pool, resource), total in pool_totals.items():
        spec = platform.node_pools[pool]
        offered = cap.node_gpu_resources(platform, spec).get(resource, 0) * spec.node_count
        assert total <= offered * platform.gpu_classes[spec.gpu_class].overcommit, (pool, resource)


def test_ceiling_is_nominal_plus_own_limit_or_the_reachable_capacity():
    lab = queue_lab("kueue")
    bench = next(t.spec for t in lab.tenants if t.name == "bench")
    # h100 +2 and a100 +0 (its borrowingLimit) on nvidia.com/gpu; l4 +2 (limit) of the 16 shares it
    # reaches; MIG has no limit: everything the `mig` pool holds (56, capacity x overcommit 1)
    assert lab.view(bench).gpu_ceiling_by_resource == {"nvidia.com/gpu": 12 + 2, "nvidia.com/gpu.shared": 4 + 2, "nvidia.com/mig-1g.10gb": 56}
    train = next(t.spec for t in lab.tenants if t.name == "train")
    # h100 only through its dedicated pool: nothing to borrow there (8 stays 8)
    assert lab.view(train).gpu_ceiling_by_resource == {"nvidia.com/gpu": 8, "nvidia.com/gpu.shared": 4 + 2}
    assert queue_lab("none").view(bench).gpu_ceiling_by_resource == cap.gpu_quota_by_resource(bench, lab.platform)
    no_cohort = queue_lab("kueue", queues={"defaultCohort": None})
    assert no_cohort.view(bench).gpu_ceiling_by_resource == cap.gpu_quota_by_resource(bench, lab.platform)


def test_a_neighbours_quota_edit_leaves_the_ceiling_alone():
    lab = queue_lab("kueue")
    bench = next(t.spec for t in lab.tenants if t.name == "bench")
    before = lab.view(bench).gpu_ceiling_by_resource
    edited = queue_lab("kueue")
    train = next(t for t in edited.tenants if t.name == "train")
    train.spec.quota.gpu["l4"] = 1    # lends 3 fewer l4 shares to the cohort
    assert edited.view(bench).gpu_ceiling_by_resource == before


@pytest.mark.parametrize("scheduler", ["kueue", "kai"])
def test_direct_admission_holds_the_nominal_quota_and_borrows_nothing(scheduler):
    lab = queue_lab(scheduler)
    bench = next(t.spec for t in lab.tenants if t.name == "bench")
    direct = bench.model_copy(update={"queue": bench.queue.model_copy(update={"admission": "direct", "borrowing_limit": None})})
    assert lab.view(direct).gpu_ceiling_by_resource == cap.gpu_quota_by_resource(bench, lab.platform)
    built = queues.tenant_queue_objects(direct, lab.view(direct))
    if scheduler == "kueue":
        assert built == []   # outside Kueue: nothing labels its pods into a queue, nothing lends its GPUs
    else:
        (queue,) = built
        assert queue["spec"]["resources"]["gpu"]["limit"] == queue["spec"]["resources"]["gpu"]["quota"]

"""Concurrent pod creations at a tenant's quota edge, on a real kube-apiserver (issue #39).

A tenant's namespace holds several ResourceQuotas (the tenant's budget, one per PriorityClass cap,
the cross-namespace-affinity guard). Upstream, kubernetes/kubernetes#141904 (fix unmerged): with two
or more quotas in a namespace, a request one quota denies can be admitted when a status update of
another conflicts and the batch is retried. Separately, the quota controller recomputes `used` from
its informers, which can lag the admission that just charged a pod (kubernetes/kubernetes#24494).

Here developers of a tenant rendered by the tool (6 pods, at most 4 of PriorityClass `batch`, none
of `training`, which the stack grants only through the tenant file) create pods of both classes from
8 clients for several seconds while two more delete their `batch` pods, so the quota controller's
replenishments race the admissions. A watch on the namespace counts the pods at every resource
version. Measured before the guard policy checked the granted classes itself: 8 `training` pods
against that class's `pods: 0` quota, in 1 of 3 runs (and 8 `interactive` pods against a cap of 4).
Asserted: no `training` pod ever exists, each refused by the guard, whatever the quotas' state;
`batch` pods are admitted (the neighbour that must still work); once the churn stops and the
controller has recounted, every quota's `used` equals what exists. Recorded, not asserted (upstream's
race on a cap above zero): the peaks during the churn against `hard` (docs/security.md).
"""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.made_tenants import rendered
from tests.e2e.test_tenancy_admission import message_of, pod
from tools.applied_stack import apply_tenant, remove_tenant
from tools.pod_census import PodCensus, reap

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
TENANT = "race"
GROUP = "race-eng"
PODS, BATCH_PODS = 6, 4   # the tenant's pods, and those of PriorityClass batch (granted)
CHURN_SECONDS = 8.0
TENANT_FILE = {
    "apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": TENANT,
    "displayName": "Quota race", "costCenter": "cc-9999",
    "contacts": [{"name": "Race Owner", "email": "race@acme.dev"}],
    "access": {"owners": {"groups": ["race-leads"]}, "developers": {"groups": [GROUP]}},
    "quota": {"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "16Gi", "limits": "32Gi"},
              "objects": {"pods": PODS},
              "priorityClasses": {"batch": {"pods": BATCH_PODS}}},   # training: the stack's defaultTenantCap, pods: 0
}


@pytest.fixture
def race_tenant(apiserver, prod_stack, tmp_path: Path):
    root = tmp_path / "project"
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO_ROOT / part, root / part)
    (root / "tenants" / f"{TENANT}.yaml").write_text(yaml.safe_dump(TENANT_FILE, sort_keys=False))
    _, objects = prod_stack.render("prod", root=root)
    mine = objects[TENANT]
    results = apiserver.apply_rendered(mine)
    assert not [r for _, r in results if isinstance(r, ApiException)], results
    apiserver.wait_namespaces_ready(mine)
    # The API server puts a new binding and its params in force a moment after it accepts them: the
    # churn starts once the guard refuses a training pod (before that, quota alone decides).
    core = client.CoreV1Api(apiserver.api_client)
    apiserver.wait_for(lambda: _guard_refuses(core), timeout=30, what="the race tenant's guard in force")
    yield mine
    apiserver.delete_namespace(TENANT)
    for obj in mine:
        if "namespace" not in obj["metadata"] and obj["kind"] != "Namespace":
            resource = apiserver.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            apiserver.dynamic.delete(resource, name=obj["metadata"]["name"])


def _guard_refuses(core: client.CoreV1Api) -> bool:
    body = pod(f"race-probe-{uuid.uuid4().hex[:8]}", requests={"cpu": "100m", "memory": "64Mi"}, priority_class="training")
    try:
        core.create_namespaced_pod(TENANT, body, dry_run="All")
    except ApiException as exc:
        return "is not granted to tenant race" in message_of(exc)
    return False


def churn(member: client.CoreV1Api, stop: threading.Event, refusals: list[str], worker: int) -> None:
    """Create pods, PriorityClass `batch` and `training` in turn, until told to stop."""
    n = 0
    while not stop.is_set():
        klass = ("batch", "training")[(worker + n) % 2]
        body = pod(f"race-{uuid.uuid4().hex[:8]}", requests={"cpu": "100m", "memory": "64Mi"}, priority_class=klass)
        body["metadata"].setdefault("labels", {})["race"] = klass
        try:
            member.create_namespaced_pod(TENANT, body)
        except ApiException as exc:
            refusals.append(message_of(exc))
        n += 1


def run_for(seconds: float, workers: list[threading.Thread], stop: threading.Event) -> None:
    """Start the churn's threads, let them run `seconds`, then stop them and wait for each."""
    for thread in workers:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in workers:
        thread.join()


def test_churn_at_the_quota_edge_never_gets_an_ungranted_priority_class(apiserver, race_tenant, e2e_summary):
    core = client.CoreV1Api(apiserver.api_client)
    members = [client.CoreV1Api(apiserver.client_for(f"race-dev-{i}", [GROUP])) for i in range(10)]
    census = PodCensus(client.CoreV1Api(apiserver.client_for("race-census", ["system:masters"])), TENANT,
                       CHURN_SECONDS + 30, groups=("batch", "training"))
    stop, refusals = threading.Event(), []
    workers = [threading.Thread(target=churn, args=(members[i], stop, refusals, i)) for i in range(8)]
    workers += [threading.Thread(target=reap, args=(members[8 + i], TENANT, "race=batch", stop, i)) for i in range(2)]
    run_for(CHURN_SECONDS, workers, stop)

    assert census.peak["training"] == 0, census.peak
    guarded = [m for m in refusals if "PriorityClass 'training' is not granted to tenant race" in m]
    assert len(guarded) >= 8, sorted(set(refusals))[:5]   # every worker's second pod at least
    quota = [m for m in refusals if m not in guarded]
    assert quota and all("exceeded quota" in m or "the object has been modified" in m for m in quota), sorted(set(quota))[:3]
    assert census.peak["batch"] > 0

    def settled() -> list:
        quotas = core.list_namespaced_resource_quota(TENANT).items
        existing = core.list_namespaced_pod(TENANT).items
        counted = {q.metadata.name: int(q.status.used.get("pods", "0")) for q in quotas if "pods" in q.spec.hard}
        expected = {"tenant-quota": len(existing),
                    **{f"priority-{c}": sum(1 for p in existing if p.spec.priority_class_name == c)
                       for c in ("batch", "training")}}
        return quotas if all(counted.get(k) == v for k, v in expected.items()) else []

    quotas = apiserver.wait_for(settled, timeout=60, what="quota used recounted")
    e2e_summary.append(
        f"quota race: 8 developer clients for {CHURN_SECONDS:.0f} s (2 more deleting batch pods): {len(guarded)} training "
        f"pods refused by the guard, none ever existed; {len(quota)} refused by quota; peaks at one resource version: "
        f"{census.peak['pods']} pods against {PODS} hard, batch {census.peak['batch']} against {BATCH_PODS} "
        f"(upstream's race on caps above zero; docs/security.md); used settled to what exists in all {len(quotas)} quotas")


# --- a suspended tenant: the `suspended` quota (pods: 0) beside its budget -------------------------------

HALTED = "halted"
HALTED_GROUP = f"{HALTED}-devs"


@pytest.fixture
def halted_tenant(apiserver, prod_stack):
    objects = rendered(HALTED, {}, lifecycle="suspended",
                       quota={"cpu": {"requests": "8", "limits": "16"}, "memory": {"requests": "16Gi", "limits": "32Gi"},
                              "objects": {"pods": PODS, "configMaps": 5000}})
    apply_tenant(apiserver, objects)
    yield objects
    remove_tenant(apiserver, objects)


def make_pods_and_configmaps(member: client.CoreV1Api, stop: threading.Event, refusals: list[str], worker: int) -> None:
    """Create a pod and a ConfigMap in turn until told to stop: each admitted ConfigMap is a write of
    the budget quota's status, which a replenishment by the quota controller can make conflict."""
    n = 0
    while not stop.is_set():
        suffix = uuid.uuid4().hex[:8]
        try:
            if (worker + n) % 2:
                body = pod(f"halted-{suffix}", requests={"cpu": "100m", "memory": "64Mi"})
                body["metadata"]["labels"] = {"race": "new"}
                member.create_namespaced_pod(HALTED, body)
            else:
                member.create_namespaced_config_map(HALTED, {"metadata": {"name": f"c-{suffix}", "labels": {"race": "churn"}}})
        except ApiException as exc:
            refusals.append(message_of(exc))
        n += 1


def reap_configmaps(member: client.CoreV1Api, stop: threading.Event) -> None:
    """Delete the churn's ConfigMaps as they come, so the quota controller recounts the budget quota."""
    while not stop.is_set():
        try:
            member.delete_collection_namespaced_config_map(HALTED, label_selector="race=churn")
        except ApiException:
            pass
        time.sleep(0.05)


def test_a_suspended_tenants_members_get_no_pod_under_churn(apiserver, halted_tenant, e2e_summary):
    """Suspension keeps the members' roles (they may still read, clean up and create ConfigMaps); a
    pod is refused by the `suspended` quota (`pods: 0`). kubernetes#141904 re-checks a batch's
    requests against only the quotas whose status write conflicted, and admits a request that none
    of those match. Here the batch's writes are the budget quota's (each admitted ConfigMap), which
    the quota controller's recounts (the ConfigMaps deleted) make conflict; the budget also counts
    pods, so a refused pod is charged on the retry and stays refused. Measured: 1,500-1,750 pods
    refused in 8 s and none ever existed; 9,879 in a 60 s run, none either."""
    members = [client.CoreV1Api(apiserver.client_for(f"halted-dev-{i}", [HALTED_GROUP])) for i in range(8)]
    census = PodCensus(client.CoreV1Api(apiserver.client_for("halted-census", ["system:masters"])), HALTED,
                       CHURN_SECONDS + 30, groups=("new",), group=lambda p: (p.metadata.labels or {}).get("race", ""))
    stop, refusals = threading.Event(), []
    workers = [threading.Thread(target=make_pods_and_configmaps, args=(members[i], stop, refusals, i)) for i in range(6)]
    workers += [threading.Thread(target=reap_configmaps, args=(members[6 + i], stop)) for i in range(2)]
    run_for(CHURN_SECONDS, workers, stop)
    core = client.CoreV1Api(apiserver.api_client)
    existing = [p.metadata.name for p in core.list_namespaced_pod(HALTED).items]
    refused = [m for m in refusals if "suspended" in m]
    made = len(core.list_namespaced_config_map(HALTED, label_selector="race=churn").items)
    e2e_summary.append(
        f"suspended tenant under churn: 6 developer clients creating pods and ConfigMaps for {CHURN_SECONDS:.0f} s, 2 deleting "
        f"the ConfigMaps: {len(refused)} pods refused, {census.peak['new']} ever existed ({len(existing)} left), "
        f"{made} ConfigMaps left")
    assert len(refused) >= 6, sorted(set(refusals))[:5]
    assert census.peak["new"] == 0 and not existing, (census.peak, existing[:5])

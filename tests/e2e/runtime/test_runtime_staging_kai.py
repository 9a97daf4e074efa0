"""Whole-GPU pods and GPU shares on the staging stack (`scheduler: kai`): bound by the real KAI Scheduler
through each tenant's queue and Running on kwok's nodes of the pool they asked for; and over-quota use
reclaimed, on the copy where `research` (4 A100s) shares the A100 pool with eval (6) and may reach
more through its ResourceQuota (kai.write_kai_borrowing_project).

GPU shares (`gpu-fraction`, staging's A100 class has `kaiFractions`) bind only once the GPU
reservation pod KAI's binder creates for a node's GPU group says which GPU it holds; no container runs
on kwok, so `tools.kai_reservation.ReservationStandIn` publishes it as the pod's program would. The
binder runs with the plugins the stack's KAI `Config` turns on (`hamicore`), as KAI's operator would
start it."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from components.fleet import gpu_capacity as cap
from components.manifests.placement_policy import placement
from tests.e2e.scheduling.jobs import wait_or_explain
from tests.e2e.scheduling.kai import KaiPods, kai_pod, on_pool, require_kai, write_kai_borrowing_project
from tools.kai import KaiScheduler
from tests.e2e.runtime.kai_shares import GPU_PORTION, VISIBLE_DEVICES, binder_args, kai_fraction_pod, share_config
from tests.e2e.runtime.runs import GRACE_SECONDS
from tools.kai_reservation import GPU_GROUP_LABEL, GPU_INDEX_ANNOTATION, RESERVATION_NAMESPACE, ReservationStandIn
from tools.runtime import REQUIRED_ENV, running_runtime_stack, start_at_once

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

RUN_SECONDS = 3
PREEMPTIBILITY = "kai.scheduler/preemptibility"   # a pod-grouper label: only preemptible pods go over quota


@pytest.fixture(scope="module")
def kai_stack(e2e_summary, runtime_totals, tmp_path_factory):
    require_kai(REQUIRED_ENV)
    root = write_kai_borrowing_project(tmp_path_factory.mktemp("kai-runtime") / "project")
    for applied in running_runtime_stack("staging", e2e_summary, root, what="staging + research beside eval, KAI",
                                         totals=runtime_totals):
        try:
            seconds = KaiScheduler(applied.plane.cp).start(binder_args=binder_args(applied))
            applied.reservations = ReservationStandIn(applied.plane.cp).start()
        except BaseException:
            applied.plane.cp.stop()
            raise
        e2e_summary.append(f"runtime lane (staging + research beside eval, KAI): KAI Scheduler started in {seconds:.1f}s")
        try:
            yield applied
        finally:
            applied.reservations.stop()


@pytest.fixture
def pods(kai_stack):
    created = KaiPods(kai_stack)
    yield created
    created.cleanup()


def _whole_gpu_pools(stack) -> dict[str, str]:
    """Tenant -> the first pool of whole GPUs it may use, for every tenant with whole-GPU quota."""
    platform = stack.environment.platform
    out = {}
    for loaded in stack.environment.tenants:
        if not cap.gpu_quota_by_resource(loaded.spec, platform).get(cap.GPU):
            continue
        pools = [p for p in placement(loaded.spec, stack.environment.view(loaded.spec)).pools
                 if cap.node_gpu_resources(platform, platform.node_pools[p]).get(cap.GPU)]
        if pools:
            out[loaded.name] = pools[0]
    return out


def test_whole_gpu_pods_are_bound_by_kai_and_run_on_their_pool(kai_stack, pods):
    targets = _whole_gpu_pools(kai_stack)
    assert set(targets) >= {"eval", "llm-finetune", "inference"}
    names = {t: pods.submit(t, kai_pod(1, queue=t, **on_pool(kai_stack, t, pool))) for t, pool in targets.items()}

    def running(tenant: str):
        pod = pods.core.read_namespaced_pod(names[tenant], tenant)
        return pod if pod.status.phase == "Running" and pod.status.start_time else None

    for tenant, pool in targets.items():
        pod = wait_or_explain(pods.cp, lambda t=tenant: running(t), f"{tenant}'s pod Running",
                              lambda t=tenant: pods.explain(t, names[t]), timeout=90)
        assert kai_stack.node_pool[pod.spec.node_name] == pool
        request = pods.bind_request(tenant, names[tenant])   # KAI placed it, not kube-scheduler
        assert request is not None and request["spec"]["selectedNode"] == pod.spec.node_name

    def ran_for(seconds: float) -> bool:   # and they keep running: nothing evicts or fails them
        now = datetime.datetime.now(datetime.timezone.utc)
        return all((p := running(t)) is not None and (now - p.status.start_time).total_seconds() >= seconds for t in targets)

    pods.cp.wait_for(lambda: ran_for(RUN_SECONDS), timeout=30, interval=0.5, what=f"every pod Running for {RUN_SECONDS} s")


def _quick_exit(body: dict) -> dict:
    """A pod that leaves at once when evicted (kwok removes a deleted pod after its grace period)."""
    body["spec"]["terminationGracePeriodSeconds"] = GRACE_SECONDS
    return body


def test_over_quota_use_is_reclaimed_when_the_quotas_owner_submits(kai_stack, pods):
    queue = kai_stack.find("Queue", "research")
    assert queue["spec"]["resources"]["gpu"]["quota"] == 4
    per_node = kai_stack.environment.platform.node_pools["a100-shared"].gpus_per_node
    research = on_pool(kai_stack, "research", "a100-shared")
    borrowed = [pods.submit("research", _quick_exit(kai_pod(per_node // 2, queue="research",
                                                            labels={PREEMPTIBILITY: "preemptible"}, **research)))
                for _ in range(2)]   # the whole pool: 8 GPUs on a queue quota of 4

    phase = lambda namespace, name: _phase(pods, namespace, name)   # noqa: E731

    for name in borrowed:
        wait_or_explain(pods.cp, lambda n=name: phase("research", n) == "Running", f"research's {name} Running",
                        lambda n=name: pods.explain("research", n), timeout=90)
    owner = pods.submit("eval", _quick_exit(kai_pod(per_node // 2, queue="eval", **on_pool(kai_stack, "eval", "a100-shared"))))
    wait_or_explain(pods.cp, lambda: phase("eval", owner) == "Running", f"eval's {owner} Running on the reclaimed GPUs",
                    lambda: pods.explain("eval", owner), timeout=120)
    assert [phase("research", n) for n in borrowed].count("Running") == 1   # back to its quota: one pod of 4 reclaimed
    evictions = [e for e in pods.core.list_namespaced_event("research").items
                 if e.reason == "Evict" and e.involved_object.kind == "PodGroup"]
    assert len(evictions) == 1, [(e.involved_object.name, e.message) for e in evictions]   # KAI's, on the reclaimed pod's group


def _phase(pods, namespace: str, name: str) -> str | None:
    try:
        return pods.core.read_namespaced_pod(name, namespace).status.phase
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _wait_running(pods, namespace: str, name: str, timeout: float = 90) -> Any:
    wait_or_explain(pods.cp, lambda: _phase(pods, namespace, name) == "Running", f"{namespace}'s {name} Running",
                    lambda: pods.explain(namespace, name) + f"\nstand-in: {pods.stack.reservations.errors[-3:]}", timeout)
    return pods.core.read_namespaced_pod(name, namespace)


def test_gpu_shares_of_two_tenants_run_on_one_gpu_the_reservation_pod_holds(kai_stack, pods, e2e_summary):
    shares = {t: pods.submit(t, _quick_exit(kai_fraction_pod(0.5, queue=t, **on_pool(kai_stack, t, "a100-shared"))))
              for t in ("eval", "research")}
    running = {t: _wait_running(pods, t, name) for t, name in shares.items()}
    groups = {pod.metadata.labels.get(GPU_GROUP_LABEL) for pod in running.values()}
    assert len(groups) == 1 and None not in groups, groups   # one GPU group: both halves of one GPU
    assert len({pod.spec.node_name for pod in running.values()}) == 1
    [group] = groups
    reservation = [p for p in pods.core.list_namespaced_pod(RESERVATION_NAMESPACE).items
                   if (p.metadata.labels or {}).get(GPU_GROUP_LABEL) == group]
    assert len(reservation) == 1, [p.metadata.name for p in reservation]   # one reservation pod holds the GPU
    device = reservation[0].metadata.annotations[GPU_INDEX_ANNOTATION]
    assert reservation[0].spec.node_name == running["eval"].spec.node_name
    assert kai_stack.reservations.published[reservation[0].metadata.name] == device
    # kwok started it at once (the stand-in's MutatingAdmissionPolicy), not after its Stages' random delay
    assert start_at_once().items() <= reservation[0].metadata.annotations.items(), reservation[0].metadata.annotations
    for tenant, pod in running.items():   # the binder wrote the reserved GPU and the share into each pod's ConfigMap
        data = share_config(pods.core, pod)
        assert data[VISIBLE_DEVICES] == device and float(data[GPU_PORTION]) == 0.5, (tenant, data)
    e2e_summary.append(f"runtime lane (staging + research beside eval, KAI): eval's and research's 0.5 shares Running "
                       f"on one GPU of {running['eval'].spec.node_name} (group {group}, {device})")


def test_over_quota_gpu_shares_are_reclaimed_when_the_quotas_owner_submits(kai_stack, pods, e2e_summary):
    per_node = kai_stack.environment.platform.node_pools["a100-shared"].gpus_per_node
    research, quota = on_pool(kai_stack, "research", "a100-shared"), kai_stack.find("Queue", "research")["spec"]["resources"]["gpu"]["quota"]
    held = pods.submit("research", _quick_exit(kai_pod(quota, queue="research", **research)))   # its quota, not preemptible
    _wait_running(pods, "research", held)
    shares = [pods.submit("research", _quick_exit(kai_fraction_pod(0.5, queue="research", labels={PREEMPTIBILITY: "preemptible"},
                                                                  **research))) for _ in range(4)]   # 2 GPUs over its quota
    for name in shares:
        _wait_running(pods, "research", name)
    groups = {pods.pod_group("research", name)["metadata"]["name"] for name in shares}
    free = per_node - quota - len(shares) // 2
    owner = pods.submit("eval", _quick_exit(kai_pod(free + 2, queue="eval", **on_pool(kai_stack, "eval", "a100-shared"))))
    _wait_running(pods, "eval", owner, timeout=120)   # on the GPUs the shares held
    assert _phase(pods, "research", held) == "Running"   # what research holds inside its quota stays
    left = [n for n in shares if _phase(pods, "research", n) == "Running"]
    assert len(left) <= len(shares) - 2, left   # at least one GPU's worth of shares reclaimed
    evicted = {e.involved_object.name for e in pods.core.list_namespaced_event("research").items
               if e.reason == "Evict" and e.involved_object.kind == "PodGroup"} & groups
    assert len(evicted) == len(shares) - len(left), (sorted(evicted), left)   # by KAI, each share's PodGroup
    e2e_summary.append(f"runtime lane (staging + research beside eval, KAI): {len(evicted)} of research's "
                       f"{len(shares)} over-quota 0.5 shares reclaimed by KAI for eval's {free + 2} GPUs")

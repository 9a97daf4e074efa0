"""An MPS share on the runtime lane, on a fixture stack (no example stack shares GPUs by MPS):
fixtures/mps, one L4 node shared 4 ways by MPS, two tenants with 3 shares of quota each (overcommit 1.5).

The node advertises what the device plugin would from the stack's own config: its
`nvidia.com/device-plugin.config` label names the entry of the rendered device-plugin ConfigMap, and
`nvidia.com/gpu` is GPUs x that entry's MPS replicas. Each share is one unit of the tenant's quota;
a share over the quota is refused, pods beyond the node's replicas stay Pending (Insufficient
nvidia.com/gpu) and run once the other tenant's shares are gone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.fleet import gpu_capacity as cap
from components.manifests.meta import DEVICE_PLUGIN_CONFIG_LABEL, GPU_TAINT_TOLERATION, pool_label
from tests.e2e.runtime.runs import RuntimeJobs, timed_job
from tests.e2e.scheduling.jobs import event_lines, wait_or_explain
from tools.runtime import running_runtime_stack

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

ROOT = Path(__file__).resolve().parent / "fixtures" / "mps"
POOL, FIRST, SECOND = "l4-mps", "audio", "vision"
HOLD_SECONDS = 300   # longer than the test: the shares end when their Job is deleted


@pytest.fixture(scope="module")
def mps_stack(e2e_summary, runtime_totals):
    yield from running_runtime_stack("mps", e2e_summary, ROOT, what="mps fixture", totals=runtime_totals)


@pytest.fixture
def jobs(mps_stack):
    j = RuntimeJobs(mps_stack)
    yield j
    j.cleanup()


def _share_job(platform, count: int, seconds: float) -> dict:
    # No queueing on this stack: the pods select the pool and tolerate its GPU taint themselves.
    return timed_job({cap.GPU: 1}, seconds, parallelism=count, queue=None,
                     node_selector={pool_label(platform): POOL}, tolerations=[dict(GPU_TAINT_TOLERATION)])


def _mps_replicas(stack, node) -> int:
    """The MPS replicas of the device-plugin config entry the node's label names (the rendered ConfigMap)."""
    operator = stack.environment.platform.gpu_operator
    entry = stack.find("ConfigMap", operator.device_plugin_config, operator.namespace)["data"][node.metadata.labels[DEVICE_PLUGIN_CONFIG_LABEL]]
    [resource] = yaml.safe_load(entry)["sharing"]["mps"]["resources"]
    assert resource["name"] == cap.GPU
    return resource["replicas"]


def test_mps_shares_are_counted_as_the_stack_says_and_the_rest_wait(mps_stack, jobs, e2e_summary):
    platform = mps_stack.environment.platform
    pool = platform.node_pools[POOL]
    [name] = pool.nodes
    core = client.CoreV1Api(mps_stack.plane.cp.api_client)
    node = core.read_node(name)
    shares = pool.gpus_per_node * _mps_replicas(mps_stack, node)
    assert node.status.allocatable[cap.GPU] == str(shares) == "4"   # 1 L4 x 4 MPS replicas
    quotas = {t: cap.gpu_quota_by_resource(mps_stack.tenant(t), platform)[cap.GPU] for t in (FIRST, SECOND)}
    assert quotas == {FIRST: 3, SECOND: 3} and sum(quotas.values()) > shares

    # Both hold their shares until deleted (a run that ended by itself under load would free a share
    # before the waiting ones are counted): the first tenant's deletion is what frees them.
    first = jobs.submit(FIRST, _share_job(platform, quotas[FIRST], HOLD_SECONDS))
    jobs.wait_pod_phase(FIRST, first, "Running", quotas[FIRST])
    second = jobs.submit(SECOND, _share_job(platform, quotas[SECOND], HOLD_SECONDS))
    running = jobs.wait_pod_phase(SECOND, second, "Running", shares - quotas[FIRST])
    assert {p.spec.node_name for p in running} == {name}

    def waiting():
        pods = [p for p in jobs.pods(SECOND, second) if p.status.phase == "Pending" and not p.spec.node_name]
        refused = [p for p in pods if any(f"Insufficient {cap.GPU}" in line for line in event_lines(core, SECOND, p.metadata.name))]
        return refused if len(refused) == quotas[SECOND] - len(running) else None

    pending = wait_or_explain(mps_stack.plane.cp, waiting, f"{SECOND}'s shares beyond the node's {shares} Pending",
                              lambda: jobs.explain(SECOND, second), timeout=60)
    for tenant in (FIRST, SECOND):   # each share one unit of quota, the waiting ones too
        jobs.wait_quota(tenant, cap.quota_key(cap.GPU), str(quotas[tenant]))
    extra = _share_job(platform, 1, 1)["spec"]["template"]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod(FIRST, {"apiVersion": "v1", "kind": "Pod",
                                           "metadata": {"name": "e2e-one-share-too-many"}, "spec": extra["spec"]})
    assert refused.value.status == 403 and "exceeded quota" in refused.value.body

    jobs.delete(FIRST, first)   # its shares come free: the waiting ones run on them
    jobs.wait_quota(FIRST, cap.quota_key(cap.GPU), "0")
    now = jobs.wait_pod_phase(SECOND, second, "Running", quotas[SECOND], timeout=90)
    assert {p.spec.node_name for p in now} == {name}
    e2e_summary.append(f"runtime lane (mps fixture): {shares} MPS shares on {name} ({pool.gpus_per_node} L4 x "
                       f"{shares // pool.gpus_per_node}), each 1 unit of quota; {len(pending)} of {SECOND}'s waited Pending, ran once {FIRST}'s were gone")

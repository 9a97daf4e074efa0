"""The runtime lane's cluster as the exporters a real one runs would publish it (pure).

The chargeback and allocation rules (components/manifests/monitoring_rules.py) read what
kube-state-metrics, the DCGM exporter and Kueue publish. The runtime lane runs none of them (no
kubelet, no GPU), so this module derives the same series from the API objects the lane's cluster
serves (camelCase dicts, as `ApiClient.sanitize_for_serialization` gives them):

* kube-state-metrics: `kube_namespace_labels`, `kube_node_labels` and `kube_job_labels` (every
  label, as with `--metric-labels-allowlist=namespaces=[*],nodes=[*],jobs=[*]`),
  `kube_node_status_allocatable` and `kube_pod_container_resource_requests` of GPU resources
  (`nvidia.com/...`: whole GPUs, MIG instances, time-sliced shares; CPU and memory are left out,
  no rule reads them), `kube_pod_status_phase`, `kube_pod_owner`, `kube_pod_info`,
  `kube_resourcequota` (hard and used of every key); of each Job `kube_job_created`,
  `kube_job_status_start_time`, `kube_job_status_completion_time` (once set), `kube_job_status_active` and
  `kube_job_spec_parallelism` / `kube_job_spec_completions` (what `tenants simulate
  --from-prometheus` reads); with its `resourceclaims` and `resourceslices` collectors,
  `kube_resourceclaim_allocation_device_info` (a series per device result of an allocated claim),
  `kube_resourceclaim_status_reserved_for` (per consumer) and `kube_resourceslice_info` (per
  slice: driver, pool, node), labelled as KSM's native stores of kubernetes/kube-state-metrics#3020
  label them (no KSM release has them yet);
* Kueue: `kueue_pending_workloads` per ClusterQueue and status, and the
  `kueue_admission_wait_time_seconds` histogram (creation to `Admitted`, of every Workload seen
  admitted, so it only grows, as Kueue's counter does);
* DCGM (`--kubernetes-virtual-gpus`: every device a Running pod holds, shares too):
  `DCGM_FI_DEV_GPU_UTIL` per device, its percent the pod's `UTIL_ANNOTATION` (0 without it), MIG
  instances with `GPU_I_PROFILE` / `GPU_I_ID`. A stand-in knows no GPU topology: `gpu` is the
  device's ordinal among the node's devices of that resource.

`ran_gpu_seconds` is the other side of the check: what the pods' own lifecycles (tools.runtime
`PodRun`) say they held, weighted per device as the stack says (`device_gpu_fractions`). The HTTP
shell is tools/runtime_exporter.py.
"""

from __future__ import annotations

import datetime
from typing import Any, Iterable, Mapping

from components.manifests.meta import COST_CENTER_LABEL, TENANT_LABEL
from components.manifests.monitoring_rules import ksm_label, sanitize

Sample = tuple[str, dict[str, str], float]

GPU_PREFIX = "nvidia.com/"
MIG_PREFIX = "nvidia.com/mig-"
UTIL_ANNOTATION = "runtime-metrics.gpu-tenancy.dev/gpu-util-percent"
PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
# Kueue's admission-wait buckets are exponential from 1 s; these cover the lane's waits.
WAIT_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# Metric family -> exposition type; a family's samples are written together under its TYPE line.
TYPES = {
    "kube_namespace_labels": "gauge",
    "kube_node_labels": "gauge",
    "kube_node_status_allocatable": "gauge",
    "kube_pod_container_resource_requests": "gauge",
    "kube_pod_status_phase": "gauge",
    "kube_pod_owner": "gauge",
    "kube_pod_info": "gauge",
    "kube_job_labels": "gauge",
    "kube_job_created": "gauge",
    "kube_job_status_start_time": "gauge",
    "kube_job_status_completion_time": "gauge",
    "kube_job_status_active": "gauge",
    "kube_job_spec_parallelism": "gauge",
    "kube_job_spec_completions": "gauge",
    "kube_resourcequota": "gauge",
    "kube_resourceclaim_allocation_device_info": "gauge",
    "kube_resourceclaim_status_reserved_for": "gauge",
    "kube_resourceslice_info": "gauge",
    "kueue_pending_workloads": "gauge",
    "kueue_admission_wait_time_seconds": "histogram",
    "DCGM_FI_DEV_GPU_UTIL": "gauge",
}


def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity as a number.

    >>> quantity("768Gi"), quantity("250m"), quantity(4)
    (824633720832.0, 0.25, 4.0)
    """
    from kubernetes.utils import parse_quantity

    return float(parse_quantity(text))


def _labels_series(metric: str, key: str, name: str, labels: Mapping[str, str]) -> Sample:
    return metric, {key: name, **{ksm_label(k): v for k, v in sorted(labels.items())}}, 1.0


def namespace_series(namespaces: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """`kube_namespace_labels` of each namespace, every label allow-listed.

    >>> namespace_series([{"metadata": {"name": "eval", "labels": {"gpu-tenancy.dev/tenant": "eval"}}}])
    [('kube_namespace_labels', {'namespace': 'eval', 'label_gpu_tenancy_dev_tenant': 'eval'}, 1.0)]
    """
    return [_labels_series("kube_namespace_labels", "namespace", ns["metadata"]["name"], ns["metadata"].get("labels") or {})
            for ns in namespaces]


def node_series(nodes: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """`kube_node_labels` and the GPU resources of `kube_node_status_allocatable` of each node.

    >>> node_series([{"metadata": {"name": "n1", "labels": {"a.dev/gpu-class": "h100"}},
    ...               "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}}}])[1]
    ('kube_node_status_allocatable', {'node': 'n1', 'resource': 'nvidia_com_gpu', 'unit': 'integer'}, 8.0)
    """
    out = []
    for node in nodes:
        name = node["metadata"]["name"]
        out.append(_labels_series("kube_node_labels", "node", name, node["metadata"].get("labels") or {}))
        for resource, amount in sorted(((node.get("status") or {}).get("allocatable") or {}).items()):
            if resource.startswith(GPU_PREFIX):
                out.append(("kube_node_status_allocatable", {"node": name, "resource": sanitize(resource), "unit": "integer"},
                            quantity(amount)))
    return out


def pod_gpu_requests(pod: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """(container, resource, amount) of every GPU resource the pod's containers request.

    >>> pod_gpu_requests({"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "nvidia.com/mig-1g.10gb": "7"}}}]}})
    [('main', 'nvidia.com/mig-1g.10gb', 7.0)]
    """
    return [(c["name"], resource, quantity(amount))
            for c in (pod.get("spec") or {}).get("containers") or []
            for resource, amount in sorted(((c.get("resources") or {}).get("requests") or {}).items())
            if resource.startswith(GPU_PREFIX)]


def pod_series(pods: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """`kube_pod_status_phase` (1 for the pod's phase, 0 for the others) and the GPU
    `kube_pod_container_resource_requests` of each pod (`node` empty until it is bound).

    >>> pod = {"metadata": {"namespace": "eval", "name": "p", "uid": "u"}, "spec": {"nodeName": "n1", "containers": [
    ...     {"name": "main", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}, "status": {"phase": "Running"}}
    >>> [s for s in pod_series([pod]) if s[2]]
    [('kube_pod_status_phase', {'namespace': 'eval', 'pod': 'p', 'uid': 'u', 'phase': 'Running'}, 1.0), ('kube_pod_container_resource_requests', {'namespace': 'eval', 'pod': 'p', 'uid': 'u', 'container': 'main', 'node': 'n1', 'resource': 'nvidia_com_gpu', 'unit': 'integer'}, 2.0)]
    """
    out: list[Sample] = []
    for pod in pods:
        meta = pod["metadata"]
        ident = {"namespace": meta["namespace"], "pod": meta["name"], "uid": meta.get("uid", "")}
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        out += [("kube_pod_status_phase", {**ident, "phase": p}, float(p == phase)) for p in PHASES]
        node = (pod.get("spec") or {}).get("nodeName") or ""
        out += [("kube_pod_container_resource_requests",
                 {**ident, "container": container, "node": node, "resource": sanitize(resource), "unit": "integer"}, amount)
                for container, resource, amount in pod_gpu_requests(pod)]
    return out


def pod_owner_series(pods: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """`kube_pod_owner` (one per owner reference, `<none>` without one) and `kube_pod_info` of each
    pod (its node and PriorityClass; the lane's pods have no IPs).

    >>> pod = {"metadata": {"namespace": "eval", "name": "p", "uid": "u", "ownerReferences": [
    ...     {"kind": "Job", "name": "j", "controller": True}]}, "spec": {"nodeName": "n1", "priorityClassName": "batch"}}
    >>> pod_owner_series([pod])[0]
    ('kube_pod_owner', {'namespace': 'eval', 'pod': 'p', 'uid': 'u', 'owner_kind': 'Job', 'owner_name': 'j', 'owner_is_controller': 'true'}, 1.0)
    >>> pod_owner_series([pod])[1][1]["priority_class"]
    'batch'
    """
    out: list[Sample] = []
    for pod in pods:
        meta, spec = pod["metadata"], pod.get("spec") or {}
        ident = {"namespace": meta["namespace"], "pod": meta["name"], "uid": meta.get("uid", "")}
        owners = meta.get("ownerReferences") or [{"kind": "<none>", "name": "<none>"}]
        out += [("kube_pod_owner", {**ident, "owner_kind": o["kind"], "owner_name": o["name"],
                                    "owner_is_controller": str(bool(o.get("controller"))).lower() if "controller" in o else "<none>"}, 1.0)
                for o in owners]
        controller = next((o for o in owners if o.get("controller")), {"kind": "<none>", "name": "<none>"})
        out.append(("kube_pod_info", {**ident, "host_ip": "", "pod_ip": "", "node": spec.get("nodeName", ""),
                                      "created_by_kind": controller["kind"], "created_by_name": controller["name"],
                                      "priority_class": spec.get("priorityClassName", ""),
                                      "host_network": str(bool(spec.get("hostNetwork"))).lower()}, 1.0))
    return out


def job_series(jobs: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """kube-state-metrics' series of each Job: `kube_job_labels`, `kube_job_created`, the start and
    completion times once the job controller set them (Unix seconds), its active pods (0 when the
    status has none, as kube-state-metrics writes it), parallelism and completions.

    >>> job = {"metadata": {"namespace": "eval", "name": "j", "creationTimestamp": "2026-01-01T00:00:00Z",
    ...        "labels": {"kueue.x-k8s.io/queue-name": "default"}}, "spec": {"parallelism": 2, "completions": 2},
    ...        "status": {"startTime": "2026-01-01T00:00:07Z"}}
    >>> [(name, value) for name, _, value in job_series([job])]
    [('kube_job_labels', 1.0), ('kube_job_created', 1767225600.0), ('kube_job_status_start_time', 1767225607.0), ('kube_job_status_active', 0.0), ('kube_job_spec_parallelism', 2.0), ('kube_job_spec_completions', 2.0)]
    >>> job_series([job])[0][1]
    {'job_name': 'j', 'namespace': 'eval', 'label_kueue_x_k8s_io_queue_name': 'default'}
    """
    out: list[Sample] = []
    for job in jobs:
        meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
        ident = {"job_name": meta["name"], "namespace": meta["namespace"]}
        out.append(("kube_job_labels", {**ident, **{ksm_label(k): v for k, v in sorted((meta.get("labels") or {}).items())}}, 1.0))
        out.append(("kube_job_created", ident, _time(meta["creationTimestamp"]).timestamp()))
        for field, metric in (("startTime", "kube_job_status_start_time"), ("completionTime", "kube_job_status_completion_time")):
            if status.get(field):
                out.append((metric, ident, _time(status[field]).timestamp()))
        out.append(("kube_job_status_active", ident, float(status.get("active") or 0)))
        for field, metric in (("parallelism", "kube_job_spec_parallelism"), ("completions", "kube_job_spec_completions")):
            if spec.get(field) is not None:
                out.append((metric, ident, float(spec[field])))
    return out


def quota_series(quotas: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """`kube_resourcequota` hard and used of every key of each ResourceQuota (resource named as Kubernetes does).

    >>> quota_series([{"metadata": {"namespace": "eval", "name": "tenant-quota"},
    ...                "status": {"hard": {"requests.nvidia.com/gpu": "20"}, "used": {"requests.nvidia.com/gpu": "4"}}}])[1]
    ('kube_resourcequota', {'namespace': 'eval', 'resourcequota': 'tenant-quota', 'resource': 'requests.nvidia.com/gpu', 'type': 'used'}, 4.0)
    """
    out = []
    for quota in quotas:
        meta, status = quota["metadata"], quota.get("status") or {}
        for kind in ("hard", "used"):
            for resource, amount in sorted((status.get(kind) or {}).items()):
                out.append(("kube_resourcequota", {"namespace": meta["namespace"], "resourcequota": meta["name"],
                                                   "resource": resource, "type": kind}, quantity(amount)))
    return out


def claim_series(claims: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """Per claim, a `kube_resourceclaim_allocation_device_info` per allocated device result (none
    while unallocated) and a `kube_resourceclaim_status_reserved_for` per consumer.

    >>> claim = {"metadata": {"namespace": "vision", "name": "c"}, "status": {
    ...     "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}},
    ...     "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
    >>> for sample in claim_series([claim]): print(sample)
    ('kube_resourceclaim_allocation_device_info', {'resourceclaim': 'c', 'namespace': 'vision', 'request': 'gpu', 'driver': 'gpu.nvidia.com', 'pool': 'n1', 'device': 'gpu-0'}, 1.0)
    ('kube_resourceclaim_status_reserved_for', {'resourceclaim': 'c', 'namespace': 'vision', 'consumer_apigroup': '', 'consumer_resource': 'pods', 'consumer_name': 'p', 'consumer_uid': 'u'}, 1.0)
    """
    out: list[Sample] = []
    for claim in claims:
        ident = {"resourceclaim": claim["metadata"]["name"], "namespace": claim["metadata"]["namespace"]}
        status = claim.get("status") or {}
        for result in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
            out.append(("kube_resourceclaim_allocation_device_info",
                        {**ident, **{key: result.get(key, "") for key in ("request", "driver", "pool", "device")}}, 1.0))
        for consumer in status.get("reservedFor") or []:
            out.append(("kube_resourceclaim_status_reserved_for", {**ident, "consumer_apigroup": consumer.get("apiGroup", ""),
                        "consumer_resource": consumer.get("resource", ""), "consumer_name": consumer.get("name", ""),
                        "consumer_uid": consumer.get("uid", "")}, 1.0))
    return out


def slice_series(slices: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """`kube_resourceslice_info` of each ResourceSlice (`all_nodes` as Go formats a bool).

    >>> slice_series([{"metadata": {"name": "n1-gpu"}, "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1"}}}])
    [('kube_resourceslice_info', {'resourceslice': 'n1-gpu', 'driver': 'gpu.nvidia.com', 'pool_name': 'n1', 'node_name': 'n1', 'all_nodes': 'false'}, 1.0)]
    """
    return [("kube_resourceslice_info", {"resourceslice": s["metadata"]["name"], "driver": s["spec"]["driver"],
                                         "pool_name": s["spec"]["pool"]["name"], "node_name": s["spec"].get("nodeName") or "",
                                         "all_nodes": str(bool(s["spec"].get("allNodes"))).lower()}, 1.0)
            for s in slices]


def _time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)


def admission_wait(workload: Mapping[str, Any]) -> float | None:
    """Seconds from the Workload's creation to its `Admitted` condition; None while not admitted.

    >>> admission_wait({"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "status": {"conditions": [
    ...     {"type": "Admitted", "status": "True", "lastTransitionTime": "2026-01-01T00:00:07Z"}]}})
    7.0
    """
    admitted = _condition(workload, "Admitted")
    if not admitted or admitted["status"] != "True":
        return None
    return (_time(admitted["lastTransitionTime"]) - _time(workload["metadata"]["creationTimestamp"])).total_seconds()


def pending_status(workload: Mapping[str, Any]) -> str | None:
    """Kueue's pending status of a Workload ("active", "inadmissible"), None once it holds quota or finished.

    >>> pending_status({"status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]}})
    'active'
    """
    reserved, finished = _condition(workload, "QuotaReserved"), _condition(workload, "Finished")
    if (finished and finished["status"] == "True") or (reserved and reserved["status"] == "True"):
        return None
    return "inadmissible" if reserved and reserved.get("reason") == "Inadmissible" else "active"


def kueue_series(cluster_queues: Iterable[str], workloads: Iterable[Mapping[str, Any]], queue_of: Mapping[tuple[str, str], str],
                 waits: Iterable[tuple[str, float]]) -> list[Sample]:
    """`kueue_pending_workloads` per ClusterQueue and status (0 included, as Kueue reports them), and
    the admission-wait histogram of `waits` ((ClusterQueue, seconds) of every Workload seen admitted).
    A Workload's ClusterQueue is its LocalQueue's (`queue_of`: (namespace, LocalQueue) -> ClusterQueue).

    >>> wl = {"metadata": {"namespace": "eval"}, "spec": {"queueName": "default"}, "status": {}}
    >>> samples = kueue_series(["eval"], [wl], {("eval", "default"): "eval"}, [("eval", 3.0)])
    >>> samples[0], [s[2] for s in samples if s[0].endswith("_bucket")][:4], samples[-1]
    (('kueue_pending_workloads', {'cluster_queue': 'eval', 'status': 'active'}, 1.0), [0.0, 0.0, 1.0, 1.0], ('kueue_admission_wait_time_seconds_count', {'cluster_queue': 'eval'}, 1.0))
    """
    queues = sorted(set(cluster_queues))
    pending = {(q, s): 0 for q in queues for s in ("active", "inadmissible")}
    for workload in workloads:
        status = pending_status(workload)
        queue = queue_of.get((workload["metadata"]["namespace"], (workload.get("spec") or {}).get("queueName", "")))
        if status and (queue, status) in pending:
            pending[(queue, status)] += 1
    out: list[Sample] = [("kueue_pending_workloads", {"cluster_queue": q, "status": s}, float(n)) for (q, s), n in pending.items()]
    observed = list(waits)
    for queue in queues:
        mine = [seconds for q, seconds in observed if q == queue]
        for le in (*WAIT_BUCKETS, "+Inf"):
            count = len(mine) if le == "+Inf" else sum(1 for s in mine if s <= le)
            out.append(("kueue_admission_wait_time_seconds_bucket", {"cluster_queue": queue, "le": str(le)}, float(count)))
        out.append(("kueue_admission_wait_time_seconds_sum", {"cluster_queue": queue}, float(sum(mine))))
        out.append(("kueue_admission_wait_time_seconds_count", {"cluster_queue": queue}, float(len(mine))))
    return out


def dcgm_series(pods: Iterable[Mapping[str, Any]], label_prefix: str = "") -> list[Sample]:
    """`DCGM_FI_DEV_GPU_UTIL` of every device a Running pod holds, the pod labels under
    `label_prefix` (the stack's `monitoring.dcgmLabelPrefix`).

    >>> pod = {"metadata": {"namespace": "eval", "name": "p", "annotations": {UTIL_ANNOTATION: "60"}},
    ...        "spec": {"nodeName": "n1", "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/mig-3g.40gb": "1"}}}]},
    ...        "status": {"phase": "Running"}}
    >>> dcgm_series([pod])
    [('DCGM_FI_DEV_GPU_UTIL', {'Hostname': 'n1', 'gpu': '0', 'UUID': 'GPU-n1-nvidia_com_mig_3g_40gb-0', 'device': 'nvidia0', 'namespace': 'eval', 'pod': 'p', 'container': 'main', 'GPU_I_PROFILE': '3g.40gb', 'GPU_I_ID': '0'}, 60.0)]
    """
    running = sorted((p for p in pods if (p.get("status") or {}).get("phase") == "Running" and (p.get("spec") or {}).get("nodeName")),
                     key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
    next_device: dict[tuple[str, str], int] = {}
    out: list[Sample] = []
    for pod in running:
        meta, node = pod["metadata"], pod["spec"]["nodeName"]
        util = quantity((meta.get("annotations") or {}).get(UTIL_ANNOTATION, "0"))
        for container, resource, amount in pod_gpu_requests(pod):
            for _ in range(int(amount)):
                ordinal = next_device.get((node, resource), 0)
                next_device[(node, resource)] = ordinal + 1
                labels = {"Hostname": node, "gpu": str(ordinal), "UUID": f"GPU-{node}-{sanitize(resource)}-{ordinal}",
                          "device": f"nvidia{ordinal}", f"{label_prefix}namespace": meta["namespace"],
                          f"{label_prefix}pod": meta["name"], f"{label_prefix}container": container}
                if resource.startswith(MIG_PREFIX):
                    labels |= {"GPU_I_PROFILE": resource.removeprefix(MIG_PREFIX), "GPU_I_ID": str(ordinal)}
                out.append(("DCGM_FI_DEV_GPU_UTIL", labels, util))
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _family(name: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and TYPES.get(name.removesuffix(suffix)) == "histogram":
            return name.removesuffix(suffix)
    return name


def exposition(samples: Iterable[Sample]) -> str:
    """The Prometheus text exposition of `samples`, each family under its TYPE line.

    >>> print(exposition([("kube_pod_status_phase", {"pod": 'a"b', "phase": "Running"}, 1.0)]), end="")
    # TYPE kube_pod_status_phase gauge
    kube_pod_status_phase{pod="a\\"b",phase="Running"} 1.0
    """
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        families.setdefault(_family(sample[0]), []).append(sample)
    lines = []
    for family, members in families.items():
        lines.append(f"# TYPE {family} {TYPES.get(family, 'untyped')}")
        for name, labels, value in members:
            text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            lines.append(f"{name}{{{text}}} {value!r}")
    return "\n".join(lines) + "\n"


def ran_gpu_seconds(runs: Iterable[Any], namespaces: Iterable[Mapping[str, Any]], class_of_node: Mapping[str, str],
                    fractions: Mapping[tuple[str, str], Any]) -> dict[tuple[str, str, str], float]:
    """GPU-equivalent seconds per (cost centre, tenant, GPU class) from the pods' runs (`PodRun`):
    each run's seconds times its devices times what one device is of a GPU (`fractions`:
    (GPU class, resource) -> fraction, `monitoring_rules.device_gpu_fractions`); pods outside the
    tenants' namespaces (no tenant label) are left out.

    >>> import datetime as dt
    >>> from types import SimpleNamespace as Run
    >>> t0 = dt.datetime(2026, 1, 1)
    >>> run = Run(namespace="eval", node="m1", gpus=(("nvidia.com/mig-1g.10gb", 7),), start=t0, end=t0 + dt.timedelta(seconds=20))
    >>> ns = {"metadata": {"name": "eval", "labels": {TENANT_LABEL: "eval", COST_CENTER_LABEL: "cc-1"}}}
    >>> from fractions import Fraction
    >>> ran_gpu_seconds([run], [ns], {"m1": "a100-mig"}, {("a100-mig", "nvidia.com/mig-1g.10gb"): Fraction(1, 7)})
    {('cc-1', 'eval', 'a100-mig'): 20.0}
    """
    owners = {ns["metadata"]["name"]: ns["metadata"].get("labels") or {} for ns in namespaces}
    out: dict[tuple[str, str, str], float] = {}
    for run in runs:
        labels = owners.get(run.namespace, {})
        if TENANT_LABEL not in labels or not (run.start and run.end and run.node):
            continue
        gpu_class = class_of_node[run.node]
        key = (labels.get(COST_CENTER_LABEL, ""), labels[TENANT_LABEL], gpu_class)
        seconds = (run.end - run.start).total_seconds()
        for resource, count in run.gpus:
            out[key] = out.get(key, 0.0) + count * float(fractions[(gpu_class, resource)]) * seconds
    return dict(sorted(out.items()))

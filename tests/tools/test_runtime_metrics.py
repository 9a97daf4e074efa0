"""The runtime lane's exporters, pure part: API objects in, the series the monitoring rules read out."""

from __future__ import annotations

import datetime
import re
from fractions import Fraction

from components.load import load_environment
from components.manifests import monitoring_rules as r
from components.manifests.meta import COST_CENTER_LABEL, TENANT_LABEL
from tools import runtime_metrics as m
from tools.control_plane import REPO_ROOT
from tools.runtime import PodRun

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def _pod(name: str, phase: str, node: str | None, requests: dict[str, str], util: str | None = None, namespace: str = "eval") -> dict:
    meta = {"namespace": namespace, "name": name, "uid": f"uid-{name}"}
    if util is not None:
        meta["annotations"] = {m.UTIL_ANNOTATION: util}
    spec = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi", **requests}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def _by(samples, name):
    return [(labels, value) for n, labels, value in samples if n == name]


def test_a_pod_has_one_phase_and_its_gpu_requests_only_with_the_node_once_bound():
    samples = m.pod_series([_pod("bound", "Running", "n1", {"nvidia.com/gpu": "2"}), _pod("queued", "Pending", None, {"nvidia.com/mig-1g.10gb": "3"})])
    phases = {(labels["pod"], labels["phase"]): value for labels, value in _by(samples, "kube_pod_status_phase")}
    assert [key for key, value in phases.items() if value] == [("bound", "Running"), ("queued", "Pending")]
    assert len(phases) == 2 * len(m.PHASES)
    requests = {(labels["pod"], labels["node"], labels["resource"]): value for labels, value in _by(samples, "kube_pod_container_resource_requests")}
    assert requests == {("bound", "n1", "nvidia_com_gpu"): 2.0, ("queued", "", "nvidia_com_mig_1g_10gb"): 3.0}   # no cpu/memory


def test_quota_keys_keep_their_kubernetes_names_and_quantities_become_numbers():
    quota = {"metadata": {"namespace": "eval", "name": "tenant-quota"},
             "status": {"hard": {"requests.nvidia.com/gpu": "20", "requests.memory": "1Gi"}, "used": {"requests.nvidia.com/gpu": "3"}}}
    got = {(labels["resource"], labels["type"]): value for labels, value in _by(m.quota_series([quota]), "kube_resourcequota")}
    assert got == {("requests.memory", "hard"): 2.0 ** 30, ("requests.nvidia.com/gpu", "hard"): 20.0, ("requests.nvidia.com/gpu", "used"): 3.0}


def test_namespace_and_node_labels_are_allow_listed_as_kube_state_metrics_names_them():
    ns = {"metadata": {"name": "eval", "labels": {TENANT_LABEL: "eval", COST_CENTER_LABEL: "cc-4300"}}}
    node = {"metadata": {"name": "n1", "labels": {"gpu.acme.dev/gpu-class": "a100-mig"}},
            "status": {"allocatable": {"cpu": "64", "nvidia.com/mig-1g.10gb": "28", "nvidia.com/mig-3g.40gb": "8"}}}
    [(labels, _)] = _by(m.namespace_series([ns]), "kube_namespace_labels")
    assert labels == {"namespace": "eval", r.ksm_label(TENANT_LABEL): "eval", r.ksm_label(COST_CENTER_LABEL): "cc-4300"}
    samples = m.node_series([node])
    assert _by(samples, "kube_node_labels") == [({"node": "n1", "label_gpu_acme_dev_gpu_class": "a100-mig"}, 1.0)]
    assert {labels["resource"]: value for labels, value in _by(samples, "kube_node_status_allocatable")} == {
        "nvidia_com_mig_1g_10gb": 28.0, "nvidia_com_mig_3g_40gb": 8.0}


def test_dcgm_reports_each_device_of_running_pods_with_distinct_ordinals_per_node_and_mig_profiles():
    pods = [_pod("a", "Running", "n1", {"nvidia.com/gpu": "2"}, util="80"), _pod("b", "Running", "n1", {"nvidia.com/gpu": "1"}),
            _pod("c", "Running", "n1", {"nvidia.com/mig-3g.40gb": "1"}, util="60"), _pod("done", "Succeeded", "n1", {"nvidia.com/gpu": "1"})]
    samples = _by(m.dcgm_series(pods, label_prefix="exported_"), "DCGM_FI_DEV_GPU_UTIL")
    got = [(labels["exported_pod"], labels["gpu"], labels.get("GPU_I_PROFILE"), value) for labels, value in samples]
    assert got == [("a", "0", None, 80.0), ("a", "1", None, 80.0), ("b", "2", None, 0.0), ("c", "0", "3g.40gb", 60.0)]
    assert len({labels["UUID"] for labels, _ in samples}) == 4 and all("pod" not in labels for labels, _ in samples)


def _workload(name: str, created: int, **conditions: tuple[str, str, int]) -> dict:
    return {"metadata": {"namespace": "eval", "name": name, "uid": name,
                         "creationTimestamp": (T0 + datetime.timedelta(seconds=created)).isoformat()},
            "spec": {"queueName": "default"},
            "status": {"conditions": [{"type": kind, "status": status, "reason": reason,
                                       "lastTransitionTime": (T0 + datetime.timedelta(seconds=at)).isoformat()}
                                      for kind, (status, reason, at) in conditions.items()]}}


def test_kueue_pending_workloads_by_status_and_an_admission_wait_histogram():
    admitted = _workload("admitted", 0, QuotaReserved=("True", "QuotaReserved", 3), Admitted=("True", "Admitted", 3))
    waiting = _workload("waiting", 0, QuotaReserved=("False", "Pending", 1))
    refused = _workload("refused", 0, QuotaReserved=("False", "Inadmissible", 1))
    finished = _workload("finished", 0, Finished=("True", "Succeeded", 9))
    workloads = [admitted, waiting, refused, finished]
    waits = [("eval", m.admission_wait(w)) for w in workloads if m.admission_wait(w) is not None]
    assert waits == [("eval", 3.0)]
    samples = m.kueue_series(["eval", "research"], workloads, {("eval", "default"): "eval"}, waits + [("eval", 40.0)])
    pending = {(labels["cluster_queue"], labels["status"]): value for labels, value in _by(samples, "kueue_pending_workloads")}
    assert pending == {("eval", "active"): 1, ("eval", "inadmissible"): 1, ("research", "active"): 0, ("research", "inadmissible"): 0}
    buckets = [(labels["le"], value) for labels, value in _by(samples, "kueue_admission_wait_time_seconds_bucket") if labels["cluster_queue"] == "eval"]
    assert buckets[:3] == [("1", 0.0), ("2", 0.0), ("4", 1.0)] and buckets[-1] == ("+Inf", 2.0)
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)   # cumulative
    assert _by(samples, "kueue_admission_wait_time_seconds_sum")[0] == ({"cluster_queue": "eval"}, 43.0)


SAMPLE_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*)\} (\S+)$')


def test_the_exposition_is_one_type_line_per_family_then_well_formed_samples():
    samples = [*m.pod_series([_pod('we"ird', "Running", "n1", {"nvidia.com/gpu": "1"})]),
               *m.kueue_series(["eval"], [], {}, [("eval", 2.0)])]
    lines = m.exposition(samples).splitlines()
    types = [line.split()[2] for line in lines if line.startswith("# TYPE")]
    assert types == ["kube_pod_status_phase", "kube_pod_container_resource_requests", "kueue_pending_workloads",
                     "kueue_admission_wait_time_seconds"]
    body = [line for line in lines if not line.startswith("#")]
    assert len(body) == len(samples) and all(SAMPLE_LINE.match(line) for line in body), body
    assert 'pod="we\\"ird"' in body[0]


def test_every_exporter_series_the_rules_read_is_published_or_named_as_left_out():
    """The rendered rules of prod name these raw series; a rule reading a new one must be served here (or listed)."""
    left_out = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_FB_USED"}   # the stand-in reports GPU_UTIL only
    prod = load_environment(REPO_ROOT, "prod")
    exprs = " ".join(rule["expr"] for group in r.rule_groups(prod.facts) for rule in group["rules"])
    read = set(re.findall(r"\b(kube_[a-z_]+|kueue_[a-z_]+|DCGM_[A-Z_]+)\b", exprs))
    published = {name.removesuffix("_bucket") for name in read} - left_out
    assert published <= set(m.TYPES), published - set(m.TYPES)
    assert read >= {"kube_pod_container_resource_requests", "kube_resourcequota", "kueue_admission_wait_time_seconds_bucket"}


# The label keys kube-state-metrics' native stores give these families (kubernetes/kube-state-metrics#3020,
# internal/store/resourceclaim.go and resourceslice.go: the default labels, then each family's).
KSM_DRA_LABELS = {
    "kube_resourceclaim_allocation_device_info": {"resourceclaim", "namespace", "request", "driver", "pool", "device"},
    "kube_resourceclaim_status_reserved_for": {"resourceclaim", "namespace", "consumer_apigroup", "consumer_resource",
                                               "consumer_name", "consumer_uid"},
    "kube_resourceslice_info": {"resourceslice", "driver", "pool_name", "node_name", "all_nodes"},
}


def test_the_claim_series_the_dra_rules_read_are_published_with_kube_state_metrics_labels():
    """The dra fixture's rules (monitoring on) read claim and slice families; the exporter publishes
    each with the label keys KSM gives it, and every label the rules select or group them by."""
    from tests.monitoring.test_promtool import dra_with_monitoring

    dra = dra_with_monitoring()
    exprs = " ".join(rule["expr"] for group in r.rule_groups(dra.facts) for rule in group["rules"])
    read = set(re.findall(r"\b(kube_resource(?:claim|slice)_[a-z_]+)\b", exprs))
    assert read == set(KSM_DRA_LABELS) and read <= set(m.TYPES)
    claim = {"metadata": {"namespace": "vision", "name": "c"}, "status": {
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}
    unallocated = {"metadata": {"namespace": "vision", "name": "waiting"}, "status": {}}
    slices = [{"metadata": {"name": "n1-gpu"}, "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1"}}}]
    samples = [*m.claim_series([claim, unallocated]), *m.slice_series(slices)]
    assert {name: set(labels) for name, labels, _ in samples} == KSM_DRA_LABELS
    assert len(samples) == 3   # nothing for the unallocated claim
    matchers = re.findall(r"(kube_resource(?:claim|slice)_\w+)\{([^}]*)\}", exprs)
    used = {name: set(re.findall(r"\b([a-z_]+)(?:=|!=|=~|!~)\"", matcher)) for name, matcher in matchers}
    assert all(labels <= KSM_DRA_LABELS[name] for name, labels in used.items()), used


def test_ran_gpu_seconds_weights_each_device_and_leaves_out_what_is_no_tenants():
    ns = [{"metadata": {"name": "eval", "labels": {TENANT_LABEL: "eval", COST_CENTER_LABEL: "cc-1"}}},
          {"metadata": {"name": "kube-system", "labels": {}}}]
    fractions = {("a100-mig", "nvidia.com/mig-1g.10gb"): Fraction(1, 7), ("a100-mig", "nvidia.com/mig-3g.40gb"): Fraction(3, 7),
                 ("l4", "nvidia.com/gpu"): Fraction(1, 4)}

    def run(namespace, node, gpus, seconds, started=True):
        return PodRun(namespace, "p", node, gpus, T0 if started else None, T0 + datetime.timedelta(seconds=seconds))

    runs = [run("eval", "m1", (("nvidia.com/mig-1g.10gb", 7), ("nvidia.com/mig-3g.40gb", 2)), 14),
            run("eval", "l1", (("nvidia.com/gpu", 2),), 10), run("kube-system", "l1", (("nvidia.com/gpu", 1),), 10),
            run("eval", "l1", (("nvidia.com/gpu", 1),), 10, started=False)]
    got = m.ran_gpu_seconds(runs, ns, {"m1": "a100-mig", "l1": "l4"}, fractions)
    assert got == {("cc-1", "eval", "a100-mig"): 14 + 2 * 3 / 7 * 14, ("cc-1", "eval", "l4"): 5.0}

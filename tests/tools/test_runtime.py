"""The runtime lane's pure parts: kwok's Stage files, the run annotations, what a pod ran, the summary."""

from __future__ import annotations

import datetime
import re

from tools import runtime
from tools.runtime import PodRun, gpu_seconds, pod_run, run_for, runtime_summary, stage_paths, tenant_of

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def _pod(**status) -> dict:
    return {"metadata": {"namespace": "eval", "name": "p", "uid": "u"},
            "spec": {"nodeName": "gpu-a100-01", "containers": [
                {"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}},
                {"resources": {"requests": {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "3"}}}]},
            "status": status}


def test_stage_paths_follow_each_kustomization(tmp_path):
    for name, files in (("node/fast", ["node-initialize.yaml"]), ("pod/general", ["pod-create.yaml", "pod-ready.yaml"])):
        folder = tmp_path / "kustomize" / "stage" / name
        folder.mkdir(parents=True)
        (folder / "kustomization.yaml").write_text("resources:\n" + "".join(f"- {f}\n" for f in files))
    paths = stage_paths(tmp_path, ["pod/general", "node/fast"])
    assert [str(p.relative_to(tmp_path / "kustomize" / "stage")) for p in paths] == [
        "pod/general/pod-create.yaml", "pod/general/pod-ready.yaml", "node/fast/node-initialize.yaml"]


def test_the_lane_reads_the_node_initialize_status_heartbeat_and_general_pod_stages():
    assert runtime.STAGE_SETS == ("node/fast", "node/heartbeat", "pod/general")
    assert "node-lifecycle-controller" in runtime.RUNTIME_CONTROLLERS and "job-controller" in runtime.RUNTIME_CONTROLLERS


def test_run_for_sets_delay_and_jitter_alike_so_kwok_waits_exactly_that_long():
    ann = run_for(12.5, start_after=1)
    assert ann["pod-complete.stage.kwok.x-k8s.io/delay"] == ann["pod-complete.stage.kwok.x-k8s.io/jitter-delay"] == "12.5s"
    assert ann["pod-ready.stage.kwok.x-k8s.io/delay"] == ann["pod-ready.stage.kwok.x-k8s.io/jitter-delay"] == "1s"
    assert ann["pod-create.stage.kwok.x-k8s.io/delay"] == "0s"


def test_a_succeeded_pod_ran_from_its_start_to_its_containers_finish():
    pod = _pod(startTime="2026-01-01T00:00:00Z", containerStatuses=[
        {"state": {"terminated": {"finishedAt": "2026-01-01T00:00:05Z"}}},
        {"state": {"terminated": {"finishedAt": "2026-01-01T00:00:07Z"}}}])
    run = pod_run(pod)
    assert (run.seconds, run.gpus, run.node) == (7.0, (("nvidia.com/gpu", 3), ("nvidia.com/mig-1g.10gb", 3)), "gpu-a100-01")


def test_a_preempted_pod_stopped_when_its_deletion_was_asked():
    pod = _pod(startTime="2026-01-01T00:00:00Z", containerStatuses=[{"state": {"running": {}}}])
    pod["metadata"] |= {"deletionTimestamp": "2026-01-01T00:00:10Z", "deletionGracePeriodSeconds": 1}
    assert pod_run(pod, deleted_at=T0 + datetime.timedelta(seconds=30)).seconds == 9.0


def test_a_pod_gone_while_running_counts_to_its_deletion_and_one_never_started_counts_nothing():
    running = _pod(startTime="2026-01-01T00:00:00Z")
    assert pod_run(running, deleted_at=T0 + datetime.timedelta(seconds=3)).seconds == 3.0
    assert pod_run(running).seconds == 0.0   # still running and no end given
    assert pod_run(_pod(), deleted_at=T0).seconds == 0.0


def test_gpu_seconds_by_tenant_and_resource_leave_out_other_namespaces():
    end = T0 + datetime.timedelta(seconds=10)
    runs = [PodRun("eval", "a", "n", (("nvidia.com/gpu", 2),), T0, end),
            PodRun("eval-x", "b", "n", (("nvidia.com/mig-1g.10gb", 7),), T0, end),
            PodRun("kube-system", "c", "n", (("nvidia.com/gpu", 8),), T0, end)]
    assert gpu_seconds(runs, {"eval": "eval", "eval-x": "eval"}) == {
        "eval": {"nvidia.com/gpu": 20.0, "nvidia.com/mig-1g.10gb": 70.0}}


def test_the_summary_names_each_count_and_each_tenants_gpu_seconds():
    lines = runtime_summary("dev", {("Job", "Completed"): 2, ("Workload", "Preempted"): 1},
                            {"eval": {"nvidia.com/gpu": 10.0}, "llm-finetune": {"nvidia.com/gpu": 9.96}})
    assert lines == ["runtime lane (dev): 0 Jobs admitted by Kueue, 2 Jobs finished, 1 Kueue preemptions, 0 KAI evictions",
                     "runtime lane (dev): device-seconds eval: nvidia.com/gpu 10.0",
                     "runtime lane (dev): device-seconds llm-finetune: nvidia.com/gpu 10.0"]


def test_tenant_of_maps_every_rendered_namespace_to_its_owner():
    objects = {"_platform": [{"kind": "Namespace", "metadata": {"name": "gpu-operator"}}],
               "inference": [{"kind": "Namespace", "metadata": {"name": "inference"}},
                             {"kind": "Namespace", "metadata": {"name": "inference-canary"}},
                             {"kind": "ResourceQuota", "metadata": {"name": "q"}}]}
    assert tenant_of(objects) == {"inference": "inference", "inference-canary": "inference"}


def test_a_kai_share_counts_its_fraction_of_a_gpu_for_as_long_as_it_ran():
    share = {"metadata": {"namespace": "eval", "name": "s", "uid": "s",
                          "annotations": {"gpu-fraction": "0.25", "gpu-fraction-num-devices": "2"}},
             "spec": {"nodeName": "n", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
             "status": {"startTime": "2026-01-01T00:00:00Z", "containerStatuses": [
                 {"state": {"terminated": {"finishedAt": "2026-01-01T00:00:08Z"}}}]}}
    run = pod_run(share)
    assert run.gpus == ((runtime.KAI_SHARE, 0.5),)
    assert gpu_seconds([run], {"eval": "eval"}) == {"eval": {runtime.KAI_SHARE: 4.0}}


def test_the_summary_table_has_a_row_per_stack_and_their_gpu_seconds_after():
    from tools.runtime import StackTotals, summary_table

    lines = summary_table([StackTotals("prod + cohort 'shared'", {("Workload", "Admitted"): 11, ("Workload", "Preempted"): 2}, {}),
                           StackTotals("dev", {("Job", "Completed"): 2}, {"eval": {"nvidia.com/gpu": 10.0, runtime.KAI_SHARE: 0.5}})])
    header, prod, dev, prod_seconds, dev_seconds = lines
    assert re.split(r"\s{2,}", header)[1:] == list(runtime.SUMMARY_EVENTS.values())
    assert prod.split() == ["prod", "+", "cohort", "'shared'", "11", "0", "2", "0"] and dev.split() == ["dev", "0", "2", "0", "0"]
    assert len({len(header), len(prod), len(dev)}) == 1   # columns line up
    assert prod_seconds == "device-seconds, prod + cohort 'shared': none"
    assert dev_seconds == "device-seconds, dev: eval nvidia.com/gpu 10.0, nvidia.com/gpu (KAI share) 0.5"

"""The replay's Jobs (tools/simulation.py `job_body`): what each trace job asks the cluster for, per
stack scheduler; the real components' side is the runtime lane's (tests/e2e/runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.load import load_environment
from components.manifests.meta import GPU_TAINT_TOLERATION
from components.simulate.trace import TraceJob
from tools.simulation import SCHEDULERS, job_body, tolerance

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def staging():
    return load_environment(REPO, "staging")


def _pod(body: dict) -> tuple[dict, dict]:
    template = body["spec"]["template"]
    return template["metadata"], template["spec"]


def test_a_kai_share_asks_by_annotation_for_its_part_of_one_gpu(staging):
    share = job_body(TraceJob(tenant="eval", submit=0, gpu="a100", count=1, pods=2, duration=60, fraction=0.5),
                     1, "eval", staging, 60)
    whole = job_body(TraceJob(tenant="eval", submit=0, gpu="a100", count=1, duration=60), 2, "eval", staging, 60)
    (meta, spec), (whole_meta, whole_spec) = _pod(share), _pod(whole)
    assert meta["annotations"]["gpu-fraction"] == "0.5"
    assert "nvidia.com/gpu" not in spec["containers"][0]["resources"]["requests"]
    assert whole_spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert "gpu-fraction" not in whole_meta["annotations"]
    # Both are KAI's, on the class's pools the tenant reaches, tolerating the GPU taint once.
    for pod_spec in (spec, whole_spec):
        assert pod_spec["schedulerName"] == "kai-scheduler"
        assert pod_spec["tolerations"].count(GPU_TAINT_TOLERATION) == 1
    assert spec["affinity"] == whole_spec["affinity"]
    # The binder's ConfigMap for the Job's pods, named as KAI's webhook names one (a label's 63 characters).
    prefix = meta["annotations"]["runai/shared-gpu-configmap"]
    assert prefix.startswith("job-00001-") and prefix.endswith("-shared-gpu")
    assert spec["volumes"] == [{"name": f"{prefix}-0-vol", "configMap": {"name": f"{prefix}-0"}}]
    assert share["spec"]["parallelism"] == 2


def test_a_long_job_name_keeps_the_share_volume_a_label(staging):
    name = "a" * 63
    meta, spec = _pod(job_body(TraceJob(tenant="eval", submit=0, gpu="a100", count=1, duration=60, fraction=0.25,
                                        name=name), 0, "eval", staging, 60))
    assert len(spec["volumes"][0]["name"]) == 63 and spec["volumes"][0]["name"].startswith("a" * 30)


def test_every_scheduler_states_its_reaction_time():
    assert set(SCHEDULERS) == {"kueue", "kai"}
    assert all(row.latency_seconds > 0 for row in SCHEDULERS.values())
    assert tolerance("kai", 10).seconds > tolerance("kueue", 10).seconds

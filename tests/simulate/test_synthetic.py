"""The synthetic trace: seeded, shaped by the quotas, and valid for the stack it came from."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from components import load_environment
from components.simulate.synthetic import node_devices, synthetic_trace
from components.simulate.trace import Trace, trace_problems
from components.spec.yaml_source import SourceDocument

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prod():
    return load_environment(REPO, "prod")


def test_the_same_seed_gives_the_same_trace_and_another_seed_another(prod):
    assert synthetic_trace(prod, 200, seed=3) == synthetic_trace(prod, 200, seed=3)
    assert synthetic_trace(prod, 200, seed=3) != synthetic_trace(prod, 200, seed=4)


def test_jobs_follow_the_quotas_and_fit_one_node_and_the_quota(prod):
    trace = synthetic_trace(prod, 2000, seed=1)
    per_tenant = Counter(j.tenant for j in trace.jobs)
    # eval holds 20 + 48 + 16 devices, llm-finetune 40 GPUs, inference 24.
    assert per_tenant["eval"] > per_tenant["llm-finetune"] > per_tenant["inference"] > 0
    per_node = node_devices(prod)
    assert all(j.count <= min(per_node[j.gpu], 8) for j in trace.jobs)
    assert [j.submit for j in trace.jobs] == sorted(j.submit for j in trace.jobs)


def test_a_synthetic_trace_is_a_valid_trace_of_its_stack(prod):
    trace = synthetic_trace(prod, 300, seed=9)
    assert trace_problems(trace, SourceDocument("synthetic", {}), prod) == []
    assert Trace.model_validate(trace.model_dump()) == trace


def test_offered_load_scales_the_spread(prod):
    dense, sparse = synthetic_trace(prod, 300, seed=2, load=2.0), synthetic_trace(prod, 300, seed=2, load=0.5)
    assert max(j.submit for j in dense.jobs) < max(j.submit for j in sparse.jobs)

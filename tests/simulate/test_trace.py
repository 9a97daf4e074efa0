"""The trace format: both readers give the same jobs, and every bad cell is located (file, line,
field) with what is wrong and how to fix it."""

from __future__ import annotations

from pathlib import Path

import pytest

from components import load_environment
from components.simulate.trace import Request, TraceJob, read_trace, request_of
from components.spec.problems import InvalidInput

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "simulate" / "quota-cut.yaml"


@pytest.fixture(scope="module")
def prod():
    return load_environment(REPO, "prod")


def _errors(path: Path, prod) -> list[str]:
    with pytest.raises(InvalidInput) as err:
        read_trace(path, prod, label=path.name)
    return [str(p) for p in err.value.problems]


def test_the_csv_and_yaml_readers_read_the_same_jobs(tmp_path, prod):
    csv = tmp_path / "t.csv"
    csv.write_text("tenant,submit,gpu,count,duration,pods,priority\n"
                   "eval,0,a100,4,600,2,\n\neval,60,1g.10gb,7,300,,batch\n")
    yaml = tmp_path / "t.yaml"
    yaml.write_text("jobs:\n  - {tenant: eval, submit: 0, gpu: a100, count: 4, pods: 2, duration: 600}\n"
                    "  - {tenant: eval, submit: 60, gpu: 1g.10gb, count: 7, duration: 300, priority: batch}\n")
    assert read_trace(csv, prod) == read_trace(yaml, prod)
    assert read_trace(csv, prod).jobs[1] == TraceJob(tenant="eval", submit=60, gpu="1g.10gb", count=7, duration=300, priority="batch")


def test_the_fixture_trace_reads(prod):
    assert len(read_trace(FIXTURE, prod).jobs) == 5


def test_a_csv_cell_error_names_its_line_and_column(tmp_path, prod):
    path = tmp_path / "t.csv"
    path.write_text("tenant,submit,gpu,count,duration\neval,0,a100,4,600\neval,10,a10,0,-5\n")
    errors = _errors(path, prod)
    assert errors == ["t.csv:3:13: count: must be >= 1 (got '0'); write 1 or more",
                      "t.csv:3:15: duration: must be > 0.0 (got '-5'); write more than 0.0"]


def test_unknown_names_are_errors_with_the_close_name(tmp_path, prod):
    path = tmp_path / "t.yaml"
    path.write_text("jobs:\n  - {tenant: evl, submit: 0, gpu: a100, count: 1, duration: 60}\n"
                    "  - {tenant: eval, submit: 0, gpu: a10, count: 1, duration: 60, priority: bach}\n")
    assert _errors(path, prod) == [
        "t.yaml:2:6: jobs[0].tenant: no tenant 'evl' in stack prod; did you mean 'eval'?",
        "t.yaml:3:65: jobs[1].priority: no PriorityClass 'bach' in the stack; did you mean 'batch'?",
        "t.yaml:3:31: jobs[1].gpu: 'a10' is neither a GPU class nor a MIG profile of the stack; did you mean 'a100'?",
    ]


def test_a_class_the_tenant_may_not_use_is_an_error(tmp_path, prod):
    path = tmp_path / "t.csv"
    path.write_text("tenant,submit,gpu,count,duration\ninference,0,a100,1,60\n")
    [error] = _errors(path, prod)
    assert error.startswith("t.csv:2:13: gpu: tenant inference may not use GPU class 'a100' (its classes: h100)"), error


@pytest.mark.parametrize(("text", "expected"), [
    ("tenant,submit,gpu,count\n", "t.csv:1:1: duration: required column is missing"),
    ("tenant,submit,gpu,count,duration,gpus\n", "t.csv:1:34: gpus: unknown column"),
    ("", "t.csv:1:1: the file is empty"),
])
def test_a_bad_csv_header_is_an_error(tmp_path, prod, text, expected):
    path = tmp_path / "t.csv"
    path.write_text(text)
    assert any(e.startswith(expected) for e in _errors(path, prod)), _errors(path, prod)


def test_a_trace_of_another_suffix_is_refused(tmp_path, prod):
    path = tmp_path / "t.json"
    path.write_text("{}")
    assert _errors(path, prod) == ["t.json: a trace is .csv or .yaml (got '.json'); rename the file"]


def test_a_class_asks_for_its_resource_on_its_nodes_and_a_profile_for_its_slice(prod):
    assert request_of("h100", prod) == Request("nvidia.com/gpu", (("gpu.acme.dev/gpu-class", "h100"),))
    assert request_of("3g.40gb", prod) == Request("nvidia.com/mig-3g.40gb")
    assert request_of("h200", prod) is None


def test_docs_simulate_holds_the_models_field_table():
    from components.simulate.trace import field_table

    assert field_table() in (REPO / "docs" / "simulate.md").read_text()


def test_every_rows_problem_is_reported_at_once(tmp_path, prod):
    path = tmp_path / "jobs.csv"
    path.write_text("tenant,submit,gpu,count,duration\neval,0,a100,0,600\nevl,0,a100,1,60\n")
    assert [e.split(": ")[1] for e in _errors(path, prod)] == ["count", "tenant"]


def test_a_kai_share_reads_on_a_class_with_fractions_and_nowhere_else(tmp_path, prod):
    staging = load_environment(REPO, "staging")
    assert staging.platform.gpu_classes["a100"].kai_fractions is not None
    path = tmp_path / "t.csv"
    path.write_text("tenant,submit,gpu,count,duration,fraction\neval,0,a100,1,600,0.5\n")
    assert read_trace(path, staging).jobs[0].fraction == 0.5
    path.write_text("tenant,submit,gpu,count,duration,fraction\n"
                    "eval,0,a100,2,600,0.5\nllm-finetune,0,h100,1,600,0.5\neval,0,1g.10gb,1,60,0.5\neval,0,a100,1,60,1.5\n")
    assert [e.split(": ", 2)[1:] for e in _errors(path, staging)] == [
        ["count", "a share is a part of one GPU: set count to 1 (not 2) and the share in `fraction`"],
        ["fraction", "'h100' is not a GPU class with kaiFractions, so KAI gives no share of it (classes with kaiFractions: a100)"],
        ["fraction", "'1g.10gb' is not a GPU class with kaiFractions, so KAI gives no share of it (classes with kaiFractions: a100)"],
        ["fraction", "must be < 1.0 (got '1.5'); write less than 1.0"],
    ]
    path.write_text("tenant,submit,gpu,count,duration,fraction\neval,0,a100,1,600,0.5\n")
    [error] = _errors(path, prod)
    assert error == ("t.csv:2:19: fraction: a GPU share by fraction needs the KAI Scheduler; stack prod schedules with "
                     "'kueue': ask for whole devices, a MIG profile or the class's shared device instead"), error

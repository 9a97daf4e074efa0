"""A workload trace for `tenants simulate`: jobs a tenant submits, read from CSV or YAML.

The pydantic models below are the one definition of the format (docs/simulate.md shows it); both
readers turn a file into the same `SourceDocument` shape (`jobs.<i>.<field>` with its line and
column) so every error, of the file's shape or against the stack, names file, line, field, what is
wrong and how to fix it, like the tenant files' errors.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import Field, ValidationError

from ..fleet import gpu_capacity as cap
from ..fleet.environment import Environment
from ..manifests.meta import gpu_class_label
from ..spec.base import DnsLabel, Model
from ..spec.field_errors import model_problems
from ..spec.hints import did_you_mean, did_you_mean_tenant
from ..spec.problems import InvalidInput, Problem
from ..spec.yaml_source import SourceDocument, parse_yaml

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
CSV_COLUMNS = ("tenant", "submit", "gpu", "count", "duration", "priority", "pods", "name", "fraction")
REQUIRED_CSV_COLUMNS = ("tenant", "submit", "gpu", "count", "duration")


class TraceJob(Model):
    """One job of a trace: what a tenant submits, when, and for how long it runs once it starts."""

    tenant: DnsLabel = Field(description="the tenant that submits the job (its file's `name`)")
    submit: float = Field(ge=0, description="seconds after the trace start at which the job is submitted")
    gpu: str = Field(min_length=1, description=(
        "what each pod requests: a GPU class of the stack (whole GPUs, or the class's shared device when the class "
        "time-slices or runs MPS) or a MIG profile of its layouts (e.g. 1g.10gb)"))
    count: int = Field(ge=1, description="devices of `gpu` each pod requests")
    duration: float = Field(gt=0, description="seconds the job runs once its pods start (as given: never stretched)")
    priority: Optional[DnsLabel] = Field(None, description="a PriorityClass of the stack (default: the stack's default class)")
    pods: int = Field(1, ge=1, description="pods of the job, all admitted together (Kueue gang-admits a Job)")
    name: Optional[DnsLabel] = Field(None, description="the Job's name (default: job-<index>)")
    fraction: Optional[float] = Field(None, gt=0, lt=1, description=(
        "a KAI GPU share: each pod asks KAI for this part of one GPU (`gpu-fraction`) instead of whole "
        "devices, on a `scheduler: kai` stack whose class `gpu` has `kaiFractions`; `count` must be 1"))


class Trace(Model):
    """A trace: its jobs in any order (the replay sorts them by `submit`)."""

    jobs: list[TraceJob] = Field(description="the jobs of the trace")


def field_table() -> str:
    """The Markdown table of a trace job's fields, from the model (docs/simulate.md holds it; a test
    keeps the two equal).

    >>> field_table().splitlines()[3]
    '| `submit` | yes | seconds after the trace start at which the job is submitted |'
    """
    rows = ["| field | required | meaning |", "|---|---|---|"]
    for name, info in TraceJob.model_fields.items():
        default = "yes" if info.is_required() else f"no (default {info.default if info.default is not None else 'none'})"
        rows.append(f"| `{name}` | {default} | {info.description} |")
    return "\n".join(rows) + "\n"


@dataclass(frozen=True)
class Request:
    """What a job's pods ask the cluster for: one extended resource, and a node selector (class)."""

    resource: str
    node_selector: tuple[tuple[str, str], ...] = ()


def mig_profiles(environment: Environment) -> set[str]:
    """The MIG profiles the stack's pools offer.

    >>> sorted(mig_profiles(prod))
    ['1g.10gb', '3g.40gb']
    """
    platform = environment.platform
    return {p for pool in platform.node_pools.values() for p in cap.node_mig_profiles(platform, pool)}


def request_of(gpu: str, environment: Environment) -> Request | None:
    """The resource and node selector of a job's `gpu` (None: neither a class nor a MIG profile).

    >>> request_of("a100", prod)
    Request(resource='nvidia.com/gpu', node_selector=(('gpu.acme.dev/gpu-class', 'a100'),))
    >>> request_of("1g.10gb", prod).resource
    'nvidia.com/mig-1g.10gb'
    """
    platform = environment.platform
    gpu_class = platform.gpu_classes.get(gpu)
    if gpu_class is not None:
        return Request(cap.class_resource(gpu_class), ((gpu_class_label(platform), gpu),))
    if gpu in mig_profiles(environment):
        return Request(MIG_RESOURCE_PREFIX + gpu)
    return None


def parse_trace_yaml(text: str, file: str) -> SourceDocument:
    """A YAML trace (`jobs:` a list of jobs) as a located document.

    >>> parse_trace_yaml("jobs:\\n  - {tenant: eval, submit: 0, gpu: a100, count: 1, duration: 60}\\n", "t.yaml").position(("jobs", 0, "gpu"))
    (2, 31)
    """
    return parse_yaml(text, file)


def parse_trace_csv(text: str, file: str) -> SourceDocument:
    """A CSV trace (a header row naming CSV_COLUMNS, then one job a row) as a located document:
    each cell at its line and column, empty cells left out (their defaults apply).

    >>> doc = parse_trace_csv("tenant,submit,gpu,count,duration\\neval,0,a100,2,600\\n", "t.csv")
    >>> doc.data["jobs"][0]["count"], doc.position(("jobs", 0, "count"))
    ('2', (2, 13))
    """
    lines = text.splitlines()
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise InvalidInput([Problem(file, 1, 1, "", "the file is empty; write a header row: " + ",".join(CSV_COLUMNS))])
    header = [h.strip() for h in rows[0]]
    problems = [Problem(file, 1, _column(lines[0], i), h, f"unknown column{did_you_mean(h, CSV_COLUMNS, 'columns')}")
                for i, h in enumerate(header) if h not in CSV_COLUMNS]
    problems += [Problem(file, 1, 1, c, f"required column is missing; add it to the header ({','.join(CSV_COLUMNS)})")
                 for c in REQUIRED_CSV_COLUMNS if c not in header]
    if problems:
        raise InvalidInput(problems)
    jobs: list[dict[str, Any]] = []
    positions: dict[tuple, tuple[int, int]] = {("jobs",): (1, 1)}
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        if len(row) > len(header):
            raise InvalidInput([Problem(file, number, 1, "", f"{len(row)} cells, the header names {len(header)}; "
                                        "quote a value holding a comma or add its column to the header")])
        index = len(jobs)
        positions[("jobs", index)] = (number, 1)
        job = {}
        for i, cell in enumerate(row):
            if cell.strip():
                job[header[i]] = cell.strip()
                positions[("jobs", index, header[i])] = (number, _column(lines[number - 1] if number - 1 < len(lines) else "", i))
        jobs.append(job)
    return CsvDocument(file, {"jobs": jobs}, positions)


class CsvDocument(SourceDocument):
    """A CSV trace's document: a problem names the column (its line is the row), not `jobs[3].count`."""

    def field_name(self, path: tuple) -> str:
        """The column of `path`.

        >>> CsvDocument("t.csv", {}).field_name(("jobs", 3, "count"))
        'count'
        """
        return path[-1] if len(path) > 2 and isinstance(path[-1], str) else ""


def _column(line: str, index: int) -> int:
    """1-based column of the `index`th cell of a CSV line (quotes holding commas are rare in traces;
    a wrong column there still names the right line and field)."""
    return sum(len(cell) + 1 for cell in line.split(",")[:index]) + 1


def trace_yaml(trace: Trace, comment: str = "") -> str:
    """The trace as the YAML `read_trace` reads: one flow mapping a job, defaults left out.

    >>> print(trace_yaml(Trace(jobs=[TraceJob(tenant="eval", submit=30, gpu="a100", count=2, duration=600, name="j")])), end="")
    jobs:
      - {tenant: eval, submit: 30, gpu: a100, count: 2, duration: 600, name: j}
    """
    def value(v: Any) -> str:
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        text = str(v)   # a name YAML would read as another type (`123`, `null`) is quoted
        return text if isinstance(v, (int, float)) or yaml.safe_load(text) == text else json.dumps(text)

    lines = [f"# {line}" for line in comment.splitlines()] + (["jobs:"] if trace.jobs else ["jobs: []"])
    for job in trace.jobs:
        fields = job.model_dump(exclude_defaults=True)
        lines.append("  - {" + ", ".join(f"{k}: {value(fields[k])}" for k in TraceJob.model_fields if k in fields) + "}")
    return "\n".join(lines) + "\n"


READERS = {".csv": parse_trace_csv, ".yaml": parse_trace_yaml, ".yml": parse_trace_yaml}


def read_trace(path: Path, environment: Environment, label: str | None = None) -> Trace:
    """Read and check a trace file against the stack; raise `InvalidInput` with every problem.

    >>> _ = (scratch / "t.csv").write_text("tenant,submit,gpu,count,duration\\neval,0,a100,2,600\\n")
    >>> read_trace(scratch / "t.csv", prod).jobs[0].gpu
    'a100'
    """
    file = label or str(path)
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise InvalidInput([Problem(file, 0, 0, "", f"a trace is .csv or .yaml (got '{path.suffix or 'no suffix'}'); rename the file")])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput([Problem(file, 0, 0, "", f"cannot read the trace: {exc}")]) from None
    return trace_from_document(reader(text, file), environment)


def trace_from_document(doc: SourceDocument, environment: Environment) -> Trace:
    """The trace of a located document, checked against the stack (`trace_problems`).

    >>> doc = parse_trace_csv("tenant,submit,gpu,count,duration\\nevl,0,a100,2,600\\n", "t.csv")
    >>> trace_from_document(doc, prod)
    Traceback (most recent call last):
    ...
    components.spec.problems.InvalidInput: t.csv:2:1: tenant: no tenant 'evl' in stack prod; did you mean 'eval'?
    """
    try:
        Trace.model_validate({**doc.data, "jobs": []} if isinstance(doc.data, dict) else doc.data)
    except ValidationError as err:
        raise InvalidInput(model_problems(err, doc, doc.data, Trace)) from None
    jobs = doc.data.get("jobs")
    if not isinstance(jobs, list):
        raise InvalidInput([doc.problem(("jobs",), "must be a list of jobs (see docs/simulate.md)")])
    # Each job on its own, so one bad cell does not hide the other rows' problems.
    problems, valid, tenants = [], [], {t.name: t.spec for t in environment.tenants}
    for index, raw in enumerate(jobs):
        try:
            valid.append(TraceJob.model_validate(raw))
        except ValidationError as err:
            problems += model_problems(err, doc, raw, TraceJob, prefix=("jobs", index))
            continue
        problems += _job_problems(valid[-1], ("jobs", index), doc, environment, tenants)
    if problems:
        raise InvalidInput(problems)
    return Trace(jobs=valid)


def trace_problems(trace: Trace, doc: SourceDocument, environment: Environment) -> list[Problem]:
    """What the stack cannot run of the trace: unknown tenants, GPUs, priority classes, a GPU the
    tenant may not use. A job larger than a side's quota is no error: the report shows it never admitted.

    >>> trace_problems(Trace(jobs=[]), SourceDocument("t.yaml", {}), prod)
    []
    """
    tenants = {t.name: t.spec for t in environment.tenants}
    problems = []
    for index, job in enumerate(trace.jobs):
        problems += _job_problems(job, ("jobs", index), doc, environment, tenants)
    return problems


def _job_problems(job: TraceJob, path: tuple, doc: SourceDocument, environment: Environment, tenants: dict) -> list[Problem]:
    platform = environment.platform
    if job.tenant not in tenants:
        return [doc.problem((*path, "tenant"), f"no tenant '{job.tenant}' in stack {environment.name}"
                            + did_you_mean_tenant(job.tenant, tenants))]
    problems = []
    if job.priority is not None and job.priority not in platform.priority_classes:
        problems.append(doc.problem((*path, "priority"), f"no PriorityClass '{job.priority}' in the stack"
                                    + did_you_mean(job.priority, platform.priority_classes)))
    request = request_of(job.gpu, environment)
    if request is None:
        known = [*platform.gpu_classes, *mig_profiles(environment)]
        return problems + [doc.problem((*path, "gpu"), f"'{job.gpu}' is neither a GPU class nor a MIG profile of the stack"
                                       + did_you_mean(job.gpu, known, "classes and profiles"))]
    if job.fraction is not None:
        problems += _share_problems(job, path, doc, environment)
    view = environment.facts.view(tenants[job.tenant])
    is_class = job.gpu in platform.gpu_classes
    if is_class and job.gpu not in view.allowed_classes:
        problems.append(doc.problem((*path, "gpu"), f"tenant {job.tenant} may not use GPU class '{job.gpu}' "
                                    f"(its classes: {', '.join(view.allowed_classes) or 'none'}); use one of them or grant it in the tenant file"))
    return problems


def _share_problems(job: TraceJob, path: tuple, doc: SourceDocument, environment: Environment) -> list[Problem]:
    """What keeps a `fraction` job from being a KAI share: another scheduler, a class without
    `kaiFractions` (or a MIG profile), more than one device a pod."""
    platform = environment.platform
    where = (*path, "fraction")
    if platform.scheduler != "kai":
        return [doc.problem(where, f"a GPU share by fraction needs the KAI Scheduler; stack {environment.name} "
                                   f"schedules with '{platform.scheduler}': ask for whole devices, a MIG profile or "
                                   "the class's shared device instead")]
    gpu_class = platform.gpu_classes.get(job.gpu)
    if gpu_class is None or gpu_class.kai_fractions is None:
        with_fractions = sorted(name for name, c in platform.gpu_classes.items() if c.kai_fractions is not None)
        return [doc.problem(where, f"'{job.gpu}' is not a GPU class with kaiFractions, so KAI gives no share of it "
                                   f"(classes with kaiFractions: {', '.join(with_fractions) or 'none'})")]
    if job.count != 1:
        return [doc.problem((*path, "count"), f"a share is a part of one GPU: set count to 1 (not {job.count}) "
                                              "and the share in `fraction`")]
    return []

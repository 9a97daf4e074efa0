"""`tenants simulate` at fleet size: a synthetic day replayed on the base and on a one-tenant change.

    .venv/bin/python -m bench.simulate [--tenants 100] [--jobs 5000] [--speed 1000] [--seed 1]

The project is tools/synthetic.py's (N tenants, a stack about 80% promised), committed as the base;
the change lowers the first tenant's H100 quota from 2 to 1. The trace is `--synthetic` of the
working tree (components/simulate/synthetic.py: each tenant offered its quota over the trace). Both
sides run one after the other, each on its own runtime plane (tools/simulation.py), as the command
does. Prints one JSON line: wall seconds per side and in all, the trace's span, the jobs admitted,
the report's findings, and the ratio of the whole to the issue's target (5 minutes for 100 tenants
and 5,000 jobs, base and change together). Exit code 0 whatever the figures: this measures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from components.load import load_environment
from components.simulate.outcome import tenant_figures, tenants_of
from components.simulate.report import compare
from components.simulate.synthetic import synthetic_trace
from tools.simulation import Side, replay, tolerance, unavailable_reason
from tools.synthetic import STACK, tenant_name, write_project

TARGET_SECONDS = 300.0   # issue 37: a 100-tenant, 5,000-job day in under 5 minutes, both sides


def _projects(scratch: Path, tenants: int) -> tuple[Path, Path]:
    """The base (as committed) and the change (first tenant's H100 quota 2 -> 1), two directories."""
    base, change = write_project(scratch / "base", tenants), write_project(scratch / "change", tenants)
    path = change / "tenants" / f"{tenant_name(0)}.yaml"
    text = path.read_text()
    assert text.count("gpu: {h100: 2,") == 1
    path.write_text(text.replace("gpu: {h100: 2,", "gpu: {h100: 1,").replace("training: {gpu: 2}", "training: {gpu: 1}"))
    return base, change


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--speed", type=float, default=1000.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    reason = unavailable_reason()
    if reason:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as scratch:
        base, change = _projects(Path(scratch), args.tenants)
        environment = load_environment(change, STACK)
        trace = synthetic_trace(environment, args.jobs, args.seed)
        walls, outcomes = {}, []
        for label, root in (("base", base), ("change", change)):
            t0 = time.monotonic()
            outcomes.append(replay(STACK, Side(label, root), trace, args.speed,
                                   say=lambda line: print(f"bench.simulate: {line}", flush=True)))
            walls[label] = round(time.monotonic() - t0, 1)
    document = compare(*outcomes, tolerance(environment.platform.scheduler, args.speed), {"speed": args.speed})
    total = sum(walls.values())
    print(json.dumps({
        "tenants": args.tenants, "jobs": len(trace.jobs), "speed": args.speed,
        "trace_span_hours": round(max(j.submit + j.duration for j in trace.jobs) / 3600, 1),
        "wall_seconds": walls, "total_seconds": round(total, 1), "ratio_to_target": round(total / TARGET_SECONDS, 2),
        "admitted": {label: sum(tenant_figures(o, t).admitted for t in tenants_of(o)) for label, o in zip(walls, outcomes)},
        "findings": [f["text"] for f in document["findings"]],
    }))


if __name__ == "__main__":
    main()

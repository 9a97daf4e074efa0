"""The runtime lane: the scheduling lane's control plane, kube-scheduler, Kueue (and KAI on its stack)
with kwok as the kubelet of every inventory node, so pods run and Jobs finish (the plane itself is
`tools.runtime`; this file gates the lane).

Run with `make e2e-runtime` (sets GPU_TENANCY_RUNTIME_REQUIRED=1, so "cannot run" fails instead of
skipping). Each test module starts its own stack in a module-scoped fixture, so one control plane
runs at a time on the lane's two cores.

At the end of the lane pytest's terminal summary prints the **runtime lane summary**: per stack the
Jobs Kueue admitted and that finished, Kueue's preemptions and KAI's evictions (events of the
Workloads, Jobs and PodGroups), and the device-seconds per tenant and resource (a GPU, MIG slice or share as the nodes advertise it; chargeback weighs them) (the pods' own start and
finish), each stack's fixture handing its totals to `runtime_totals`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tools.lanes import gate_lane
from tools.runtime import REQUIRED_ENV, StackTotals, runtime_unavailable_reason, summary_table

_HERE = Path(__file__).resolve().parent
_TOTALS = pytest.StashKey[list]()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gate_lane(items, _HERE, runtime_unavailable_reason, REQUIRED_ENV)


@pytest.fixture(scope="session")
def runtime_totals(request: pytest.FixtureRequest) -> list[StackTotals]:
    """Each stack's totals, appended when its fixture stops it (`running_runtime_stack(totals=...)`)."""
    return request.config.stash.setdefault(_TOTALS, [])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    totals = config.stash.get(_TOTALS, [])
    if totals:
        terminalreporter.section("runtime lane summary (from the cluster's objects)")
        for line in summary_table(totals):
            terminalreporter.write_line(line)

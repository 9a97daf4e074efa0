"""The real scheduling lane: kube-scheduler and Kueue against the e2e control plane (the plane
itself is `tools.scheduling`; this file gates the lane and declares its fixtures).

Run with `make e2e-scheduling` (sets GPU_TENANCY_SCHEDULING_REQUIRED=1, so "cannot run"
fails instead of skipping).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.scheduling.borrowing import write_borrowing_project, write_spare_project
from tools.lanes import gate_lane
from tools.scheduling import REQUIRED_ENV, SchedulingStack, running_scheduling_stack, scheduling_unavailable_reason

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gate_lane(items, _HERE, scheduling_unavailable_reason, REQUIRED_ENV)


@pytest.fixture(scope="session")
def kueue_stack(e2e_summary: list[str]) -> Iterator[SchedulingStack]:
    """The example prod stack (scheduler: kueue) on a control plane with kube-scheduler and Kueue."""
    yield from running_scheduling_stack("prod", e2e_summary)


@pytest.fixture(scope="session")
def borrowing_stack(e2e_summary: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulingStack]:
    root = write_borrowing_project(tmp_path_factory.mktemp("borrowing") / "project")
    yield from running_scheduling_stack("prod", e2e_summary, root, what="prod + cohort 'shared'")


@pytest.fixture(scope="session")
def cohort_stack(e2e_summary: list[str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulingStack]:
    root = write_spare_project(tmp_path_factory.mktemp("cohorts") / "project", mig_lab=True)
    yield from running_scheduling_stack("prod", e2e_summary, root, what="prod + spare capacity + MIG lab pools")

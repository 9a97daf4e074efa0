"""The runtime lane: the scheduling lane's control plane, kube-scheduler, Kueue (and KAI on its stack)
with kwok as the kubelet of every inventory node, so pods run and Jobs finish (the plane itself is
`tools.runtime`; this file gates the lane).

Run with `make e2e-runtime` (sets GPU_TENANCY_RUNTIME_REQUIRED=1, so "cannot run" fails instead of
skipping). Each test module starts its own stack in a module-scoped fixture, so one control plane
runs at a time on the lane's two cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.lanes import gate_lane
from tools.runtime import REQUIRED_ENV, runtime_unavailable_reason

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gate_lane(items, _HERE, runtime_unavailable_reason, REQUIRED_ENV)

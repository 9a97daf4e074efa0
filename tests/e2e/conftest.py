"""Real Kubernetes API server test lane (envtest-style): the fixtures.

The control plane itself is `tools.control_plane` (etcd, kube-apiserver and kube-controller-manager
of the real upstream binaries, built by ``tools/build.sh``), and the applied example stack
`tools.applied_stack`; this file only declares them as fixtures and gates the lane. Code outside
pytest (tools/engine.py, ``make up``, bench/) imports those modules, never this file.

Fixtures
--------
``apiserver`` (session)
    :class:`tools.control_plane.ControlPlane`, started once per session.
``namespace`` (function)
    A fresh namespace (its ``default`` ServiceAccount exists, so pods can be created), deleted
    after the test.
``prod_stack`` (session)
    :class:`tools.applied_stack.AppliedStack`: the example prod stack applied to ``apiserver``.
``e2e_summary`` (session)
    Lines a test appends are printed in pytest's terminal summary.

When the lane cannot run
------------------------
* binaries missing, `go` not on PATH -> every e2e test skipped, reason + install hint
* binaries missing, `go` on PATH     -> skipped with "run make e2e" hint, unless
  ``GPU_TENANCY_E2E_BUILD=1`` (then ``tools/build.sh`` runs at collection;
  a cold build takes ~7 minutes on 2 cores)
* ``GPU_TENANCY_E2E_REQUIRED=1`` (``make e2e`` sets it) turns any skip into
  a collection error, so a CI lane can never pass by skipping.

``GPU_TENANCY_E2E_KEEP=1`` keeps the temp dir with certs, etcd data and logs; the binaries'
knobs are in `tools.control_plane`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from tools.applied_stack import AppliedStack, apply_example_stack
from tools.control_plane import BIN_DIR, ControlPlane, lane_unavailable_reason
from tools.lanes import gate_lane

E2E_MARKER = "e2e: needs a real kube-apiserver (make e2e)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", E2E_MARKER)


# Whether the lane can run is decided without raising at import time (a skip raised while pytest
# loads this conftest would crash `pytest tests/e2e`): the e2e items are skipped -- or, with
# GPU_TENANCY_E2E_REQUIRED=1, the session fails -- here, with the reason.
_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: build/skip only if e2e tests remain
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    build = os.environ.get("GPU_TENANCY_E2E_BUILD") == "1"
    gate_lane(items, _HERE, lambda: lane_unavailable_reason(build=build), "GPU_TENANCY_E2E_REQUIRED")


@pytest.fixture(scope="session")
def apiserver() -> Iterator[ControlPlane]:
    workdir = Path(tempfile.mkdtemp(prefix="gpu-tenancy-e2e-"))
    cp = ControlPlane(BIN_DIR, workdir)
    keep = os.environ.get("GPU_TENANCY_E2E_KEEP") == "1"
    try:
        cp.start()
        yield cp
    finally:
        cp.stop()
        if keep:
            sys.stderr.write(f"\n[e2e] kept control-plane dir {workdir}\n")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


_SUMMARY_KEY = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def e2e_summary(request: pytest.FixtureRequest) -> list[str]:
    """Lines a test appends here are printed in pytest's terminal summary (e.g. matrix sizes)."""
    return request.config.stash.setdefault(_SUMMARY_KEY, [])


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = config.stash.get(_SUMMARY_KEY, [])
    if lines:
        terminalreporter.section("real-apiserver lane summary")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def namespace(apiserver: ControlPlane) -> Iterator[str]:
    name = apiserver.create_namespace()
    yield name
    apiserver.delete_namespace(name)


@pytest.fixture(scope="session")
def prod_stack(apiserver: ControlPlane) -> AppliedStack:
    """The example prod stack: CRDs installed, static GPU nodes registered, every rendered object
    applied once (server-side apply, field manager gpu-tenancy), quotas and policies settled.

    Rejected objects do not fail the fixture: they are in `.results` for
    test_tenancy_apply.py to report; the other tests then fail on what is missing.
    """
    return apply_example_stack(apiserver, "prod")

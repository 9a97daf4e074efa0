"""`tenants simulate` on the real components: the prod example at a commit (the base) and with eval's
A100 quota cut from 20 to 8 (the change), the fixture trace replayed on a throw-away runtime plane
for each side. What is asserted comes from the report, whose figures are the Workloads' admission
times and the pods' runs on that plane: eval's own p95 wait grows by about one job's duration (its
second job now waits for the first), and no other tenant's figures move beyond the stated
tolerance, which is also the determinism check (their jobs run the same on two separate planes).
About 80 s warm: two planes of ~22 s each, 10 and 20 s of replay at speed 60.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from components.cli.main import main
from components.simulate.report import Tolerance

pytestmark = [pytest.mark.e2e, pytest.mark.runtime]

REPO = Path(__file__).resolve().parents[3]
TRACE = REPO / "tests" / "fixtures" / "simulate" / "quota-cut.yaml"
SPEED = 60
JOB_SECONDS = 600   # the fixture's eval A100 jobs


def _project(into: Path) -> Path:
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, into / part)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    for command in (["init", "-q", "-b", "main"], ["add", "."], [*identity, "commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(into), *command], check=True, capture_output=True)
    path = into / "tenants" / "eval.yaml"
    text = path.read_text()
    assert text.count("gpu: {a100: 20}") == 1
    path.write_text(text.replace("gpu: {a100: 20}", "gpu: {a100: 8}"))
    return into


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    root = _project(tmp_path_factory.mktemp("simulate"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--root", str(root), "simulate", "--stack", "prod", "--trace", str(TRACE),
                     "--base", "HEAD", "--format", "json", "--speed", str(SPEED)])
    assert code == 0
    return json.loads(out.getvalue())


def test_the_cut_tenants_p95_wait_grows_by_about_a_job(report):
    eval_ = report["tenants"]["eval"]
    tolerance = Tolerance(**report["tolerance"])
    assert eval_["base"]["admitted"] == eval_["change"]["admitted"] == 3
    grown = eval_["change"]["wait_p95"] - eval_["base"]["wait_p95"]
    assert grown > tolerance.seconds, eval_
    assert tolerance.same(grown, JOB_SECONDS), eval_
    assert [f["kind"] for f in report["findings"] if f.get("tenant") == "eval"] == ["longer-wait"]


def test_no_other_tenants_figures_move_beyond_the_tolerance(report):
    tolerance = Tolerance(**report["tolerance"])
    others = {t: s for t, s in report["tenants"].items() if t != "eval"}
    assert set(others) == {"inference", "llm-finetune"}
    for tenant, sides in others.items():
        base, change = sides["base"], sides["change"]
        assert base["admitted"] == change["admitted"] == base["submitted"], (tenant, sides)
        for figure in ("wait_p50", "wait_p95"):
            assert tolerance.same(base[figure], change[figure]), (tenant, figure, sides)
        assert tolerance.same_device_seconds(base["gpu_hours"] * 3600, change["gpu_hours"] * 3600, base["devices"]), (tenant, sides)
    assert [f for f in report["findings"] if f.get("tenant") in others] == []


def test_the_report_says_it_is_a_simulation_and_measures_every_pool(report):
    assert report["simulation"] is True and report["speed"] == SPEED
    assert set(report["pools"]) == {"a100-mig", "a100-shared", "h100-serve", "h100-train"}
    assert report["pools"]["a100-shared"]["base"] > 0 and report["pools"]["h100-train"]["change"] > 0

"""A real Prometheus answering the dashboards' PromQL over the synthetic exporter data.

The synthetic series (`synthetic.py`, 3 hours ending a few minutes from now) are backfilled into a
TSDB with `promtool tsdb create-blocks-from openmetrics`; the Prometheus server built from the same
module starts on loopback with the rules generated for the fixture stack (evaluated every 2 s),
and every query of every panel of both dashboards (the tenant dashboard once per tenant) must
return exactly the expected series and values. The server runs under `timeout` and dies with
pytest (PR_SET_PDEATHSIG), so it never outlives the test session.

The answers also feed the dashboard pictures in docs/monitoring/ (test_pictures).
"""

from __future__ import annotations

import ctypes
import json
import math
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from components.manifests import monitoring_dashboards as md
from components.manifests import monitoring_rules as r

from tests.project_edits import line_of

from . import synthetic
from .chargeback import CC1_ALPHA, CC2_BETA, GPU_HOURS_ALLOCATED, GPU_HOURS_USED, HOURS, SLICE_OF_A100

FIXTURES = Path(__file__).resolve().parent / "fixtures"   # the lab stack's files (the `lab` fixture's)

pytestmark = pytest.mark.monitoring
MIB = synthetic.MIB
SERVER_SECONDS = 300  # hard upper bound of the server's life (`timeout`)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, url: str, process: subprocess.Popen, log: Path, start: int, end: int) -> None:
        self.url, self.process, self.log = url, process, log
        self.start, self.end = start, end  # first and last minute of the synthetic data (Unix seconds)

    def get(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, **params: str) -> list[dict[str, Any]]:
        data = self.get("/api/v1/query", query=expr, **params)
        assert data["resultType"] == "vector", data
        return data["result"]


def _backfill(promtool: Path, work: Path, start: int, tsdb: str) -> None:
    (work / "data.om").write_text(synthetic.openmetrics(start))
    backfill = subprocess.run(
        [str(promtool), "tsdb", "create-blocks-from", "openmetrics", "data.om", tsdb],
        cwd=work, capture_output=True, text=True, timeout=300,
    )
    assert backfill.returncode == 0, backfill.stdout[-3000:] + backfill.stderr[-3000:]


def _serve(prometheus_binary: Path, work: Path, tsdb: str, start: int, end: int, rule_files: list[str]) -> Prometheus:
    """A Prometheus on loopback over `tsdb`, evaluating `rule_files` every 2 s, once it answers queries."""
    (work / "prometheus.yml").write_text(yaml.safe_dump({"global": {"evaluation_interval": "2s"}, "rule_files": rule_files}))
    port = _free_port()
    log = work / "prometheus.log"
    process = subprocess.Popen(
        ["timeout", str(SERVER_SECONDS), str(prometheus_binary), "--config.file=prometheus.yml", f"--storage.tsdb.path={tsdb}",
         "--storage.tsdb.retention.time=30d", "--query.lookback-delta=15m", f"--web.listen-address=127.0.0.1:{port}"],
        cwd=work, stdout=log.open("w"), stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    server = Prometheus(f"http://127.0.0.1:{port}", process, log, start, end)
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None, "prometheus exited:\n" + log.read_text()[-4000:]
        try:
            server.query("vector(1)")
            return server
        except OSError:
            pass
        assert time.monotonic() < deadline, "prometheus never answered:\n" + log.read_text()[-4000:]
        time.sleep(0.5)


def _stop(server: Prometheus) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()


@pytest.fixture(scope="session")
def prometheus(lab, promtool, prometheus_binary, tmp_path_factory) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("prometheus")
    # The data ends a minute ago: the rules run at "now" and must append after the backfilled blocks
    # (the TSDB refuses samples older than its newest block); a 15m lookback keeps the last samples
    # visible for the whole session.
    end = int(time.time()) // 60 * 60 - 60
    start = end - (synthetic.STEPS - 1) * synthetic.STEP_SECONDS
    _backfill(promtool, work, start, "tsdb")
    (work / "rules.yaml").write_text(yaml.safe_dump({"groups": r.rule_groups(lab.facts)}, sort_keys=False, width=100000))
    server = _serve(prometheus_binary, work, "tsdb", start, end, ["rules.yaml"])
    try:
        deadline = time.monotonic() + 120
        # Every rule has run once the last recording rule in the group has a result.
        while not (server.query(r.PENDING_WORKLOADS) and server.query(r.QUEUE_WAIT_P95)):
            assert time.monotonic() < deadline, "rules never produced results:\n" + server.log.read_text()[-4000:]
            time.sleep(0.5)
        time.sleep(4)  # two more evaluations: every rule has seen its inputs of the same round
        yield server
    finally:
        _stop(server)


def inlined(expr: str, rules: list[dict[str, Any]]) -> str:
    """`expr` with every recording rule it reads replaced by that rule's expression (recursively);
    static series with labels become `label_replace`d vectors, several rules of one name an `or`."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for rule in rules:
        if "record" in rule:
            by_name.setdefault(rule["record"], []).append(rule)

    def expression(rule: dict[str, Any]) -> str:
        text = inlined(rule["expr"], rules)
        for label, value in sorted(rule.get("labels", {}).items()):
            text = f'label_replace({text}, "{label}", "{value}", "", "")'
        return text

    def replace(match: re.Match) -> str:
        return "(" + " or ".join(expression(rule) for rule in by_name[match.group(0)]) + ")"

    return re.sub(r"(?<![\w:])gpu_tenancy:[a-z_]+:[a-z0-9_]+(?![\w:])", replace, expr)


@pytest.fixture(scope="session")
def chargeback_prometheus(prometheus, lab, promtool, prometheus_binary, tmp_path_factory) -> Iterator[Prometheus]:
    """A second server holding the synthetic data plus the chargeback recording rules as Prometheus'
    own rule backfill (`promtool tsdb create-blocks-from rules`, against the first server) wrote
    them for the whole three hours: a live server records rules only from its start, and GPU-hours
    integrate the past. The backfill cannot read rules of its own run (a documented limitation),
    so the two chargeback records (and the static quota and weight series the idle-quota row reads)
    are backfilled with the rules they read inlined."""
    work = tmp_path_factory.mktemp("chargeback-prometheus")
    rules = [rule for group in r.rule_groups(lab.facts) for rule in group["rules"]]
    # With the tenants' quota series and the device weights, for the idle-quota row's guaranteed GPU-hours.
    backfilled = (r.TENANT_ALLOCATED_GPUS, r.TENANT_USED_GPUS, r.TENANT_QUOTA_STACK, r.DEVICE_GPU_FRACTION)
    records = [{"record": name, "expr": inlined(name, rules)} for name in backfilled]
    (work / "chargeback.yaml").write_text(yaml.safe_dump({"groups": [{"name": "chargeback", "interval": "1m", "rules": records}]},
                                                         sort_keys=False, width=100000))
    _backfill(promtool, work, prometheus.start, "tsdb")
    backfill = subprocess.run(
        [str(promtool), "tsdb", "create-blocks-from", "rules", f"--url={prometheus.url}", f"--start={prometheus.start}",
         f"--end={prometheus.end}", "--eval-interval=1m", "--output-dir=rule-blocks", "chargeback.yaml"],
        cwd=work, capture_output=True, text=True, timeout=300,
    )
    assert backfill.returncode == 0, backfill.stdout[-3000:] + backfill.stderr[-3000:]
    for block in (work / "rule-blocks").iterdir():
        block.rename(work / "tsdb" / block.name)
    server = _serve(prometheus_binary, work, "tsdb", prometheus.start, prometheus.end, [])
    try:
        yield server
    finally:
        _stop(server)


def test_the_server_is_the_pinned_build(prometheus):
    from tools.lanes import tool_versions

    assert prometheus.get("/api/v1/status/buildinfo")["version"] == tool_versions()["PROMETHEUS_RELEASE"]


def test_rules_loaded_and_healthy(prometheus, lab):
    groups = prometheus.get("/api/v1/rules")["groups"]
    loaded = [rule for group in groups for rule in group["rules"]]
    assert len(loaded) == sum(len(g["rules"]) for g in r.rule_groups(lab.facts))
    assert [rule["name"] for rule in loaded if rule["health"] != "ok"] == []


# --- expected panel answers ----------------------------------------------------------------------

H100, MIG = {"gpu_class": "h100"}, {"gpu_class": "a100-mig"}
GPU, SLICE = {"resource": "nvidia_com_gpu"}, {"resource": "nvidia_com_mig_1g_10gb"}
ALPHA_ACTIVE = 8 * 0.9 + 8 * 0.8 + 0.01  # train-0, train-1 (GPU_UTIL fallback), notebook

Expected = list[tuple[dict[str, str], float]]

FLEET: dict[str, dict[str, Expected]] = {
    "Capacity by GPU class (stack inventory)": {"A": [(H100, 24), (MIG, 56)]},
    "Sum of tenant quotas by GPU class": {"A": [(H100, 25), (MIG, 14)]},
    "Devices requested by GPU class": {"A": [(H100, 17 + 4), (MIG, 3)]},
    "Allocatable devices by GPU class": {"A": [(H100, 16), (MIG, 56)]},  # h3 lost its GPUs at 2h10m
    "Busy devices by GPU class": {"A": [(H100, ALPHA_ACTIVE + 4 * 0.5), (MIG, 3 * 0.6)]},
    "GPUs held by tenant": {"A": [({"tenant": "alpha"}, 17), ({"tenant": "beta"}, 7)]},
    "Namespace GPU quota used by tenant": {"A": [({"tenant": "alpha"}, 19 / 20), ({"tenant": "beta"}, 4 / 5)]},
    "Busy share of held GPUs by tenant": {"A": [({"tenant": "alpha"}, ALPHA_ACTIVE / 17), ({"tenant": "beta"}, (4 * 0.5 + 3 * 0.6) / 7)]},
    "Queue wait p95 by tenant": {"A": [({"tenant": "alpha"}, 57), ({"tenant": "beta"}, 288)]},
    "Pending workloads by tenant": {"A": [({"tenant": "alpha"}, 0), ({"tenant": "beta"}, 2)]},
    "Pods holding idle GPUs now": {"A": [({"tenant": "alpha", "namespace": "alpha", "pod": "notebook", **H100}, 0.01)]},
    # Over the dashboard's range = the three hours of data (chargeback_prometheus).
    "GPU-hours by cost centre, tenant and class (time range)": {"A": GPU_HOURS_ALLOCATED, "B": GPU_HOURS_USED},
    # The same three hours: `tenants report --idle`'s figures (test_tenants_report_idle_quota_on_the_real_prometheus).
    "Guaranteed quota vs GPU-hours held and used, by tenant and class (time range)": {
        "A": [({"tenant": "alpha", **H100}, 20 * HOURS), ({"tenant": "beta", **H100}, 5 * HOURS),
              ({"tenant": "beta", **MIG}, 14 * SLICE_OF_A100 * HOURS)],
        "B": GPU_HOURS_ALLOCATED, "C": GPU_HOURS_USED,
        "D": [({**CC1_ALPHA, **H100}, 17), ({**CC2_BETA, **H100}, 4), ({**CC2_BETA, **MIG}, 5 * SLICE_OF_A100)],
    },
    # alpha held 51 of 60, beta 12 of 15 H100 GPU-hours; beta's slices 11/7 of 6: only those are idle.
    "Quota held under 50% of its GPU-hours (time range)": {"A": [({"tenant": "beta", **MIG}, (11 / 7) / 6)]},
}

TENANT: dict[str, dict[str, dict[str, Expected]]] = {
    "alpha": {
        "GPUs held by class": {"A": [(H100, 17)]},
        "Quota by class (tenant file)": {"A": [(H100, 20)]},
        "Namespace GPU quota: used and hard": {
            "A": [({"tenant": "alpha", **GPU}, 19), ({"tenant": "alpha", **SLICE}, 0)],
            "B": [({"tenant": "alpha", **GPU}, 20), ({"tenant": "alpha", **SLICE}, 0)],
        },
        "Engine activity by class": {"A": [({"tenant": "alpha", **H100}, ALPHA_ACTIVE / 17)]},
        "Framebuffer used by class": {"A": [({"tenant": "alpha", **H100}, (8 * 40960 + 8 * 20480 + 1024) * MIB)]},
        "Engine activity per pod": {"A": [
            ({"tenant": "alpha", "namespace": "alpha", "pod": "train-0", **H100}, 0.9),
            ({"tenant": "alpha", "namespace": "alpha", "pod": "train-1", **H100}, 0.8),
            ({"tenant": "alpha", "namespace": "alpha", "pod": "notebook", **H100}, 0.01),
        ]},
        "Queue wait p50 and p95": {"A": [({"tenant": "alpha"}, 10)], "B": [({"tenant": "alpha"}, 57)]},
        "Pending workloads": {"A": [({"tenant": "alpha", "status": "active"}, 0), ({"tenant": "alpha", "status": "inadmissible"}, 0)]},
    },
    "beta": {
        "GPUs held by class": {"A": [(H100, 4), (MIG, 3)]},
        "Quota by class (tenant file)": {"A": [(H100, 5), (MIG, 14)]},
        "Namespace GPU quota: used and hard": {
            "A": [({"tenant": "beta", **GPU}, 4), ({"tenant": "beta", **SLICE}, 3)],
            "B": [({"tenant": "beta", **GPU}, 5), ({"tenant": "beta", **SLICE}, 14)],
        },
        "Engine activity by class": {"A": [({"tenant": "beta", **H100}, 0.5), ({"tenant": "beta", **MIG}, 0.6)]},
        "Framebuffer used by class": {"A": [({"tenant": "beta", **H100}, 4 * 10240 * MIB), ({"tenant": "beta", **MIG}, 3 * 5120 * MIB)]},
        "Engine activity per pod": {"A": [
            ({"tenant": "beta", "namespace": "beta", "pod": "serve", **H100}, 0.5),
            ({"tenant": "beta", "namespace": "beta-data", "pod": "mig-job", **MIG}, 0.6),
        ]},
        "Queue wait p50 and p95": {"A": [({"tenant": "beta"}, 180)], "B": [({"tenant": "beta"}, 288)]},
        "Pending workloads": {"A": [({"tenant": "beta", "status": "active"}, 1), ({"tenant": "beta", "status": "inadmissible"}, 1)]},
    },
}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def answer(prometheus: Prometheus, expr: str, **params: str) -> list[tuple[dict[str, str], float]]:
    """Instant query result as (labels without __name__, value), sorted."""
    rows = []
    for sample in prometheus.query(expr, **params):
        labels = {k: v for k, v in sample["metric"].items() if k != "__name__"}
        rows.append((labels, float(sample["value"][1])))
    return sorted(rows, key=lambda row: sorted(row[0].items()))


def _matches(got: list[tuple[dict[str, str], float]], want: Expected) -> bool:
    want = sorted(want, key=lambda row: sorted(row[0].items()))
    return len(got) == len(want) and all(
        g[0] == w[0] and math.isclose(g[1], w[1], rel_tol=1e-9, abs_tol=1e-9) for g, w in zip(got, want)
    )


def fleet_answer(prometheus: Prometheus, chargeback: Prometheus, expr: str) -> list[tuple[dict[str, str], float]]:
    """A fleet panel's answer now; a query over the dashboard's range, with the range being the
    three hours of data, from the server holding the chargeback rules' past."""
    if md.CHARGEBACK_RANGE not in expr:
        return answer(prometheus, expr)
    seconds = chargeback.end - chargeback.start
    expr = expr.replace(md.RANGE_SECONDS, str(seconds)).replace(md.CHARGEBACK_RANGE, f"{seconds}s")
    return answer(chargeback, expr, time=str(chargeback.end))


def dashboard_answers(prometheus: Prometheus, chargeback: Prometheus, lab) -> dict[str, Any]:
    """Every panel query's answer: {"fleet": {title: {refId: rows}}, "tenant": {tenant: {title: {refId: rows}}}}."""
    boards = md.dashboards(lab.facts)
    result: dict[str, Any] = {"fleet": {}, "tenant": {}}
    for panel in panels(boards[md.FLEET]):
        result["fleet"][panel["title"]] = {t["refId"]: fleet_answer(prometheus, chargeback, t["expr"]) for t in panel["targets"]}
    for tenant in sorted(TENANT):
        result["tenant"][tenant] = {
            panel["title"]: {t["refId"]: answer(prometheus, t["expr"].replace("$tenant", tenant)) for t in panel["targets"]}
            for panel in panels(boards[md.TENANT])
        }
    return result


@pytest.fixture(scope="session")
def answers(prometheus, chargeback_prometheus, lab) -> dict[str, Any]:
    return dashboard_answers(prometheus, chargeback_prometheus, lab)


def test_every_panel_has_an_expectation(lab):
    boards = md.dashboards(lab.facts)
    assert {p["title"] for p in panels(boards[md.FLEET])} == set(FLEET)
    for tenant, expected in TENANT.items():
        assert {p["title"] for p in panels(boards[md.TENANT])} == set(expected), tenant
    assert set(TENANT) == {t.name for t in lab.tenants}


def test_fleet_dashboard_answers(answers):
    wrong = {
        (title, ref): (got, FLEET[title][ref])
        for title, refs in answers["fleet"].items() for ref, got in refs.items() if not _matches(got, FLEET[title][ref])
    }
    assert wrong == {}


@pytest.mark.parametrize("tenant", sorted(TENANT))
def test_tenant_dashboard_answers_per_tenant(answers, tenant):
    got_panels = answers["tenant"][tenant]
    wrong = {
        (title, ref): (got, TENANT[tenant][title][ref])
        for title, refs in got_panels.items() for ref, got in refs.items() if not _matches(got, TENANT[tenant][title][ref])
    }
    assert wrong == {}


IDLE_TABLE = "Guaranteed quota vs GPU-hours held and used, by tenant and class (time range)"


def test_the_idle_quota_row_and_the_report_agree_on_the_quota(answers, lab):
    """The row reads the quota from Prometheus (the tenants' quota series, as deployed), `tenants report
    --idle` from the tenant files (`guaranteed_quota`): the same GPU-equivalents per tenant and class."""
    from components.review.chargeback import guaranteed_quota

    got = {(labels["tenant"], labels["gpu_class"]): value / HOURS for labels, value in answers["fleet"][IDLE_TABLE]["A"]}
    assert got == pytest.approx({key: float(gpus) for key, (gpus, _, _) in guaranteed_quota(lab).items()})


def test_tenant_variable_lists_the_tenants(prometheus, lab):
    variable = next(v for v in md.dashboards(lab.facts)[md.TENANT]["templating"]["list"] if v["name"] == md.TENANT_VARIABLE)
    metric = variable["query"].removeprefix("label_values(").split(",")[0]
    values = prometheus.get("/api/v1/label/tenant/values", **{"match[]": metric})
    assert values == ["alpha", "beta"]


@pytest.mark.parametrize("output", ["csv", "text"])
def test_tenants_report_on_the_real_prometheus(chargeback_prometheus, tmp_path, capsys, output):
    """`tenants report` for the three hours of data prints the GPU-hours worked out by hand."""
    import csv
    from datetime import datetime, timezone

    from components.cli.main import main

    start, end = (datetime.fromtimestamp(t, timezone.utc).isoformat() for t in (chargeback_prometheus.start, chargeback_prometheus.end))
    out = tmp_path / f"report.{output}"
    code = main(["report", "--prometheus", chargeback_prometheus.url, "--from", start, "--to", end, "--format", output, "--out", str(out)])
    assert (code, capsys.readouterr().err) == (0, "")
    expected = {
        (labels["cost_center"], labels["tenant"], labels["gpu_class"]): (allocated, used)
        for (labels, allocated), (_, used) in zip(GPU_HOURS_ALLOCATED, GPU_HOURS_USED)
    }
    if output == "csv":
        rows = list(csv.DictReader(out.read_text().splitlines()))
        got = {(row["cost_center"], row["tenant"], row["gpu_class"]): (float(row["allocated_gpu_hours"]), float(row["used_gpu_hours"]))
               for row in rows}
        assert got == {key: (round(a, 3), round(u, 3)) for key, (a, u) in expected.items()}
    else:
        lines = out.read_text().splitlines()
        assert lines[0] == f"GPU-hours from {start} to {end}"
        for (cost_center, tenant, gpu_class), (allocated, used) in expected.items():
            assert f"{allocated:.3f}" in next(line for line in lines if line.split()[:3] == [cost_center, tenant, gpu_class])
        assert lines[-1].split()[1:3] == [f"{sum(a for a, _ in expected.values()):.3f}", f"{sum(u for _, u in expected.values()):.3f}"]


def test_active_alerts_at_the_end_of_the_data(prometheus):
    """At ~2h50m every scenario is active (pending: the server started seconds ago, `for:` restarts with it)."""
    firing = {(a["labels"]["alertname"], a["labels"].get("tenant", a["labels"].get("node", a["labels"].get("gpu_class"))))
              for a in prometheus.get("/api/v1/alerts")["alerts"] if a["state"] in ("firing", "pending")}
    assert firing == {
        ("GpuTenantNearQuota", "alpha"), ("GpuTenantPodPendingTooLong", "alpha"), ("GpuTenantWorkloadsPendingTooLong", "beta"),
        ("GpuMigReconfigurationFailed", "m1"), ("GpuAllocatedIdle", "alpha"), ("GpuQuotaOverCapacity", "h100"),
    }


# --- the pictures in docs/monitoring/ ------------------------------------------------------------

PICTURES = {"fleet": "fleet-overview.png", "alpha": "tenant-alpha.png", "beta": "tenant-beta.png"}


def test_pictures_show_what_the_dashboards_answer(answers, lab):
    """docs/monitoring/*.png are drawn from these answers; GPU_TENANCY_WRITE_PICTURES=1 redraws them."""
    import os

    from . import pictures

    text = pictures.data_text(answers)
    data_digest = pictures.digest(text)
    data_path = pictures.DOCS / pictures.DATA_FILE
    if os.environ.get("GPU_TENANCY_WRITE_PICTURES") == "1":
        boards = md.dashboards(lab.facts)
        data_path.parent.mkdir(parents=True, exist_ok=True)
        data_path.write_text(text)
        pictures.render(boards[md.FLEET], answers["fleet"], boards[md.FLEET]["title"] + " - synthetic test data",
                        pictures.DOCS / PICTURES["fleet"], data_digest)
        for tenant in ("alpha", "beta"):
            pictures.render(boards[md.TENANT], answers["tenant"][tenant], boards[md.TENANT]["title"] + f" - tenant {tenant}",
                            pictures.DOCS / PICTURES[tenant], data_digest)
    hint = "regenerate with `make monitoring-pictures`"
    assert data_path.exists() and data_path.read_text() == text, f"{data_path} differs from what Prometheus answers; {hint}"
    for name in PICTURES.values():
        path = pictures.DOCS / name
        assert path.exists(), f"{path} missing; {hint}"
        assert pictures.png_description(path) == f"data sha256 {data_digest}", f"{path} was drawn from other data; {hint}"


def test_tenants_report_idle_quota_on_the_real_prometheus(chargeback_prometheus, capsys):
    """`tenants report --idle` for the three hours: beta holds 11/7 of the 6 GPU-hours its 14 x 1g.10gb
    quota guarantees (26%), at most 5 slices at once (mig-job's 3 and the burst's 2); alpha's 17 of 20
    H100s and beta's 4 of 5 are busy enough. The peak is Prometheus' max_over_time subquery."""
    from datetime import datetime, timezone

    from components.cli.main import main

    start, end = (datetime.fromtimestamp(t, timezone.utc).isoformat() for t in (chargeback_prometheus.start, chargeback_prometheus.end))
    code = main(["--root", str(FIXTURES), "report", "--prometheus", chargeback_prometheus.url, "--from", start, "--to", end,
                 "--idle", "--stack", "lab", "--format", "csv"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    header, *rows = [line.split(",") for line in out.splitlines()]
    assert [row[:2] for row in rows] == [["beta", "a100-mig"]]
    row = dict(zip(header, rows[0]))
    assert (row["quota_gpus"], row["quota_gpu_hours"], row["held_gpu_hours"]) == ("2", "6.000", f"{11 / 7:.3f}")
    assert (row["peak_held_gpus"], row["lower_to"]) == (f"{5 / 7:.2f}".rstrip("0"), "5")
    assert row["quota_line"] == f"tenants/beta.yaml:{line_of(FIXTURES / 'tenants' / 'beta.yaml', 'mig: {1g.10gb', after='quota:')}"

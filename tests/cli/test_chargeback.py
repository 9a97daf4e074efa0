"""`tenants report` end to end against a stand-in HTTP endpoint serving canned Prometheus answers.

The real Prometheus answers the same command in the monitoring lane (tests/monitoring); here the
command's HTTP side is checked: what it asks, at which time, and how it reports refusals.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from pathlib import Path
from typing import Iterator

import pytest

from .running import run

CANNED = Path(__file__).resolve().parents[1] / "review" / "chargeback"
IDLE = Path(__file__).resolve().parents[1] / "review" / "idle_quota"


class Endpoint:
    """`/api/v1/query` answering canned vectors by the series a query integrates; records each query."""

    def __init__(self, refuse: bool = False, canned: Path = CANNED) -> None:
        self.queries: list[dict[str, str]] = []
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                url = urllib.parse.urlparse(self.path)
                params = dict(urllib.parse.parse_qsl(url.query))
                endpoint.queries.append({"path": url.path, **params})
                if refuse:
                    self._send(400, {"status": "error", "errorType": "bad_data", "error": "invalid parameter \"query\""})
                    return
                query = params["query"]
                name = "peak" if "max_over_time" in query else "used" if "tenant_gpu_used" in query else "allocated"
                self._send(200, json.loads((canned / f"{name}.json").read_text()))

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    yield server
    server.close()


@pytest.fixture
def refusing() -> Iterator[Endpoint]:
    server = Endpoint(refuse=True)
    yield server
    server.close()


def test_report_asks_for_the_period_at_its_end_and_prints_the_table(capsys, endpoint):
    code, out, err = run(capsys, "report", "--prometheus", endpoint.url + "/", "--from", "2026-11-01", "--to", "2026-12-01")
    assert (code, err) == (0, "")
    assert [q["path"] for q in endpoint.queries] == ["/api/v1/query", "/api/v1/query"]
    assert {q["time"] for q in endpoint.queries} == {"1796083200.000"}  # 2026-12-01T00:00:00Z
    assert all("[2592000s:1m]" in q["query"] for q in endpoint.queries)  # 30 days
    assert out.splitlines()[0] == "GPU-hours from 2026-11-01T00:00:00+00:00 to 2026-12-01T00:00:00+00:00"
    assert any(line.split()[:5] == ["cc-1", "alpha", "h100", "51.000", "40.830"] for line in out.splitlines())


def test_report_writes_csv(capsys, endpoint, tmp_path):
    out_file = tmp_path / "gpu-hours.csv"
    code, out, err = run(capsys, "report", "--prometheus", endpoint.url, "--from", "2026-11-30T21:00:00Z", "--to", "2026-12-01",
                         "--format", "csv", "--out", str(out_file))
    assert (code, out, err) == (0, "", "")
    assert all("[10800s:1m]" in q["query"] for q in endpoint.queries)
    assert out_file.read_text().splitlines()[:2] == ["cost_center,tenant,gpu_class,allocated_gpu_hours,used_gpu_hours",
                                                     "cc-1,alpha,h100,51.000,40.830"]


def test_a_refused_query_is_reported_with_prometheus_reason(capsys, refusing):
    code, out, err = run(capsys, "report", "--prometheus", refusing.url, "--from", "2026-11-01", "--to", "2026-12-01")
    assert (code, out) == (1, "")
    assert err == f"tenants report: Prometheus at {refusing.url} refused the query: bad_data: invalid parameter \"query\"\n"


def test_an_unreachable_prometheus_is_one_clear_line(capsys, endpoint):
    endpoint.close()
    code, out, err = run(capsys, "report", "--prometheus", endpoint.url, "--from", "2026-11-01", "--to", "2026-12-01")
    assert (code, out) == (1, "")
    assert err.startswith(f"tenants report: cannot query Prometheus at {endpoint.url}: ") and err.count("\n") == 1


def test_a_period_that_ends_before_it_starts_is_a_usage_error(capsys, endpoint):
    code, out, err = run(capsys, "report", "--prometheus", endpoint.url, "--from", "2026-12-01", "--to", "2026-11-01")
    assert (code, out, endpoint.queries) == (2, "", [])
    assert "--to must be after --from" in err


def test_a_date_that_is_not_one_is_a_usage_error(capsys, endpoint):
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "report", "--prometheus", endpoint.url, "--from", "last month", "--to", "2026-12-01")
    assert exit_.value.code == 2
    assert "'last month' is not a date" in capsys.readouterr().err


def test_report_step_asks_for_a_finer_integral(capsys, endpoint):
    code, out, err = run(capsys, "report", "--prometheus", endpoint.url, "--from", "2026-11-30T23:58:30Z", "--to", "2026-12-01",
                         "--step", "1", "--format", "csv")
    assert (code, err) == (0, "")
    assert all(q["query"].endswith("[90s:1s])) / 3600") for q in endpoint.queries)


def test_a_step_that_does_not_divide_an_hour_is_a_usage_error(capsys, endpoint):
    code, out, err = run(capsys, "report", "--prometheus", endpoint.url, "--from", "2026-11-01", "--to", "2026-12-01", "--step", "7")
    assert (code, out, endpoint.queries) == (2, "", [])
    assert "does not divide an hour" in err


@pytest.fixture
def idle_endpoint() -> Iterator[Endpoint]:
    server = Endpoint(canned=IDLE)
    yield server
    server.close()


def test_idle_guaranteed_quota_names_the_quota_line_to_lower_and_the_value(capsys, idle_endpoint):
    code, out, err = run(capsys, "report", "--prometheus", idle_endpoint.url, "--from", "2026-11-01", "--to", "2026-12-01",
                         "--idle", "--stack", "prod")
    assert (code, err) == (0, ""), err
    assert len(idle_endpoint.queries) == 3 and any("max_over_time" in q["query"] for q in idle_endpoint.queries)
    lines = out.splitlines()
    assert lines[0].startswith("Idle guaranteed quota from 2026-11-01") and "held below 50%" in lines[0]
    # The most idle first: llm-finetune held 7,200 of 40 x 720 = 28,800 guaranteed H100-hours, at most 16 at once.
    assert lines[2].split()[:8] == ["llm-finetune", "h100", "40", "28800.000", "7200.000", "3100.500", "25%", "16"]
    assert lines[2].endswith("tenants/llm-finetune.yaml:31: lower to 16 (the most it held at once)")
    mig = next(line for line in lines if line.startswith("eval ") and "a100-mig" in line)
    assert "tenants/eval.yaml:36: lower its MIG quotas to hold at most 3.43 GPUs' worth" in mig
    # Busy quotas are not listed: eval's A100s (83%) and inference's H100s (87%).
    assert not any(line.split()[:2] in (["eval", "a100"], ["inference", "h100"]) for line in lines)


def test_idle_csv_and_threshold(capsys, idle_endpoint):
    code, out, _ = run(capsys, "report", "--prometheus", idle_endpoint.url, "--from", "2026-11-01", "--to", "2026-12-01",
                       "--idle", "--stack", "prod", "--idle-below", "0.9", "--format", "csv")
    assert code == 0
    rows = out.splitlines()
    assert rows[0] == "tenant,gpu_class,quota_gpus,quota_gpu_hours,held_gpu_hours,used_gpu_hours,peak_held_gpus,quota_line,lower_to"
    # Most idle GPU-hours first: 21,600, 8,874, 2,400 (eval's A100s), 2,280 (inference's H100s).
    assert [row.split(",")[:2] for row in rows[1:]] == [["llm-finetune", "h100"], ["eval", "a100-mig"], ["eval", "a100"],
                                                          ["inference", "h100"]]
    assert rows[1].split(",")[-2:] == ["tenants/llm-finetune.yaml:31", "16"]


def test_idle_needs_a_stack(capsys, idle_endpoint):
    code, out, err = run(capsys, "report", "--prometheus", idle_endpoint.url, "--from", "2026-11-01", "--to", "2026-12-01", "--idle")
    assert (code, out, idle_endpoint.queries) == (2, "", [])
    assert "give --stack ENV" in err

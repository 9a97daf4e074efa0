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


class Endpoint:
    """`/api/v1/query` answering canned vectors by the series a query integrates; records each query."""

    def __init__(self, refuse: bool = False) -> None:
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
                name = "used" if "tenant_gpu_used" in params["query"] else "allocated"
                self._send(200, json.loads((CANNED / f"{name}.json").read_text()))

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

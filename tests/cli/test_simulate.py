"""`tenants simulate` as a command: what it refuses before any plane starts, and that it replays the
exported base and the working tree and prints the comparison (the replay itself replaced here by
recorded outcomes; tests/e2e/runtime/test_runtime_simulate.py runs it on the real components)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from components.cli.main import main
from components.simulate.outcome import JobOutcome, Outcome
from tools import simulation

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "tests" / "fixtures" / "simulate" / "quota-cut.yaml"


@pytest.fixture
def project(tmp_path) -> Path:
    for part in ("tenants", "stacks"):
        shutil.copytree(REPO / part, tmp_path / part)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    for command in (["init", "-q", "-b", "main"], ["add", "."], [*identity, "commit", "-q", "-m", "base"]):
        subprocess.run(["git", "-C", str(tmp_path), *command], check=True, capture_output=True)
    return tmp_path


def test_an_invalid_trace_fails_with_located_errors_before_anything_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(simulation, "replay", lambda *a, **k: pytest.fail("a plane was started"))
    bad = tmp_path / "jobs.csv"
    bad.write_text("tenant,submit,gpu,count,duration\nevl,0,a100,1,60\n")
    assert main(["--root", str(REPO), "simulate", "--stack", "prod", "--trace", str(bad)]) == 1
    assert "jobs.csv:2:1: tenant: no tenant 'evl' in stack prod; did you mean 'eval'?" in capsys.readouterr().err


def test_without_the_runtime_lanes_binaries_it_says_what_to_build(capsys, monkeypatch):
    monkeypatch.setattr(simulation, "unavailable_reason", lambda scheduler: "tenants simulate: kwok not built; run tools/build.sh kwok")
    assert main(["--root", str(REPO), "simulate", "--stack", "prod", "--synthetic", "3"]) == 2
    assert "kwok not built" in capsys.readouterr().err


def test_it_replays_the_base_and_the_working_tree_and_compares_them(project, capsys, monkeypatch):
    eval_yaml = project / "tenants" / "eval.yaml"
    eval_yaml.write_text(eval_yaml.read_text().replace("gpu: {a100: 20}", "gpu: {a100: 8}"))
    seen = []

    def replay(stack, side, trace, speed, say=None):
        seen.append((side.label, "gpu: {a100: 20}" in (side.root / "tenants" / "eval.yaml").read_text(), len(trace.jobs), speed))
        wait = 600 if side.label == "change" else 10
        return Outcome((JobOutcome("eval", "a", 0, 0), JobOutcome("eval", "b", 0, wait)), pool_devices={"a100-shared": 16},
                       pool_used={"a100-shared": 16 * 600.0}, span=1200)

    monkeypatch.setattr(simulation, "unavailable_reason", lambda scheduler: "")
    monkeypatch.setattr(simulation, "replay", replay)
    code = main(["--root", str(project), "simulate", "--stack", "prod", "--trace", str(TRACE), "--base", "HEAD",
                 "--format", "json", "--speed", "30"])
    assert code == 0
    assert seen == [("base", True, 5, 30.0), ("change", False, 5, 30.0)]   # the base has the old quota
    document = json.loads(capsys.readouterr().out)
    assert document["simulation"] is True and document["base"] == "HEAD" and document["jobs"] == 5
    assert document["scheduler"] == "kueue"
    assert document["tolerance"]["seconds"] == simulation.WALL_LATENCY_SECONDS * 30
    assert [f["kind"] for f in document["findings"]] == ["longer-wait"]


def test_speed_must_be_positive(capsys):
    assert main(["--root", str(REPO), "simulate", "--stack", "prod", "--synthetic", "3", "--speed", "0"]) == 2
    assert "--speed must be > 0" in capsys.readouterr().err


# --- --from-prometheus ---------------------------------------------------------------------------------


@pytest.fixture
def fake_prometheus():
    """A Prometheus answering each instant query with the fixture series of its metric (tests/simulate/test_period.py)."""
    import threading
    import urllib.parse
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.simulate.test_period import RAN, SINCE, _series

    series, asked = _series(*RAN), []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            asked.append((self.path.split("?")[0], query["query"][0], float(query["time"][0])))
            metric = query["query"][0].removeprefix("last_over_time(").split("{")[0].split("[")[0]
            result = [{"metric": labels, "value": [0, str(value)]} for labels, value in series.get(metric, [])]
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", SINCE, asked
    server.shutdown()
    server.server_close()


def test_from_prometheus_replays_the_period_and_saves_its_trace(fake_prometheus, project, tmp_path, capsys, monkeypatch):
    from datetime import datetime, timezone

    url, since, asked = fake_prometheus
    replayed = []
    monkeypatch.setattr(simulation, "unavailable_reason", lambda scheduler: "")
    monkeypatch.setattr(simulation, "replay", lambda stack, side, trace, speed, say=None: replayed.append(trace) or Outcome(()))
    start = datetime.fromtimestamp(since, timezone.utc)
    saved = tmp_path / "period.yaml"
    code = main(["--root", str(project), "simulate", "--stack", "prod", "--from-prometheus", url, "--base", "HEAD",
                 "--since", start.isoformat(), "--until", start.replace(hour=start.hour + 2).isoformat(),
                 "--save-trace", str(saved), "--format", "json"])
    assert code == 0
    assert [(j.tenant, j.gpu, j.submit) for j in replayed[0].jobs] == [("llm-finetune", "h100", 10), ("eval", "a100", 120),
                                                                      ("eval", "1g.10gb", 300)]
    assert replayed[0] == replayed[1]   # both sides replay the same period
    assert {path for path, _, _ in asked} == {"/api/v1/query"} and {at for _, _, at in asked} == {since + 7200}
    from components import load_environment
    from components.simulate.trace import read_trace
    assert read_trace(saved, load_environment(project, "prod")) == replayed[0]
    captured = capsys.readouterr()
    assert "3 Job(s) read from " + url in captured.err
    assert json.loads(captured.out)["trace"].startswith(f"{url} from {start.isoformat()}")


@pytest.mark.parametrize(("args", "says"), [
    (["--from-prometheus", "http://127.0.0.1:9"], "--from-prometheus needs the period: --since T --until T"),
    (["--synthetic", "3", "--until", "2026-01-01"], "--since and --until go with --from-prometheus"),
    (["--from-prometheus", "http://127.0.0.1:9", "--since", "2026-01-02", "--until", "2026-01-01"], "must be after --since"),
    (["--from-prometheus", "http://127.0.0.1:9", "--since", "2026-01-01", "--until", "2026-01-02"],
     "cannot query Prometheus at http://127.0.0.1:9"),
])
def test_from_prometheus_refuses_a_bad_period_or_an_unreachable_prometheus(args, says, capsys, monkeypatch):
    monkeypatch.setattr(simulation, "replay", lambda *a, **k: pytest.fail("a plane was started"))
    assert main(["--root", str(REPO), "simulate", "--stack", "prod", *args]) == 2
    assert says in capsys.readouterr().err

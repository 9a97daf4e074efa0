"""The runtime lane's exporters and the Prometheus that scrapes them (the shell of tools/runtime_metrics.py).

`MetricsExporter` lists the cluster's namespaces, nodes, pods, Jobs, ResourceQuotas, ResourceClaims,
ResourceSlices and (on a Kueue stack) ClusterQueues, LocalQueues and Workloads every
`REFRESH_SECONDS`, turns them into the series
kube-state-metrics, Kueue and the DCGM exporter would publish (`runtime_metrics`), and serves the
last exposition on 127.0.0.1 `/metrics`: a scrape never waits for the API server, so a slow list
delays a change by at most one refresh and never fails a scrape (a failed scrape would mark every
series stale, a gap in the GPU-hours).

`prometheus` starts the monitoring lane's Prometheus (built by `tools/build.sh monitoring`, found as
tests/monitoring finds it) on loopback, scraping the exporter and evaluating the stack's rendered
PrometheusRule groups every `INTERVAL_SECONDS`; it runs under `timeout` and dies with its parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

from tools import runtime_metrics as m
from tools.control_plane import REPO_ROOT, ControlPlane, free_port
from tools.lanes import tool_versions

REFRESH_SECONDS = 0.5
INTERVAL_SECONDS = 1      # scrape and rule evaluation
SERVER_SECONDS = 600      # hard upper bound of Prometheus' life (`timeout`)
KUEUE = ("kueue.x-k8s.io", "v1beta2")
DRA = ("resource.k8s.io", "v1")


def prometheus_bin_dir() -> Path:
    """Where the monitoring lane's binaries are (GPU_TENANCY_PROM_BIN_DIR, else the cache), as tests/monitoring reads it."""
    override = os.environ.get("GPU_TENANCY_PROM_BIN_DIR")
    if override:
        return Path(override)
    cache = Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")
    return cache / "prometheus" / tool_versions()["PROMETHEUS_VERSION"]


def prometheus_unavailable_reason() -> str:
    """Why the chargeback test cannot start Prometheus ("" if it can)."""
    binary = prometheus_bin_dir() / "prometheus"
    if os.access(binary, os.X_OK):
        return ""
    return f"chargeback from the run: {binary} not built; run `tools/build.sh monitoring` (or `make e2e-monitoring`)"


class MetricsExporter:
    """The cluster's series, refreshed in a thread and served on 127.0.0.1 (`url`)."""

    def __init__(self, cp: ControlPlane, kueue: bool, dcgm_label_prefix: str = "") -> None:
        from kubernetes import client as k8s_client

        api = cp.client_for("e2e-metrics", ["system:masters"])   # its own connection pool
        self.core, self.custom, self.batch = k8s_client.CoreV1Api(api), k8s_client.CustomObjectsApi(api), k8s_client.BatchV1Api(api)
        self.kueue, self.prefix = kueue, dcgm_label_prefix
        self.text = "# no data yet\n"
        self.waits: dict[str, tuple[str, float]] = {}   # Workload uid -> (ClusterQueue, seconds), kept once seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-exporter", daemon=True)
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                body = exporter.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"

    def _items(self, listing: Any) -> list[dict[str, Any]]:
        return json.loads(listing.data)["items"]

    def _custom(self, plural: str) -> list[dict[str, Any]]:
        return self.custom.list_cluster_custom_object(*KUEUE, plural)["items"]

    def _resource(self, plural: str) -> list[dict[str, Any]]:
        """DRA objects (resource.k8s.io/v1) of every namespace, as kube-state-metrics' collectors list them."""
        return self.custom.list_cluster_custom_object(*DRA, plural)["items"]

    def collect(self) -> str:
        """The exposition of the cluster as it is now."""
        pods = self._items(self.core.list_pod_for_all_namespaces(_preload_content=False))
        samples = [*m.namespace_series(self._items(self.core.list_namespace(_preload_content=False))),
                   *m.node_series(self._items(self.core.list_node(_preload_content=False))),
                   *m.pod_series(pods), *m.pod_owner_series(pods),
                   *m.job_series(self._items(self.batch.list_job_for_all_namespaces(_preload_content=False))),
                   *m.quota_series(self._items(self.core.list_resource_quota_for_all_namespaces(_preload_content=False))),
                   *m.dcgm_series(pods, self.prefix),
                   *m.claim_series(self._resource("resourceclaims")), *m.slice_series(self._resource("resourceslices"))]
        if self.kueue:
            workloads = self._custom("workloads")
            for workload in workloads:
                wait = m.admission_wait(workload)
                if wait is not None and workload["metadata"]["uid"] not in self.waits:
                    self.waits[workload["metadata"]["uid"]] = (workload["status"]["admission"]["clusterQueue"], wait)
            queue_of = {(q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"] for q in self._custom("localqueues")}
            samples += m.kueue_series([q["metadata"]["name"] for q in self._custom("clusterqueues")], workloads, queue_of,
                                      self.waits.values())
        return m.exposition(samples)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.text = self.collect()
            except Exception as exc:   # keep serving the last exposition; say why it is old
                sys.stderr.write(f"[metrics-exporter] list failed, serving the previous exposition: {exc}\n")
            self._stop.wait(REFRESH_SECONDS)

    def __enter__(self) -> "MetricsExporter":
        self.text = self.collect()
        threading.Thread(target=self.server.serve_forever, name="metrics-http", daemon=True).start()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.server.shutdown()
        self.server.server_close()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Prometheus:
    """A running Prometheus: its base `url` and an instant `query`."""

    def __init__(self, url: str, process: subprocess.Popen, log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=30) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as response:
            return json.load(response)["data"]


@contextlib.contextmanager
def prometheus(workdir: Path, target: str, rule_groups: list[dict[str, Any]], timeout: float = 60.0) -> Iterator[Prometheus]:
    """Prometheus scraping `target` (host:port/path) and evaluating `rule_groups`, every INTERVAL_SECONDS."""
    import yaml

    workdir.mkdir(parents=True, exist_ok=True)
    parsed = urllib.parse.urlsplit(target)
    interval = f"{INTERVAL_SECONDS}s"
    port = free_port()
    (workdir / "rules.yaml").write_text(yaml.safe_dump({"groups": rule_groups}, sort_keys=False, width=100000))
    (workdir / "prometheus.yml").write_text(yaml.safe_dump({
        "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
        "rule_files": ["rules.yaml"],
        # honor_labels: the exporters' namespace/pod labels are the workloads', as the stacks' ServiceMonitors keep them.
        "scrape_configs": [{"job_name": "runtime-exporters", "honor_labels": True, "metrics_path": parsed.path,
                            "static_configs": [{"targets": [parsed.netloc]}]},
                           # itself: its missed rule evaluations say whether the figures lag
                           {"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }))
    log = workdir / "prometheus.log"
    process = subprocess.Popen(
        ["timeout", str(SERVER_SECONDS), str(prometheus_bin_dir() / "prometheus"), "--config.file=prometheus.yml",
         "--storage.tsdb.path=tsdb", f"--web.listen-address=127.0.0.1:{port}"],
        cwd=workdir, stdout=log.open("w"), stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    server = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert process.poll() is None, "prometheus exited:\n" + log.read_text()[-4000:]
            with contextlib.suppress(OSError):
                if server.query('up{job="runtime-exporters"} == 1'):
                    break
            assert time.monotonic() < deadline, "prometheus never scraped the exporter:\n" + log.read_text()[-4000:]
            time.sleep(0.25)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()

"""`tenants report`: GPU-hours per cost centre, tenant and GPU class over a period, asked of Prometheus.

Reads the chargeback recording rules (docs/monitoring.md#chargeback) through Prometheus' HTTP API
(`/api/v1/query`, standard library only); the rows and their layout are
`components/review/chargeback.py`.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..review.chargeback import FORMATTERS, chargeback_rows, period_queries
from .common import EXIT_INVALID, EXIT_OK, EXIT_USAGE

TIMEOUT_SECONDS = 120  # a month of 1-minute steps takes Prometheus a while on a large fleet


class PrometheusError(Exception):
    """Prometheus could not be reached or refused a query (the message says which and why)."""


def moment(text: str) -> datetime:
    """A `--from`/`--to` value: a date (midnight UTC) or an ISO 8601 time (UTC unless it names an offset).

    >>> moment("2026-11-01").isoformat()
    '2026-11-01T00:00:00+00:00'
    >>> moment("2026-11-01T12:30:00+01:00").isoformat()
    '2026-11-01T12:30:00+01:00'
    """
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date (2026-11-01) or an ISO 8601 time (2026-11-01T08:00:00Z)") from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "report",
        help="GPU-hours allocated and used per cost centre, tenant and GPU class over a period (from Prometheus)",
        description="GPU-hours per cost centre, tenant and GPU class from FROM to TO, as the gpu-tenancy recording rules "
        "recorded them in Prometheus: allocated (devices held by scheduled pods) and used (DCGM engine activity); "
        "MIG instances and time-slice shares count as what they are of a GPU (docs/monitoring.md#chargeback).",
    )
    parser.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL, e.g. http://prometheus.monitoring:9090")
    parser.add_argument("--from", dest="start", required=True, type=moment, metavar="FROM", help="start: a date (UTC midnight) or ISO 8601 time")
    parser.add_argument("--to", dest="end", required=True, type=moment, metavar="TO", help="end: a date or ISO 8601 time; the report covers the minutes after FROM up to TO")
    parser.add_argument("--format", choices=sorted(FORMATTERS), default="text", help="output format (default: text)")
    parser.add_argument("--out", type=Path, metavar="FILE", help="write to FILE instead of stdout")


def instant_query(base_url: str, expr: str, at: datetime) -> list[dict[str, Any]]:
    """The vector Prometheus answers for `expr` at `at` (`/api/v1/query`).

    >>> instant_query("http://127.0.0.1:9", "up", datetime.now(timezone.utc))  # doctest: +SKIP
    [{'metric': {...}, 'value': [...]}]
    """
    query = urllib.parse.urlencode({"query": expr, "time": f"{at.timestamp():.3f}"})
    url = f"{base_url.rstrip('/')}/api/v1/query?{query}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as response:
            body = json.load(response)
    except urllib.error.HTTPError as err:  # Prometheus explains a refused query in its JSON body
        try:
            body = json.load(err)
        except ValueError:
            raise PrometheusError(f"{base_url} answered HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise PrometheusError(f"cannot query Prometheus at {base_url}: {getattr(err, 'reason', err)}") from None
    if body.get("status") != "success":
        raise PrometheusError(f"Prometheus at {base_url} refused the query: {body.get('errorType', '')}: {body.get('error', body)}")
    data = body["data"]
    if data.get("resultType") != "vector":
        raise PrometheusError(f"Prometheus at {base_url} answered a {data.get('resultType')}, not a vector")
    return data["result"]


def run(args: argparse.Namespace) -> int:
    try:
        queries = period_queries(args.start, args.end)
    except ValueError as err:
        print(f"tenants report: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        answers = {name: instant_query(args.prometheus, expr, args.end) for name, expr in queries.items()}
    except PrometheusError as err:
        print(f"tenants report: {err}", file=sys.stderr)
        return EXIT_INVALID
    text = FORMATTERS[args.format](chargeback_rows(answers), args.start, args.end)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return EXIT_OK

"""The read-only reports of `tenants`: `capacity` (GPU capacity of a stack against its tenants'
quotas, from the files) and `report` (GPU-hours per cost centre, tenant and class over a period,
asked of Prometheus).

Each command is a class with `add_parser` and `run`, as `main.COMMANDS` expects of a command. The
report reads the chargeback recording rules (docs/monitoring.md#chargeback) through Prometheus'
HTTP API (`/api/v1/query`, standard library only); its rows and their layout are
`components/review/chargeback.py`, the capacity table `components/review/capacity_report.py`.
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

from ..load import load_environment
from ..review import capacity_report
from ..review import chargeback
from .common import EXIT_INVALID, EXIT_OK, EXIT_USAGE, report

TIMEOUT_SECONDS = 120  # a month of 1-minute steps takes Prometheus a while on a large fleet


class Capacity:
    """`tenants capacity`: GPU capacity per class and MIG profile against tenant quotas."""

    @staticmethod
    def add_parser(sub) -> None:
        """The `tenants capacity` subcommand.

        >>> sub = argparse.ArgumentParser().add_subparsers()
        >>> Capacity.add_parser(sub)
        >>> sub.choices["capacity"].parse_args(["--stack", "prod"])
        Namespace(stack='prod', format='text')
        """
        parser = sub.add_parser(
            "capacity",
            help="GPU capacity per class and MIG profile against tenant quotas",
            description=f"GPU capacity of one stack against the quotas of its tenants. {capacity_report.LEGEND}.",
        )
        parser.add_argument("--stack", required=True, metavar="ENV", help="environment (stacks/Pulumi.<ENV>.yaml)")
        parser.add_argument("--format", choices=sorted(capacity_report.FORMATTERS), default="text", help="output format (default: text)")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        """Print the capacity table of `--stack`; exit 0.

        >>> Capacity.run(cli_args("capacity", "--stack", "prod", "--format", "markdown"))
        ### GPU capacity of stack `prod`
        <BLANKLINE>
        ...
        | a100 | exclusive | nvidia.com/gpu | 2 | 16 | 1.25 | 20 | 20 | 0 | warning | eval 20 |
        ...
        0
        """
        # Invalid input raises InvalidInput: `cli.main.main` prints every located problem and exits 1.
        environment = load_environment(args.root, args.stack)
        report(environment.warnings)
        sys.stdout.write(capacity_report.FORMATTERS[args.format](capacity_report.capacity_table(environment)))
        return EXIT_OK


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


def instant_query(base_url: str, expr: str, at: datetime) -> list[dict[str, Any]]:
    """The vector Prometheus answers for `expr` at `at` (`/api/v1/query`).

    >>> instant_query("http://127.0.0.1:9", "up", datetime.now(timezone.utc))  # nothing listens there
    Traceback (most recent call last):
    ...
    components.cli.reports.PrometheusError: cannot query Prometheus at http://127.0.0.1:9: ...
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


class GpuHours:
    """`tenants report`: GPU-hours per cost centre, tenant and GPU class over a period, from Prometheus."""

    @staticmethod
    def add_parser(sub) -> None:
        parser = sub.add_parser(
            "report",
            help="GPU-hours allocated and used per cost centre, tenant and GPU class over a period (from Prometheus)",
            description="GPU-hours per cost centre, tenant and GPU class from FROM to TO, as the gpu-tenancy recording rules "
            "recorded them in Prometheus: allocated (devices held by scheduled pods) and used (DCGM engine activity); "
            "MIG instances and time-slice shares count as what they are of a GPU (docs/monitoring.md#chargeback).",
        )
        parser.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL, e.g. http://prometheus.monitoring:9090")
        parser.add_argument("--from", dest="start", required=True, type=moment, metavar="FROM",
                            help="start: a date (UTC midnight) or ISO 8601 time")
        parser.add_argument("--to", dest="end", required=True, type=moment, metavar="TO",
                            help="end: a date or ISO 8601 time; the report covers the minutes after FROM up to TO")
        parser.add_argument("--step", type=int, default=chargeback.DEFAULT_STEP_SECONDS, metavar="SECONDS",
                            help="integration step in seconds, dividing an hour (default: 60); each pod's run is "
                            "counted to within a step, so use a finer one for a period of minutes")
        parser.add_argument("--format", choices=sorted(chargeback.FORMATTERS), default="text", help="output format (default: text)")
        parser.add_argument("--out", type=Path, metavar="FILE", help="write to FILE instead of stdout")
        parser.add_argument("--idle", action="store_true",
                            help="instead: idle guaranteed quota, the tenants whose pods held less than --idle-below of "
                            "their quota's GPU-hours, with the quota line to lower (needs --stack)")
        parser.add_argument("--stack", metavar="ENV", help="with --idle: the stack whose tenant quotas are compared")
        parser.add_argument("--idle-below", type=float, default=chargeback.IDLE_BELOW, metavar="RATIO",
                            help=f"with --idle: held GPU-hours under this share of the quota's are idle (default: {chargeback.IDLE_BELOW:g}, "
                            "as the dashboard's row)")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        if args.idle and not args.stack:
            print("tenants report: --idle compares the quotas of one stack's tenant files: give --stack ENV", file=sys.stderr)
            return EXIT_USAGE
        try:
            queries = (chargeback.idle_period_queries if args.idle else chargeback.period_queries)(args.start, args.end, args.step)
        except ValueError as err:
            print(f"tenants report: {err}", file=sys.stderr)
            return EXIT_USAGE
        # Invalid files raise InvalidInput before Prometheus is asked: `cli.main.main` prints them, exit 1.
        environment = load_environment(args.root, args.stack) if args.idle else None
        try:
            answers = {name: instant_query(args.prometheus, expr, args.end) for name, expr in queries.items()}
        except PrometheusError as err:
            print(f"tenants report: {err}", file=sys.stderr)
            return EXIT_INVALID
        if environment is not None:
            hours = chargeback.period_seconds(args.start, args.end) / 3600
            rows = chargeback.idle_rows(environment, answers, hours, args.idle_below)
            text = chargeback.IDLE_FORMATTERS[args.format](rows, args.start, args.end, args.idle_below)
        else:
            text = chargeback.FORMATTERS[args.format](chargeback.chargeback_rows(answers), args.start, args.end)
        if args.out:
            args.out.write_text(text)
        else:
            sys.stdout.write(text)
        return EXIT_OK

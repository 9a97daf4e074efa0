"""`promtool check rules` on every example stack's rules, and `promtool test rules` on synthetic series.

The unit tests feed `synthetic.series()` (see its docstring for the scenario) to the rules generated
for the fixture stack and check every recording rule's output and every alert's firing time, labels
and rendered annotations. Expected values are worked out by hand from the scenario.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.manifests import monitoring_rules as r
from components.fleet.environment import Environment
from components.load import load_environment, stack_names
from components.spec.monitoring import Monitoring

from . import synthetic
from .chargeback import ALPHA_BUSY, CC1_ALPHA, CC2_BETA, GPU_HOURS_ALLOCATED, GPU_HOURS_USED, SLICE_OF_A100

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.monitoring
MIB = synthetic.MIB


def write_rules(environment: Environment, path: Path) -> Path:
    path.write_text(yaml.safe_dump({"groups": r.rule_groups(environment.facts)}, sort_keys=False, width=100000))
    return path


def with_monitoring(environment: Environment) -> Environment:
    """The environment with monitoring on (as configured, or defaults when the stack has no block)."""
    if r.enabled_monitoring(environment.platform) is not None:
        return environment
    platform = environment.platform.model_copy(update={"monitoring": Monitoring()})
    return dataclasses.replace(environment, platform=platform)   # its fleet facts are made anew


def dra_with_monitoring() -> Environment:
    """The DRA fixture (tests/fixtures/dra: a DeviceClass metering each GPU class) with monitoring on, its defaults."""
    return with_monitoring(load_environment(REPO_ROOT / "tests" / "fixtures" / "dra", "dra"))


def run(*argv: Any, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, timeout=300)


# --- check rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", stack_names(REPO_ROOT))
def test_check_rules_of_every_example_stack(stack, promtool, tmp_path):
    environment = load_environment(REPO_ROOT, stack)
    files = []
    if r.enabled_monitoring(environment.platform) is not None:
        files.append(write_rules(environment, tmp_path / f"{stack}.rules.yaml"))
    # Stacks without the block: their rules with the defaults must be valid too (other inventories).
    files.append(write_rules(with_monitoring(environment), tmp_path / f"{stack}-defaults.rules.yaml"))
    result = run(promtool, "check", "rules", "--lint=all", "--lint-fatal", *files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


def test_prod_stack_enables_monitoring():
    assert r.enabled_monitoring(load_environment(REPO_ROOT, "prod").platform) is not None


def test_check_rules_rejects_a_broken_rule(promtool, tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [{"record": "a:b:c", "expr": "sum by (x (up)"}]}]}))
    result = run(promtool, "check", "rules", broken)
    assert result.returncode != 0
    assert "parse error" in (result.stdout + result.stderr)


# --- test rules ----------------------------------------------------------------------------------


def _labels(name: str, **labels: str) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _samples(name: str, rows: list[tuple[dict[str, str], float]]) -> list[dict[str, Any]]:
    return [{"labels": _labels(name, **labels), "value": value} for labels, value in rows]


def expression_tests() -> list[dict[str, Any]]:
    """Every recording rule at 2h (before node h3 loses its GPUs), allocatable also after."""
    at = "2h"
    alpha, beta = {"tenant": "alpha"}, {"tenant": "beta"}
    h100, mig = {"gpu_class": "h100"}, {"gpu_class": "a100-mig"}
    gpu, slice_ = {"resource": "nvidia_com_gpu"}, {"resource": "nvidia_com_mig_1g_10gb"}

    def pod(namespace, name, node, **extra):
        return {"namespace": namespace, "pod": name, "node": node, **extra}

    cases = [
        (r.NAMESPACE_TENANT, [({"namespace": "alpha", **alpha}, 1), ({"namespace": "beta", **beta}, 1), ({"namespace": "beta-data", **beta}, 1)]),
        (r.NODE_CLASS, [({"node": n, **h100}, 1) for n in ("h1", "h2", "h3")] + [({"node": "m1", **mig}, 1)]),
        (r.POD_REQUESTS, [
            (pod("alpha", "train-0", "h1", **alpha, **h100, **gpu), 8),
            (pod("alpha", "train-1", "h2", **alpha, **h100, **gpu), 8),
            (pod("alpha", "notebook", "h3", **alpha, **h100, **gpu), 1),
            (pod("beta", "serve", "h3", **beta, **h100, **gpu), 4),
            (pod("beta-data", "mig-job", "m1", **beta, **mig, **slice_), 3),
        ]),
        (r.TENANT_REQUESTS, [({**alpha, **h100, **gpu}, 17), ({**beta, **h100, **gpu}, 4), ({**beta, **mig, **slice_}, 3)]),
        (r.QUOTA_USED, [({**alpha, **gpu}, 19), ({**alpha, **slice_}, 0), ({**beta, **gpu}, 4), ({**beta, **slice_}, 3)]),
        (r.QUOTA_HARD, [({**alpha, **gpu}, 20), ({**alpha, **slice_}, 0), ({**beta, **gpu}, 5), ({**beta, **slice_}, 14)]),
        (r.TENANT_QUOTA_STACK, [({**alpha, **h100, **gpu}, 20), ({**beta, **h100, **gpu}, 5), ({**beta, **mig, **slice_}, 14)]),
        (r.CLASS_QUOTA_STACK, [({**h100, **gpu}, 25), ({**mig, **slice_}, 14)]),
        (r.CLASS_CAPACITY_STACK, [({**h100, **gpu}, 24), ({**mig, **slice_}, 56)]),
        (r.CLASS_OVERCOMMIT_STACK, [(h100, 1.25), (mig, 1)]),
        (r.CLASS_ALLOCATABLE, [({**h100, **gpu}, 24), ({**mig, **slice_}, 56)]),
        (r.POD_ACTIVE, [
            ({"namespace": "alpha", "pod": "train-0", **alpha, **h100}, 0.9),
            ({"namespace": "alpha", "pod": "train-1", **alpha, **h100}, 0.8),  # DCGM_FI_DEV_GPU_UTIL fallback
            ({"namespace": "alpha", "pod": "notebook", **alpha, **h100}, 0.01),  # GR_ENGINE_ACTIVE preferred
            ({"namespace": "beta", "pod": "serve", **beta, **h100}, 0.5),
            ({"namespace": "beta-data", "pod": "mig-job", **beta, **mig}, 0.6),
        ]),
        (r.TENANT_ACTIVE_AVG, [({**alpha, **h100}, (8 * 0.9 + 8 * 0.8 + 0.01) / 17), ({**beta, **h100}, 0.5), ({**beta, **mig}, 0.6)]),
        (r.TENANT_ACTIVE_SUM, [({**alpha, **h100}, 8 * 0.9 + 8 * 0.8 + 0.01), ({**beta, **h100}, 4 * 0.5), ({**beta, **mig}, 3 * 0.6)]),
        (r.TENANT_FB_USED, [({**alpha, **h100}, (8 * 40960 + 8 * 20480 + 1024) * MIB), ({**beta, **h100}, 4 * 10240 * MIB), ({**beta, **mig}, 3 * 5120 * MIB)]),
        # alpha: per minute 5 waits in (5s,10s] and 5 in (30s,60s]; beta: 4 in (60s,300s]. Linear
        # interpolation inside the bucket: p50 alpha = 10, p95 alpha = 30 + 30 * (9.5-5)/5 = 57;
        # beta p50 = 60 + 240 * 2/4 = 180, p95 = 60 + 240 * 3.8/4 = 288.
        (r.QUEUE_WAIT_P50, [(alpha, 10), (beta, 180)]),
        (r.QUEUE_WAIT_P95, [(alpha, 57), (beta, 288)]),
        (r.PENDING_WORKLOADS, [({**alpha, "status": "active"}, 0), ({**alpha, "status": "inadmissible"}, 0),
                               ({**beta, "status": "active"}, 1), ({**beta, "status": "inadmissible"}, 1)]),
    ]
    tests = [{"expr": name, "eval_time": at, "exp_samples": _samples(name, rows)} for name, rows in cases]
    # A bare record keeps its name in the result; an aggregation over one does not.
    tests += [{"expr": expr, "eval_time": time, "exp_samples": _samples(expr if re.fullmatch(r"[a-z_:]+", expr) else "", rows)}
              for expr, time, rows in chargeback_cases()]
    # Per-device series: the MIG instances keep their identity; the fallback converts percent to a ratio.
    tests.append({
        "expr": f'{r.ENGINE_ACTIVE}{{pod="mig-job"}}', "eval_time": at,
        "exp_samples": _samples(r.ENGINE_ACTIVE, [({"Hostname": "m1", "node": "m1", "gpu": "0", "GPU_I_ID": i, "GPU_I_PROFILE": "1g.10gb",
                                                    "namespace": "beta-data", "pod": "mig-job"}, 0.6) for i in ("1", "2", "3")]),
    })
    tests.append({"expr": f"count({r.ENGINE_ACTIVE})", "eval_time": at, "exp_samples": [{"labels": "{}", "value": 8 + 8 + 1 + 4 + 3}]})
    tests.append({"expr": f"sum({r.FB_USED})", "eval_time": at,
                  "exp_samples": [{"labels": "{}", "value": (8 * 40960 + 8 * 20480 + 1024 + 4 * 10240 + 3 * 5120) * MIB}]})
    # Node h3's device plugin reports 0 GPUs from 2h10m on.
    tests.append({"expr": r.CLASS_ALLOCATABLE, "eval_time": "2h30m",
                  "exp_samples": _samples(r.CLASS_ALLOCATABLE, [({**h100, **gpu}, 16), ({**mig, **slice_}, 56)])})
    return tests


def chargeback_cases() -> list[tuple[str, str, list[tuple[dict[str, str], float]]]]:
    """(expression, eval time, expected rows) of the chargeback rules: at 1h (the burst runs), at 2h
    (it has finished), and the GPU-hours of the whole three hours."""
    alpha, beta = {"tenant": "alpha"}, {"tenant": "beta"}
    h100, mig = {"gpu_class": "h100"}, {"gpu_class": "a100-mig"}

    def pod(namespace, name, tenant, gpu_class):
        return {"namespace": namespace, "pod": name, **tenant, **gpu_class}

    idle = r.figure_queries(THREE_HOURS, (r.GUARANTEED, r.PEAK))

    return [
        (r.NAMESPACE_COST_CENTER, "2h", [({"namespace": "alpha", "cost_center": "cc-1"}, 1),
                                         ({"namespace": "beta", "cost_center": "cc-2"}, 1),
                                         ({"namespace": "beta-data", "cost_center": "cc-2"}, 1)]),
        (r.DEVICE_GPU_FRACTION, "2h", [({**h100, "resource": "nvidia_com_gpu"}, 1),
                                       ({**mig, "resource": "nvidia_com_mig_1g_10gb"}, SLICE_OF_A100)]),
        (r.POD_ALLOCATED_GPUS, "1h", [
            (pod("alpha", "train-0", alpha, h100), 8), (pod("alpha", "train-1", alpha, h100), 8),
            (pod("alpha", "notebook", alpha, h100), 1), (pod("beta", "serve", beta, h100), 4),
            (pod("beta-data", "mig-job", beta, mig), 3 * SLICE_OF_A100), (pod("beta-data", "burst", beta, mig), 2 * SLICE_OF_A100),
        ]),
        (r.TENANT_ALLOCATED_GPUS, "1h", [({**CC1_ALPHA, **h100}, 17), ({**CC2_BETA, **h100}, 4), ({**CC2_BETA, **mig}, 5 * SLICE_OF_A100)]),
        (r.TENANT_ALLOCATED_GPUS, "2h", [({**CC1_ALPHA, **h100}, 17), ({**CC2_BETA, **h100}, 4), ({**CC2_BETA, **mig}, 3 * SLICE_OF_A100)]),
        (r.TENANT_USED_GPUS, "1h", [({**CC1_ALPHA, **h100}, ALPHA_BUSY), ({**CC2_BETA, **h100}, 2),
                                    ({**CC2_BETA, **mig}, (3 * 0.6 + 2 * 0.3) * SLICE_OF_A100)]),
        (r.TENANT_USED_GPUS, "2h", [({**CC1_ALPHA, **h100}, ALPHA_BUSY), ({**CC2_BETA, **h100}, 2),
                                    ({**CC2_BETA, **mig}, 3 * 0.6 * SLICE_OF_A100)]),
        (r.gpu_hours_expr(r.TENANT_ALLOCATED_GPUS, "3h"), "3h", GPU_HOURS_ALLOCATED),
        (r.gpu_hours_expr(r.TENANT_USED_GPUS, "3h"), "3h", GPU_HOURS_USED),
        # Idle guaranteed quota over the three hours (`tenants report --idle`, the dashboard's row).
        (idle[r.GUARANTEED], "3h", [({**alpha, **h100}, 20 * 3), ({**beta, **h100}, 5 * 3), ({**beta, **mig}, 14 * SLICE_OF_A100 * 3)]),
        (idle[r.PEAK], "3h", [({**CC1_ALPHA, **h100}, 17), ({**CC2_BETA, **h100}, 4), ({**CC2_BETA, **mig}, 5 * SLICE_OF_A100)]),
        (r.idle_share_query(THREE_HOURS), "3h", [({**beta, **mig}, (11 / 7) / 6)]),   # 51/60 and 12/15 are not idle
    ]


THREE_HOURS = r.Period("3h", "10800")


def nothing_held_tests() -> dict[str, Any]:
    """A test group without pods: every tenant holding quota held nothing, so each is idle at 0 (not
    left out for want of a held series)."""
    return {
        "name": "quota and no pods",
        "interval": "1m",
        "input_series": [{"series": 'up{job="none"}', "values": "1x180"}],
        "promql_expr_test": [{"expr": r.idle_share_query(THREE_HOURS), "eval_time": "3h", "exp_samples": _samples("", [
            ({"tenant": "alpha", "gpu_class": "h100"}, 0), ({"tenant": "beta", "gpu_class": "h100"}, 0),
            ({"tenant": "beta", "gpu_class": "a100-mig"}, 0)])}],
    }


def rendered_annotations(rule: dict[str, Any], labels: dict[str, str], value: str, percentage: str = "") -> dict[str, str]:
    """The rule's annotation templates with $labels and $value filled in (what Prometheus must render)."""
    out = {}
    for key, text in rule["annotations"].items():
        text = re.sub(r"\{\{ \$labels\.([a-z_]+) \}\}", lambda m: labels[m.group(1)], text)
        text = text.replace("{{ $value | humanizePercentage }}", percentage).replace("{{ $value }}", value)
        assert "{{" not in text, text
        out[key] = text
    return out


def alert_tests(environment: Environment) -> list[dict[str, Any]]:
    """Each alert just before and exactly when its `for:` has elapsed, with labels and annotations."""
    rules = {rule["alert"]: rule for group in r.rule_groups(environment.facts) for rule in group["rules"] if "alert" in rule}

    def firing(name: str, labels: dict[str, str], value: str, percentage: str = "") -> dict[str, Any]:
        return {"exp_labels": {**labels, **rules[name]["labels"]},
                "exp_annotations": rendered_annotations(rules[name], labels, value, percentage)}

    scenarios = [
        # alpha at 19/20 = 95 % from t=0, for 15m; beta at 4/5 = 80 % never.
        ("GpuTenantNearQuota", "14m", "15m", [firing("GpuTenantNearQuota", {"tenant": "alpha", "resource": "nvidia_com_gpu"}, "0.95", "95%")]),
        ("GpuTenantPodPendingTooLong", "29m", "30m",
         [firing("GpuTenantPodPendingTooLong", {"tenant": "alpha", "namespace": "alpha", "pod": "train-2"}, "2")]),
        ("GpuTenantWorkloadsPendingTooLong", "29m", "30m", [firing("GpuTenantWorkloadsPendingTooLong", {"tenant": "beta"}, "2")]),
        ("GpuMigReconfigurationFailed", "1h14m", "1h15m", [firing("GpuMigReconfigurationFailed", {"node": "m1", "state": "failed"}, "1")]),
        # The notebook has been idle since t=0: pending for 2h, firing at 2h, not a minute before.
        ("GpuAllocatedIdle", "1h59m", "2h",
         [firing("GpuAllocatedIdle", {"tenant": "alpha", "gpu_class": "h100", "namespace": "alpha", "pod": "notebook"}, "0.01")]),
        # h3 loses its GPUs at 2h10m: quotas 25 > 16 x 1.25 = 20, for 10m.
        ("GpuQuotaOverCapacity", "2h19m", "2h20m", [firing("GpuQuotaOverCapacity", {"gpu_class": "h100", "resource": "nvidia_com_gpu"}, "25")]),
    ]
    assert {name for name, *_ in scenarios} == set(rules), "every alert needs a scenario"
    tests = []
    for name, before, at, expected in scenarios:
        tests.append({"eval_time": before, "alertname": name, "exp_alerts": []})
        tests.append({"eval_time": at, "alertname": name, "exp_alerts": expected})
    return tests


def unit_test_file(environment: Environment, rules_file: Path, path: Path, expr_tests: list[dict[str, Any]]) -> Path:
    document = {
        "rule_files": [rules_file.name],
        "evaluation_interval": "1m",
        "fuzzy_compare": True,
        "tests": [{
            "name": "two tenants, whole GPUs and MIG slices",
            "interval": "1m",
            "input_series": synthetic.promtool_input_series(),
            "promql_expr_test": expr_tests,
            "alert_rule_test": alert_tests(environment),
        }, nothing_held_tests()],
    }
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=100000))
    return path


def test_every_recording_rule_has_an_expression_test(lab):
    records = {rule["record"] for group in r.rule_groups(lab.facts) for rule in group["rules"] if "record" in rule}
    # The first series named in each test's expression that is a recording rule (`level:metric:operation`).
    tested = {re.search(r"[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+", t["expr"]).group(0) for t in expression_tests()}
    assert records <= tested, f"recording rules without a promtool test: {sorted(records - tested)}"


def promtool_test_rules(promtool: Path, tmp_path: Path, environment: Environment, test_file, expr_tests: list[dict[str, Any]]) -> subprocess.CompletedProcess:
    """`promtool test rules` on the environment's rules and the file `test_file(environment, rules, path, expr_tests)` writes."""
    rules = write_rules(environment, tmp_path / "rules.yaml")
    return run(promtool, "test", "rules", test_file(environment, rules, tmp_path / "tests.yaml", expr_tests).name, cwd=tmp_path)


def test_rules_on_synthetic_series(lab, promtool, tmp_path):
    result = promtool_test_rules(promtool, tmp_path, lab, unit_test_file, expression_tests())
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "SUCCESS" in result.stdout


def test_rule_tests_can_fail(lab, promtool, tmp_path):
    """The same harness with one wrong expectation (p95 of alpha) must fail: the tests can catch a bug."""
    wrong = expression_tests()
    for case in wrong:
        if case["expr"] == r.QUEUE_WAIT_P95:
            case["exp_samples"][0]["value"] = 60
    result = promtool_test_rules(promtool, tmp_path, lab, unit_test_file, wrong)
    assert result.returncode != 0
    assert r.QUEUE_WAIT_P95 in result.stdout + result.stderr

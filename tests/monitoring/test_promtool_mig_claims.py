"""Chargeback of MIG partitions claimed through DRA under the real `promtool test rules`: the
tests/fixtures/dra-mig stack (monitoring on with its defaults) on series shaped as kube-state-metrics'
`resourceclaims` and `resourceslices` collectors publish them.

A partition is charged its compute slices' share of the GPU, as a device-plugin MIG slice is; the
slices are read from the NVIDIA DRA driver's device name (`gpu-<minor>-mig-<profile>-<id>-<start>`).
The scenario, three hours at one sample a minute: vision's claim `small` holds a 1g.10gb of
gpu-a100-01 all along, its claim `large` a 3g.40gb of the same GPU for the first hour; robotics'
`whole` holds an H100 (gpu-h100-01, a whole device) all along. GPU-hours: vision 3 x 1/7 + 1 x 3/7
= 6/7 of a100-mig, robotics 3 of h100.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.load import load_environment
from components.manifests import monitoring_rules as r
from tests.monitoring.test_promtool import promtool_test_rules, with_monitoring
from tests.monitoring.test_promtool_claims import ALL_ALONG, DRIVER, FIRST_HOUR, ROBOTICS, VISION, _claim, _device, _samples, _series

pytestmark = pytest.mark.monitoring

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "dra-mig"
SMALL, LARGE = "gpu-0-mig-1g10gb-19-0", "gpu-0-mig-3g40gb-9-4"


@pytest.fixture(scope="module")
def dra_mig():
    return with_monitoring(load_environment(FIXTURE, "dra"))


def input_series(environment) -> list[dict[str, str]]:
    class_label = r.ksm_label(f"{environment.platform.label_domain}/gpu-class")
    tenant, cost = r.ksm_label("gpu-tenancy.dev/tenant"), r.ksm_label("gpu-tenancy.dev/cost-center")
    out = [_series("kube_namespace_labels", ALL_ALONG, namespace=t["tenant"], **{tenant: t["tenant"], cost: t["cost_center"]})
           for t in (VISION, ROBOTICS)]
    for node, gpu_class in (("gpu-a100-01", "a100-mig"), ("gpu-h100-01", "h100")):
        out.append(_series("kube_node_labels", ALL_ALONG, node=node, **{class_label: gpu_class}))
        out.append(_series(r.KSM_SLICE_INFO, ALL_ALONG, resourceslice=f"{node}-{DRIVER}", driver=DRIVER, pool_name=node,
                           node_name=node, all_nodes="false"))
    return out + [
        _device("vision", "small", "gpu", "gpu-a100-01", SMALL, ALL_ALONG),
        _device("vision", "large", "gpu", "gpu-a100-01", LARGE, FIRST_HOUR),
        _device("robotics", "whole", "gpu", "gpu-h100-01", "gpu-0", ALL_ALONG),
    ]


def expression_tests(large_weight: float = 3 / 7) -> list[dict[str, Any]]:
    cases = [
        (r.MIG_PARTITION_FRACTION, "30m", [({"gpu_class": "a100-mig", "mig_slices": "1"}, 1 / 7),
                                           ({"gpu_class": "a100-mig", "mig_slices": "3"}, 3 / 7)]),
        (r.CLAIM_ALLOCATED_GPUS, "30m", [(_claim(VISION, "a100-mig", "small"), 1 / 7),
                                         (_claim(VISION, "a100-mig", "large"), large_weight),
                                         (_claim(ROBOTICS, "h100", "whole"), 1)]),
        (r.TENANT_ALLOCATED_GPUS, "30m", [({**VISION, "gpu_class": "a100-mig"}, 1 / 7 + large_weight),
                                          ({**ROBOTICS, "gpu_class": "h100"}, 1)]),
        (r.gpu_hours_expr(r.TENANT_ALLOCATED_GPUS, "3h"), "3h", [({**VISION, "gpu_class": "a100-mig"}, 3 / 7 + large_weight),
                                                                 ({**ROBOTICS, "gpu_class": "h100"}, 3)]),
    ]
    return [{"expr": expr, "eval_time": at, "exp_samples": _samples(expr if ":" in expr and "(" not in expr else "", rows)}
            for expr, at, rows in cases]


def unit_test_file(environment, rules_file: Path, path: Path, tests: list[dict[str, Any]]) -> Path:
    document = {"rule_files": [rules_file.name], "evaluation_interval": "1m", "fuzzy_compare": True, "tests": [
        {"name": "MIG partitions claimed through DRA", "interval": "1m", "input_series": input_series(environment),
         "promql_expr_test": tests}]}
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=100000))
    return path


def test_a_claimed_partition_is_charged_its_share_of_the_gpu(dra_mig, promtool, tmp_path):
    result = promtool_test_rules(promtool, tmp_path, dra_mig, unit_test_file, expression_tests())
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "SUCCESS" in result.stdout


def test_a_partition_charged_as_a_whole_gpu_fails_the_test(dra_mig, promtool, tmp_path):
    """The same harness expecting the 3g.40gb charged as one device (the rule before) must fail."""
    result = promtool_test_rules(promtool, tmp_path, dra_mig, unit_test_file, expression_tests(large_weight=1))
    assert result.returncode != 0 and r.CLAIM_ALLOCATED_GPUS in result.stdout + result.stderr

"""Chargeback from ResourceClaims (#38 item 3) under the real `promtool test rules`: the DRA fixture
stack (tests/fixtures/dra, monitoring on with its defaults) on series shaped as kube-state-metrics'
`resourceclaims` and `resourceslices` collectors publish them.

The scenario, three hours at one sample a minute; the pool of each ResourceSlice is its node:
* vision's claim `train` holds two B200s (gpu-b200-01) for the first hour, then is deallocated;
* vision's pod `serve` asks for `nvidia.com/gpu: 1` (h100 is served by both, its DeviceClass maps
  the name) and got it through DRA: the claim the scheduler made for it (`container-0-request-0`,
  reserved for the pod) is charged, the pod's own request is not charged again; vision's pod
  `plugin` asks for the same and got a device-plugin GPU (no claim): its request is charged;
* vision's `share` and robotics' `lab` hold one H100 of gpu-h100-01 at once for two hours
  (consumable capacity): half a GPU each;
* robotics' `sim` holds an H100 of its own pool (gpu-h100-02) all along.
GPU-hours over the three hours: vision b200 2, vision h100 3 + 3 + 1, robotics h100 1 + 3.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.manifests import monitoring_rules as r
from tests.monitoring.test_promtool import dra_with_monitoring, promtool_test_rules

pytestmark = pytest.mark.monitoring

DRIVER = "gpu.nvidia.com"
ALL_ALONG, FIRST_HOUR, TWO_HOURS = "1x180", "1x60 stale", "1x120 stale"   # (0, 3h] counts minutes 1..180
VISION, ROBOTICS = {"cost_center": "cc-vision", "tenant": "vision"}, {"cost_center": "cc-robotics", "tenant": "robotics"}


@pytest.fixture(scope="module")
def dra():
    return dra_with_monitoring()


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    inner = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def _device(namespace: str, claim: str, request: str, node: str, device: str, values: str) -> dict[str, str]:
    return _series(r.KSM_CLAIM_DEVICES, values, namespace=namespace, resourceclaim=claim, request=request,
                   driver=DRIVER, pool=node, device=device)


def input_series(dra) -> list[dict[str, str]]:
    class_label = r.ksm_label(f"{dra.platform.label_domain}/gpu-class")
    tenant, cost = r.ksm_label("gpu-tenancy.dev/tenant"), r.ksm_label("gpu-tenancy.dev/cost-center")
    nodes = {"gpu-h100-01": "h100", "gpu-h100-02": "h100", "gpu-b200-01": "b200"}
    out = [_series("kube_namespace_labels", ALL_ALONG, namespace=t["tenant"], **{tenant: t["tenant"], cost: t["cost_center"]})
           for t in (VISION, ROBOTICS)]
    for node, gpu_class in nodes.items():
        out.append(_series("kube_node_labels", ALL_ALONG, node=node, **{class_label: gpu_class}))
        out.append(_series(r.KSM_SLICE_INFO, ALL_ALONG, resourceslice=f"{node}-{DRIVER}", driver=DRIVER, pool_name=node,
                           node_name=node, all_nodes="false"))
    for name in ("serve", "plugin"):
        pod = {"namespace": "vision", "pod": name, "uid": f"uid-{name}"}
        out += [_series("kube_pod_container_resource_requests", ALL_ALONG, **pod, container="main", node="gpu-h100-01",
                        resource="nvidia_com_gpu", unit="integer"),
                _series("kube_pod_status_phase", ALL_ALONG, **pod, phase="Running")]
    made = "serve-extended-resources-x7k2p"
    out += [
        _device("vision", made, "container-0-request-0", "gpu-h100-01", "gpu-7", ALL_ALONG),
        _series(r.KSM_CLAIM_RESERVED, ALL_ALONG, namespace="vision", resourceclaim=made, consumer_apigroup="",
                consumer_resource="pods", consumer_name="serve", consumer_uid="uid-serve"),
        _device("vision", "train", "gpu", "gpu-b200-01", "gpu-0", FIRST_HOUR),
        _device("vision", "train", "gpu", "gpu-b200-01", "gpu-1", FIRST_HOUR),
        _device("vision", "share", "gpu", "gpu-h100-01", "gpu-3", TWO_HOURS),
        _device("robotics", "lab", "gpu", "gpu-h100-01", "gpu-3", TWO_HOURS),
        _device("robotics", "sim", "gpu", "gpu-h100-02", "gpu-0", ALL_ALONG),
    ]
    return out


def _samples(name: str, rows: list[tuple[dict[str, str], float]]) -> list[dict[str, Any]]:
    return [{"labels": name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}", "value": value}
            for labels, value in rows]


def _claim(tenant: dict[str, str], gpu_class: str, claim: str) -> dict[str, str]:
    return {"tenant": tenant["tenant"], "gpu_class": gpu_class, "namespace": tenant["tenant"], "resourceclaim": claim}


def expression_tests() -> list[dict[str, Any]]:
    share = {"driver": DRIVER, "pool": "gpu-h100-01", "device": "gpu-3", "request": "gpu"}
    cases = [
        (r.POOL_NODE, "30m", [({"driver": DRIVER, "pool": n, "node": n}, 1) for n in ("gpu-b200-01", "gpu-h100-01", "gpu-h100-02")]),
        (r.CLAIM_DEVICE_SHARE, "90m", [
            ({**share, "namespace": "vision", "resourceclaim": "share"}, 0.5),
            ({**share, "namespace": "robotics", "resourceclaim": "lab"}, 0.5),
            ({"namespace": "robotics", "resourceclaim": "sim", "request": "gpu", "driver": DRIVER, "pool": "gpu-h100-02", "device": "gpu-0"}, 1),
            ({"namespace": "vision", "resourceclaim": "serve-extended-resources-x7k2p", "request": "container-0-request-0",
              "driver": DRIVER, "pool": "gpu-h100-01", "device": "gpu-7"}, 1),
        ]),
        (r.CLAIM_ALLOCATED_GPUS, "30m", [
            (_claim(VISION, "b200", "train"), 2), (_claim(VISION, "h100", "share"), 0.5),
            (_claim(VISION, "h100", "serve-extended-resources-x7k2p"), 1),
            (_claim(ROBOTICS, "h100", "lab"), 0.5), (_claim(ROBOTICS, "h100", "sim"), 1),
        ]),
        (r.TENANT_CLAIM_GPUS, "30m", [({**VISION, "gpu_class": "b200"}, 2), ({**VISION, "gpu_class": "h100"}, 1.5),
                                      ({**ROBOTICS, "gpu_class": "h100"}, 1.5)]),
        (r.EXTENDED_RESOURCE_PODS, "30m", [({"namespace": "vision", "pod": "serve"}, 1)]),
        # Only the device-plugin pod's request: serve's GPU is its claim's.
        (r.POD_ALLOCATED_GPUS, "30m", [({"tenant": "vision", "gpu_class": "h100", "namespace": "vision", "pod": "plugin"}, 1)]),
        # The pods' GPUs and the claims' under one name: what `tenants report` and the dashboards read.
        (r.TENANT_ALLOCATED_GPUS, "30m", [({**VISION, "gpu_class": "b200"}, 2), ({**VISION, "gpu_class": "h100"}, 2.5),
                                          ({**ROBOTICS, "gpu_class": "h100"}, 1.5)]),
        (r.TENANT_ALLOCATED_GPUS, "150m", [({**VISION, "gpu_class": "h100"}, 2), ({**ROBOTICS, "gpu_class": "h100"}, 1)]),
        (r.gpu_hours_expr(r.TENANT_ALLOCATED_GPUS, "3h"), "3h", [
            ({**VISION, "gpu_class": "b200"}, 2), ({**VISION, "gpu_class": "h100"}, 3 + 3 + 1), ({**ROBOTICS, "gpu_class": "h100"}, 1 + 3)]),
    ]
    return [{"expr": expr, "eval_time": at, "exp_samples": _samples(expr if re.fullmatch(r"[a-z_:]+", expr) else "", rows)}
            for expr, at, rows in cases]


def unit_test_file(dra, rules_file: Path, path: Path, tests: list[dict[str, Any]]) -> Path:
    document = {"rule_files": [rules_file.name], "evaluation_interval": "1m", "fuzzy_compare": True, "tests": [
        {"name": "claims of two tenants, one device shared", "interval": "1m", "input_series": input_series(dra),
         "promql_expr_test": tests}]}
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=100000))
    return path


def test_every_claim_rule_has_an_expression_test(dra):
    records = {rule["record"] for rule in r.claim_rules(dra.platform)}
    tested = {re.search(r"[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+", t["expr"]).group(0) for t in expression_tests()}
    assert records and records <= tested, sorted(records - tested)


def test_claims_are_charged_per_tenant_and_class(dra, promtool, tmp_path):
    result = promtool_test_rules(promtool, tmp_path, dra, unit_test_file, expression_tests())
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert "SUCCESS" in result.stdout


def test_a_claim_charged_twice_fails_the_test(dra, promtool, tmp_path):
    """The same harness expecting the DRA-served pod charged twice (its request and its claim) must fail."""
    wrong = expression_tests()
    for case in wrong:
        if case["expr"] == r.TENANT_ALLOCATED_GPUS and case["eval_time"] == "150m":
            case["exp_samples"][0]["value"] = 3
    result = promtool_test_rules(promtool, tmp_path, dra, unit_test_file, wrong)
    assert result.returncode != 0 and r.TENANT_ALLOCATED_GPUS in result.stdout + result.stderr

"""Every generated Kueue and KAI object validates against the upstream CRD schemas we ship.

The CRDs' `openAPIV3Schema` is OpenAPI v3, not JSON Schema: it is converted here (unknown fields
are rejected wherever the CRD lists properties and does not preserve unknown fields, as the API
server does with strict field validation; `x-kubernetes-*` keys are dropped), and the CRDs' CEL
rules (`x-kubernetes-validations`) are evaluated with cel-python, except transition rules that
need `oldSelf`.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml

from components.manifests import queues
from components.fleet.environment import Environment, LoadedTenant
from components.load import load_environment
from components.spec.stack import Platform
from components.spec.tenant import Tenant

REPO = Path(__file__).resolve().parents[2]

CRD_FILES = {
    ("kueue.x-k8s.io/v1beta2", "ClusterQueue"): "kueue/kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io/v1beta2", "LocalQueue"): "kueue/kueue.x-k8s.io_localqueues.yaml",
    ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"): "kueue/kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io/v1beta2", "Cohort"): "kueue/kueue.x-k8s.io_cohorts.yaml",
    ("scheduling.run.ai/v2", "Queue"): "kai-scheduler/scheduling.run.ai_queues.yaml",
    ("kai.scheduler/v1", "Config"): "kai-scheduler/kai.scheduler_configs.extract.yaml",
}
_DROPPED = {"description", "default", "format", "example"}


def to_json_schema(node: Any) -> Any:
    """OpenAPI v3 (structural CRD schema) -> JSON Schema with unknown fields forbidden."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: to_json_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k not in _DROPPED}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    out.pop("nullable", None)
    if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@lru_cache(maxsize=None)
def crd_version_schema(api_version: str, kind: str) -> dict:
    text = resources.files("components.data").joinpath(CRD_FILES[(api_version, kind)]).read_text("utf-8")
    crd = yaml.safe_load(text)
    assert crd["spec"]["names"]["kind"] == kind
    version = api_version.split("/")[1]
    return next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]


_CEL = celpy.Environment()


def cel_failures(schema: dict, value: Any, path: str = "") -> list[str]:
    """Messages of the CRD CEL rules that `value` breaks (rules with oldSelf are update-only: skipped)."""
    failures = []
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue
        program = _CEL.program(_CEL.compile(rule["rule"]))
        result = program.evaluate({"self": celpy.json_to_cel(value)})
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            failures.append(f"{path or '<root>'}: {rule.get('message', rule['rule'])}")
    if isinstance(value, dict):
        for key, child in value.items():
            sub = schema.get("properties", {}).get(key)
            if sub is None and isinstance(schema.get("additionalProperties"), dict):
                sub = schema["additionalProperties"]
            if sub is not None:
                failures.extend(cel_failures(sub, child, f"{path}.{key}"))
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, child in enumerate(value):
            failures.extend(cel_failures(schema["items"], child, f"{path}[{index}]"))
    return failures


def crd_errors(obj: dict) -> list[str]:
    """Schema and CEL violations of one custom object against its shipped CRD."""
    schema = crd_version_schema(obj["apiVersion"], obj["kind"])
    validator = jsonschema.Draft202012Validator(to_json_schema(schema))
    errors = [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]
    return errors + cel_failures(schema, obj)


# ---- a synthetic environment exercising every branch of the queue builders ----------------------

LAB_PLATFORM: dict[str, Any] = {
    "labelDomain": "gpu.example.com",
    "gpuClasses": {
        "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
        "a100": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "overcommit": 1.5},
        "l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing",
               "timeSlicing": {"replicas": 4, "renameByDefault": True}},
        "a100-mig": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"},
    },
    "nodePools": {
        "h100-train": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["h1"], "patchTaints": True},
        "h100-shared": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": ["h2"]},
        "a100-solo": {"gpuClass": "a100", "gpusPerNode": 8, "nodes": ["a1"]},
        "l4": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": ["l1", "l2"]},
        "mig": {"gpuClass": "a100-mig", "gpusPerNode": 8, "nodes": ["m1"], "migLayout": "all-1g.10gb"},
    },
    "cpuMemoryCapacity": {"cpu": "512", "memory": "4Ti"},
    "queues": {
        "defaultCohort": "research",
        "cohorts": {"research": {"parent": "org"}},
        "kueue": {"preemption": {"borrowWithinCohort": "LowerPriority"}},
        "kai": {"departments": {"research": {"displayName": "Research", "gpu": 60, "cpu": "200", "memory": "2Ti"},
                                "idle": {"overQuotaWeight": 2}}},
    },
}

LAB_TENANTS: list[dict[str, Any]] = [
    {"name": "train", "gpu": {"classes": ["l4"], "dedicatedPools": ["h100-train"]},
     "quota": {"cpu": {"requests": "64"}, "memory": {"requests": "512Gi"}, "gpu": {"h100": 8, "l4": 4}},
     "queue": {"weight": 3, "borrowingLimit": {"l4": 2}, "lendingLimit": {"l4": 1}}},
    {"name": "bench", "namespaces": ["bench-data"], "gpu": {"classes": ["h100", "a100", "a100-mig", "l4"]},
     "quota": {"cpu": {"requests": "32"}, "memory": {"requests": "256Gi"}, "gpu": {"h100": 4, "a100": 8, "l4": 4}, "mig": {"1g.10gb": 7}},
     "queue": {"borrowingLimit": {"h100": 2, "l4": 2, "a100": 0}}},
    {"name": "paused", "lifecycle": "suspended", "gpu": {"classes": ["l4"]}, "quota": {"gpu": {"l4": 2}},
     "queue": {"cohort": "solo"}},
    {"name": "gone", "lifecycle": "decommissioned", "decommission": {"confirm": "gone"}, "gpu": {"classes": ["a100"]}, "quota": {"gpu": {"a100": 2}}},
    {"name": "cpuonly", "quota": {"cpu": {"requests": "1500m"}}},
]


def lab_tenant(fields: dict[str, Any]) -> Tenant:
    base = {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "displayName": fields["name"].title(), "costCenter": "cc-1"}
    return Tenant.model_validate({**base, **fields})


def queue_lab(scheduler: str, **platform: Any) -> Environment:
    """The synthetic environment with `scheduler` set; tenants in name order, as the loader sorts them."""
    spec = Platform.model_validate({**copy.deepcopy(LAB_PLATFORM), "scheduler": scheduler, **platform})
    tenants = sorted((LoadedTenant(lab_tenant(t), None) for t in LAB_TENANTS), key=lambda t: t.name)
    return Environment("lab", spec, None, tenants)


def all_queue_objects(environment: Environment) -> list[dict]:
    objects = list(queues.platform_queue_objects(environment.facts))
    for loaded in environment.tenants:
        objects.extend(queues.tenant_queue_objects(loaded.spec, environment.view(loaded.spec)))
    return objects


@pytest.fixture(scope="module")
def examples() -> dict[str, Environment]:
    return {name: load_environment(REPO, name) for name in ("dev", "prod", "staging")}


def _cases(examples: dict[str, Environment]) -> dict[str, Environment]:
    return {**examples, "lab-kueue": queue_lab("kueue"), "lab-kai": queue_lab("kai")}


def test_the_examples_use_each_scheduler(examples):
    assert [examples[n].platform.scheduler for n in ("dev", "prod", "staging")] == ["none", "kueue", "kai"]
    assert all_queue_objects(examples["dev"]) == []


@pytest.mark.parametrize("case", ["prod", "staging", "lab-kueue", "lab-kai"])
def test_every_custom_object_matches_its_crd(examples, case):
    objects = [o for o in all_queue_objects(_cases(examples)[case]) if (o["apiVersion"], o["kind"]) in CRD_FILES]
    kinds = {o["kind"] for o in objects}
    expected = {"prod": {"ClusterQueue", "LocalQueue", "ResourceFlavor"}, "lab-kueue": {"ClusterQueue", "Cohort", "LocalQueue", "ResourceFlavor"},
                "staging": {"Queue", "Config"}}   # staging's a100: kaiFractions with hamicore
    assert kinds == expected.get(case, {"Queue"})
    problems = [f"{o['kind']}/{o['metadata']['name']}: {e}" for o in objects for e in crd_errors(o)]
    assert problems == []


def _first(objects: list[dict], kind: str) -> dict:
    return copy.deepcopy(next(o for o in objects if o["kind"] == kind))


@pytest.mark.parametrize(
    "kind, mutate, expected",
    [
        ("ClusterQueue", lambda o: o["spec"].__setitem__("cohort", "x"), "Additional properties"),
        ("ClusterQueue", lambda o: o["spec"]["resourceGroups"][1]["flavors"][0]["resources"].pop(), "same number of resources"),
        ("ClusterQueue", lambda o: o["spec"].pop("cohortName"), "borrowingLimit must be nil"),
        ("ClusterQueue", lambda o: o["spec"]["preemption"].__setitem__("reclaimWithinCohort", "Never"), "reclaimWithinCohort=Never"),
        ("ClusterQueue", lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].__setitem__("nominalQuota", "8 cpus"), "does not match"),
        ("ResourceFlavor", lambda o: o["spec"].__setitem__("tolerations", [{"operator": "Equal", "value": "x"}]), "operator must be Exists"),
        ("LocalQueue", lambda o: o["spec"].__setitem__("clusterQueue", "Not_A_Name"), "does not match"),
        ("Cohort", lambda o: o["spec"].__setitem__("parentName", "Not_A_Name"), "does not match"),
        ("Cohort", lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop(), "same number of resources"),
        ("Queue", lambda o: o["spec"]["resources"]["gpu"].__setitem__("quota", "8"), "is not of type 'number'"),
        ("Queue", lambda o: o["spec"]["resources"].__setitem__("nvidia.com/gpu", {}), "Additional properties"),
        ("Config", lambda o: o["spec"]["binder"]["plugins"]["hamicore"].__setitem__("enabled", "yes"), "is not of type 'boolean'"),
        ("Config", lambda o: o["spec"]["binder"]["plugins"]["hamicore"].__setitem__("memory", "1g"), "Additional properties"),
    ],
)
def test_the_crd_check_catches_mistakes(kind, mutate, expected):
    lab = load_environment(REPO, "staging") if kind == "Config" else queue_lab("kai" if kind == "Queue" else "kueue")
    objects = all_queue_objects(lab)
    sample = _first([o for o in objects if o["metadata"]["name"] != "default-flavor"], kind) if kind != "ClusterQueue" else next(
        copy.deepcopy(o) for o in objects if o["kind"] == kind and o["metadata"]["name"] == "bench"
    )
    broken = copy.deepcopy(sample)
    mutate(broken)
    assert crd_errors(sample) == []
    assert any(expected in e for e in crd_errors(broken)), crd_errors(broken)

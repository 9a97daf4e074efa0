"""Synthetic projects of any size: N tenant files and a stack whose capacity grows with N.

Used by `bench/run.py` and by the 10,000-tenant test in `tests/hardening`. Every tenant is valid
and exercises the common builder branches (CPU/memory/GPU/MIG quotas, groups, a CI service
account, an extra namespace, egress, ingress from another tenant, a priority cap, a per-environment
override); the stack has three GPU classes (whole, time-sliced, MIG) sized so that the sum of the
quotas stays at about 80% of capacity (below the 90% warning).

    >>> files = project_files(3)
    >>> sorted(files)[:2]
    ['stacks/Pulumi.bench.yaml', 'tenants/team-00000.yaml']
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from components.spec.base import API_VERSION

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

STACK = "bench"
H100_PER_TENANT = 2
L4_PER_TENANT = 1  # time-sliced shares
MIG_PER_TENANT = 2  # 1g.10gb slices


def tenant_name(index: int) -> str:
    return f"team-{index:05d}"


# One team's file, as a person would write it (a format string: fast enough for 10,000 files).
TENANT_TEMPLATE = """\
apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: {name}
displayName: Team {index}
description: Synthetic tenant for benchmarks and scale tests.
costCenter: cc-{cost_center}
contacts:
  - name: Lead {index}
    email: lead{index}@example.com
namespaces: [{name}-data]
access:
  owners:
    groups: [{name}-leads]
  developers:
    groups: [{name}-eng]
    users: [dev{index}@example.com]
  viewers:
    groups: [everyone]
  ciServiceAccounts:
    - name: ci
      role: developer
quota:
  cpu: {{requests: "32", limits: "64"}}
  memory: {{requests: 256Gi, limits: 512Gi}}
  gpu: {{h100: {h100}, l4: {l4}}}
  mig: {{1g.10gb: {mig}}}
  objects: {{pods: 200, services: 20, servicesLoadBalancers: 0}}
  priorityClasses:
    training: {{gpu: {h100}}}
network:
  ingressFrom:
    platform: [monitoring]
    ports: [{{port: 8080}}]
    tenants: [{neighbour}]
  egress:
    - cidr: 10.20.0.0/16
      ports: [{{port: 443}}]
      description: object storage
gpu:
  classes: [h100, l4, a100-mig]
environments:
  {stack}:
    quota:
      objects: {{pods: 250}}
"""


def tenant_text(index: int, count: int) -> str:
    """One valid tenant; `count` (the fleet size) lets it name a neighbour in its ingress rule."""
    text = TENANT_TEMPLATE.format(
        name=tenant_name(index), index=index, cost_center=index % 97, h100=H100_PER_TENANT, l4=L4_PER_TENANT,
        mig=MIG_PER_TENANT, neighbour=tenant_name((index + 1) % count), stack=STACK,
    )
    return text if count > 1 else text.replace(f"    tenants: [{tenant_name(0)}]\n", "")


def stack_data(count: int, *, scheduler: str = "kueue") -> dict:
    """A stack with enough capacity for `count` synthetic tenants (about 80% full)."""
    h100_nodes = max(1, math.ceil(count * H100_PER_TENANT / 8 / 0.8))
    l4_nodes = max(1, math.ceil(count * L4_PER_TENANT / (2 * 4) / 0.8))  # 2 GPUs x 4 replicas per node
    mig_nodes = max(1, math.ceil(count * MIG_PER_TENANT / (8 * 7) / 0.8))  # 8 GPUs x 7 slices per node
    platform = {
        "apiVersion": API_VERSION,
        "labelDomain": "gpu.example.com",
        "podSecurity": {"level": "baseline", "version": "latest"},
        "platformAdminGroup": "platform-admins",
        "platformNamespaces": {"ingress": ["ingress-nginx"], "monitoring": ["monitoring"]},
        "platformPorts": {"monitoring": [{"port": 9090}]},
        "gpuClasses": {
            "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
            "l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing",
                   "timeSlicing": {"replicas": 4}},
            "a100-mig": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"},
        },
        # Every synthetic tenant shares the time-sliced L4s, as a dense real fleet would; accepted, so
        # the fleet validates without warnings.
        "gpuSharing": {"acknowledgeNoMemoryBound": ["l4"]},
        "nodePools": {
            "h100": {"gpuClass": "h100", "gpusPerNode": 8, "nodes": [f"h100-{i:05d}" for i in range(h100_nodes)]},
            "l4": {"gpuClass": "l4", "gpusPerNode": 2, "nodes": [f"l4-{i:05d}" for i in range(l4_nodes)]},
            "a100-mig": {"gpuClass": "a100-mig", "gpusPerNode": 8, "nodes": [f"mig-{i:05d}" for i in range(mig_nodes)],
                         "migLayout": "all-1g.10gb"},
        },
        "limitRangeDefaults": {"defaultRequest": {"cpu": "250m", "memory": "512Mi"}, "default": {"cpu": "2", "memory": "4Gi"}},
        "tenants": "all",
        "scheduler": scheduler,
    }
    return {"config": {"gpu-tenancy:platform": platform}}


def dump(data: dict) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def project_files(count: int, *, scheduler: str = "kueue") -> dict[str, str]:
    """Relative path -> text of a project with `count` tenants and the stack `bench`."""
    files = {f"stacks/Pulumi.{STACK}.yaml": dump(stack_data(count, scheduler=scheduler))}
    for index in range(count):
        files[f"tenants/{tenant_name(index)}.yaml"] = tenant_text(index, count)
    return dict(sorted(files.items()))


def write_project(root: Path, count: int, *, scheduler: str = "kueue") -> Path:
    """Write the project under `root` (created); return `root`."""
    for relative, text in project_files(count, scheduler=scheduler).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root

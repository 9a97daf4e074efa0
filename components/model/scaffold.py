"""`tenants new`: a commented, valid tenant file for a new team, ready for a pull request."""

from __future__ import annotations

import json
import re

from .base import API_VERSION, DNS_LABEL_PATTERN
from .problems import InvalidInput, Problem
from .yaml_source import parse_yaml


def _flow(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def new_tenant_file(
    name: str,
    *,
    owner_groups: list[str],
    developer_groups: list[str] = (),
    viewer_groups: list[str] = (),
    display_name: str | None = None,
    cost_center: str = "unassigned",
    email: str | None = None,
    gpu_classes: list[str] = (),
) -> str:
    """Text of `tenants/<name>.yaml`, checked against the file format before it is returned.

    >>> "name: team-x" in new_tenant_file("team-x", owner_groups=["team-x-leads"])
    True
    """
    display = f"tenants/{name}.yaml"
    if not re.match(DNS_LABEL_PATTERN, name) or len(name) > 40:
        raise InvalidInput([Problem(display, 0, 0, "name", f"'{name}' is not a valid tenant name: use lower-case letters, digits and '-', at most 40 characters, starting and ending with a letter or digit")])
    title = display_name or name.replace("-", " ").title()
    contact = f"\n  - email: {json.dumps(email)}" if email else " []"
    text = f"""# yaml-language-server: $schema=../docs/schema/tenant.schema.json
# Tenant file: one per team. Edit it in a pull request; `tenants validate` checks it and the PR
# comment shows what changes on the cluster. Reference: docs/file-format.md
apiVersion: {API_VERSION}
kind: Tenant
name: {name}                      # also the team's namespace; never rename without previousNames
displayName: {json.dumps(title)}
costCenter: {json.dumps(cost_center)}
contacts:{contact}
lifecycle: active                 # suspended: existing pods keep running, no new pods are admitted
access:
  owners:                         # manage workloads and secrets, bind developers/viewers
    groups: {_flow(owner_groups)}
  developers:                     # create and change workloads
    groups: {_flow(list(developer_groups))}
  viewers:                        # read-only, no secrets
    groups: {_flow(list(viewer_groups))}
quota:                            # what may be *declared* (admission); not a runtime limit
  cpu: {{requests: "8", limits: "16"}}
  memory: {{requests: 32Gi, limits: 64Gi}}   # container memory, never GPU memory
  gpu: 0                          # whole GPUs; per class, e.g. {{h100: 4}}, when several classes are allowed
  objects: {{pods: 50, services: 10, servicesLoadBalancers: 0}}
network:                          # default deny; same-namespace traffic and DNS are always allowed
  ingressFrom:
    platform: []                  # e.g. [ingress, monitoring]
    tenants: []                   # tenants whose pods may connect to ours
  egress: []                      # e.g. [{{cidr: 10.20.0.0/16, ports: [{{port: 443}}]}}]
gpu:
  classes: {_flow(list(gpu_classes))}
environments: {{}}                 # e.g. {{dev: {{quota: {{gpu: 1}}}}}}
"""
    from .load import validate_tenant

    validate_tenant(parse_yaml(text, display))
    return text

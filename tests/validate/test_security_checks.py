"""Validation of the isolation settings: located errors and warnings from check_tenant / check_platform."""

from __future__ import annotations

import yaml

from components.validate.platform import check_platform
from components.validate.tenant import check_tenant
from components.spec.stack import Platform
from components.spec.tenant import Tenant
from components.spec.yaml_source import parse_yaml

TENANT = """apiVersion: gpu-tenancy.dev/v1alpha2
kind: Tenant
name: team
displayName: Team
costCenter: cc-1
"""


def _tenant(extra: str) -> tuple[Tenant, object]:
    text = TENANT + extra
    return Tenant.model_validate(yaml.safe_load(text)), parse_yaml(text, "tenants/team.yaml")


def _platform(**fields) -> Platform:
    return Platform.model_validate({"labelDomain": "gpu.example.com", "platformNamespaces": {"monitoring": ["monitoring"]}, **fields})


def _messages(problems) -> list[str]:
    return [str(p) for p in problems]


def test_platform_ingress_needs_ports_from_the_grant_or_the_stack():
    tenant, doc = _tenant("network:\n  ingressFrom:\n    platform: [monitoring]\n")
    messages = _messages(check_tenant(tenant, doc, _platform()))
    assert messages == ["tenants/team.yaml:8:16: network.ingressFrom.platform[0]: ingress from platform role 'monitoring' names no "
                        "ports and the stack's platformPorts has none for it; write {role: monitoring, ports: [{port: 8080}]} "
                        "(a grant never opens every port)"]
    assert check_tenant(tenant, doc, _platform(platformPorts={"monitoring": [{"port": 9090}]})) == []
    tenant, doc = _tenant("network:\n  ingressFrom:\n    platform: [{role: monitoring, ports: [{port: 9090}]}]\n")
    assert check_tenant(tenant, doc, _platform()) == []


def test_api_server_egress_needs_the_stack_endpoints():
    tenant, doc = _tenant("network:\n  apiServer: true\n")
    assert _messages(check_tenant(tenant, doc, _platform())) == [
        "tenants/team.yaml:7:3: network.apiServer: the stack declares no API server endpoints (clusterNetwork.apiServer); "
        "ask the platform team to add them"]
    assert check_tenant(tenant, doc, _platform(clusterNetwork={"apiServer": {"cidrs": ["10.0.0.1/32"]}})) == []


def test_egress_may_not_overlap_cluster_ranges_unless_excepted():
    platform = _platform(clusterNetwork={"pods": ["10.244.0.0/16"], "services": ["fd00:96::/108"]})
    tenant, doc = _tenant("network:\n  egress:\n    - cidr: 10.0.0.0/8\n")
    assert _messages(check_tenant(tenant, doc, platform)) == [
        "tenants/team.yaml:8:7: network.egress[0].cidr: 10.0.0.0/8 overlaps the cluster's pods range 10.244.0.0/16: egress "
        "rules are for destinations outside the cluster (pods are reached by tenant grants); narrow the CIDR or add "
        "10.244.0.0/16 to `except`"]
    tenant, doc = _tenant("network:\n  egress:\n    - cidr: 10.0.0.0/8\n      except: [10.244.0.0/16]\n    - cidr: 192.168.0.0/16\n")
    assert check_tenant(tenant, doc, platform) == []


def test_old_pod_security_pin_and_untainted_static_pools_are_warned_about():
    text = ("config:\n  gpu-tenancy:platform:\n    labelDomain: gpu.example.com\n    kubernetesVersion: v1.36\n"
            "    podSecurity: {version: v1.33}\n    gpuClasses:\n      h100: {model: H100-80GB, product: P, memory: 80Gi}\n"
            "    nodePools:\n      p: {gpuClass: h100, gpusPerNode: 8, nodes: [n1], patchTaints: false}\n")
    platform = Platform.model_validate(yaml.safe_load(text)["config"]["gpu-tenancy:platform"])
    problems = check_platform(platform, parse_yaml(text, "stacks/Pulumi.x.yaml"))
    assert {p.severity for p in problems} == {"warning"}
    messages = _messages(problems)
    assert any("podSecurity.version: Pod Security is pinned to v1.33, older than the cluster (v1.36)" in m for m in messages)
    assert any("nodePools.p.patchTaints: static nodes are not tainted here" in m for m in messages)
    assert check_platform(platform.model_copy(update={"pod_security": platform.pod_security.model_copy(update={"version": "v1.36"})}),
                          parse_yaml(text, "stacks/Pulumi.x.yaml"))[0].message.startswith("static nodes")

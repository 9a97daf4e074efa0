from __future__ import annotations

from components.manifests.meta import TENANT_LABEL
from components.manifests.network_policy import network_policies

from .conftest import tenant_of


def _policies(objects: list[dict], namespace: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o["spec"] for o in objects if o["metadata"]["namespace"] == namespace}


def test_every_namespace_gets_the_same_policies(prod):
    tenant = tenant_of(prod, "inference")
    objects = network_policies(tenant, prod)
    first, second = (_policies(objects, ns) for ns in tenant.all_namespaces)
    assert first == second
    assert set(first) == {"default-deny", "allow-same-tenant", "allow-dns", "allow-from-platform", "allow-egress"}
    assert all(o["metadata"]["labels"][TENANT_LABEL] == "inference" for o in objects)


def test_default_deny_selects_every_pod_in_both_directions(prod):
    spec = _policies(network_policies(tenant_of(prod, "eval"), prod), "eval")["default-deny"]
    assert spec == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_same_tenant_traffic_is_selected_by_the_tenant_label(prod):
    spec = _policies(network_policies(tenant_of(prod, "llm-finetune"), prod), "llm-finetune-data")["allow-same-tenant"]
    peer = {"namespaceSelector": {"matchLabels": {TENANT_LABEL: "llm-finetune"}}}
    assert spec["ingress"] == [{"from": [peer]}]
    assert spec["egress"] == [{"to": [peer]}]
    assert spec["policyTypes"] == ["Ingress", "Egress"]


def test_dns_egress_to_the_cluster_dns_pods_only(prod):
    spec = _policies(network_policies(tenant_of(prod, "eval"), prod), "eval")["allow-dns"]
    assert spec["policyTypes"] == ["Egress"]
    assert spec["egress"] == [
        {
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        }
    ]


def test_dns_location_comes_from_the_stack(make_tenant, make_environment):
    env = make_environment(clusterDns={"namespace": "dns", "podLabels": {"app": "coredns"}})
    spec = _policies(network_policies(make_tenant(), env), "team-a")["allow-dns"]
    peer = spec["egress"][0]["to"][0]
    assert peer == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "dns"}},
                    "podSelector": {"matchLabels": {"app": "coredns"}}}


def test_ingress_from_listed_platform_roles_only(prod):
    spec = _policies(network_policies(tenant_of(prod, "eval"), prod), "eval")["allow-from-platform"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["ingress"] == [
        {"from": [{"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}]}}]}
    ]


def test_ingress_from_other_tenants_only_where_the_receiver_grants_it(prod):
    granted = _policies(network_policies(tenant_of(prod, "eval"), prod), "eval")["allow-from-tenants"]
    assert granted["ingress"] == [
        {
            "from": [{"namespaceSelector": {"matchExpressions": [{"key": TENANT_LABEL, "operator": "In", "values": ["llm-finetune"]}]}}],
            "ports": [{"protocol": "TCP", "port": 8080}],
        }
    ]
    # eval may reach llm-finetune only if llm-finetune says so; it does not.
    assert "allow-from-tenants" not in _policies(network_policies(tenant_of(prod, "llm-finetune"), prod), "llm-finetune")


def test_grant_without_ports_allows_every_port_and_ignores_self(make_tenant, make_environment):
    tenant = make_tenant(network={"ingressFrom": {"tenants": ["team-a", "team-b"]}})
    rule = _policies(network_policies(tenant, make_environment()), "team-a")["allow-from-tenants"]["ingress"][0]
    assert "ports" not in rule
    assert rule["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-b"]


def test_egress_rules_with_except_and_port_ranges(make_tenant, make_environment):
    tenant = make_tenant(
        network={"egress": [
            {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"], "ports": [{"port": 8000, "endPort": 8100}, {"port": 53, "protocol": "UDP"}]},
            {"cidr": "192.168.1.0/24"},
        ]}
    )
    spec = _policies(network_policies(tenant, make_environment()), "team-a")["allow-egress"]
    assert spec["policyTypes"] == ["Egress"]
    assert spec["egress"] == [
        {"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
         "ports": [{"protocol": "TCP", "port": 8000, "endPort": 8100}, {"protocol": "UDP", "port": 53}]},
        {"to": [{"ipBlock": {"cidr": "192.168.1.0/24"}}]},
    ]


def test_policies_with_nothing_to_allow_are_left_out(make_tenant, make_environment):
    tenant = make_tenant(network={"ingressFrom": {"platform": ["unknown-role"]}})
    names = set(_policies(network_policies(tenant, make_environment()), "team-a"))
    assert names == {"default-deny", "allow-same-tenant", "allow-dns"}

from __future__ import annotations

import dataclasses

from components.manifests.meta import NETWORK_RULES_ANNOTATION, TENANT_LABEL
from components.manifests.network_policy import (
    merged_policy_spec, metadata_excepts, network_policies, policy_specs,
)
from components.fleet.environment import LoadedTenant

from .example_tenants import tenant_of, viewed


def _named(*names: str) -> dict:
    return {"namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(names)}]}}


def _with_tenants(environment, *tenants):
    return dataclasses.replace(environment, tenants=[LoadedTenant(t, None) for t in tenants])


def _allowances(tenant, view) -> dict[str, dict]:
    """Each allowance as the policy it would be on its own (the merged policy holds their rules)."""
    return {name: {"podSelector": {}, "policyTypes": types, **rules} for name, types, rules in policy_specs(tenant, view)}


def _by_namespace(objects: list[dict]) -> dict[str, dict]:
    return {o["metadata"]["namespace"]: o for o in objects}


def test_every_namespace_gets_one_policy_holding_every_allowance(prod):
    tenant = tenant_of(prod, "inference")
    objects = _by_namespace(network_policies(tenant, prod.view(tenant)))
    assert set(objects) == set(tenant.all_namespaces)
    assert {o["metadata"]["name"] for o in objects.values()} == {"tenant-network"}
    first, second = (objects[ns]["spec"] for ns in tenant.all_namespaces)
    assert first == second
    assert set(viewed(_allowances, tenant, prod)) == {
        "default-deny", "allow-same-tenant", "allow-dns", "allow-from-platform", "allow-api-server", "allow-egress"}
    assert all(o["metadata"]["labels"][TENANT_LABEL] == "inference" for o in objects.values())


def test_the_merged_policy_is_the_union_of_the_allowances_rules_in_order(prod):
    """Policies selecting the same pods OR their rules: one policy with all rules allows the same."""
    for tenant in (tenant_of(prod, name) for name in ("eval", "inference", "llm-finetune")):
        allowances = viewed(_allowances, tenant, prod)
        merged = network_policies(tenant, prod.view(tenant))[0]
        assert merged["spec"]["policyTypes"] == ["Ingress", "Egress"]  # deny by default, both ways
        assert merged["spec"]["podSelector"] == {}
        for direction in ("ingress", "egress"):
            expected = [rule for spec in allowances.values() for rule in spec.get(direction, [])]
            assert merged["spec"].get(direction, []) == expected
        origins = merged["metadata"]["annotations"][NETWORK_RULES_ANNOTATION].split()
        for origin in origins:
            direction, rest = origin.split("[")
            index, name = rest.split("]=")
            assert merged["spec"][direction][int(index)] in allowances[name][direction]
        assert len(origins) == sum(len(merged["spec"].get(d, [])) for d in ("ingress", "egress"))


def test_a_tenant_with_nothing_allowed_is_denied_both_ways():
    spec, origins = merged_policy_spec([("default-deny", ["Ingress", "Egress"], {})])
    assert spec == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert origins == ""


def test_default_deny_selects_every_pod_in_both_directions(prod):
    spec = viewed(_allowances, tenant_of(prod, "eval"), prod)["default-deny"]
    assert spec == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


def test_same_tenant_traffic_is_selected_by_namespace_name(prod):
    """kubernetes.io/metadata.name is set by the API server; a tenant label can be put on any namespace."""
    spec = viewed(_allowances, tenant_of(prod, "llm-finetune"), prod)["allow-same-tenant"]
    peer = _named("llm-finetune", "llm-finetune-data")
    assert spec["ingress"] == [{"from": [peer]}]
    assert spec["egress"] == [{"to": [peer]}]
    assert spec["policyTypes"] == ["Ingress", "Egress"]


def test_dns_egress_to_the_cluster_dns_pods_and_the_node_local_cache_only(prod):
    spec = viewed(_allowances, tenant_of(prod, "eval"), prod)["allow-dns"]
    assert spec["policyTypes"] == ["Egress"]
    assert spec["egress"] == [
        {
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}},
                   {"ipBlock": {"cidr": "169.254.20.10/32"}}],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        }
    ]


def test_dns_location_comes_from_the_stack(make_tenant, make_environment):
    env = make_environment(clusterDns={"namespace": "dns", "podLabels": {"app": "coredns"}})
    spec = _allowances(make_tenant(), env.view(make_tenant()))["allow-dns"]
    peer = spec["egress"][0]["to"][0]
    assert peer == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "dns"}},
                    "podSelector": {"matchLabels": {"app": "coredns"}}}


def test_ingress_from_listed_platform_roles_only_on_named_ports(prod):
    spec = viewed(_allowances, tenant_of(prod, "eval"), prod)["allow-from-platform"]
    assert spec["policyTypes"] == ["Ingress"]
    assert spec["ingress"] == [{"from": [_named("monitoring")], "ports": [{"protocol": "TCP", "port": 9090}]}]
    # A grant's own ports win over the stack's platformPorts for the role.
    spec = viewed(_allowances, tenant_of(prod, "inference"), prod)["allow-from-platform"]
    assert spec["ingress"] == [
        {"from": [_named("ingress-nginx")], "ports": [{"protocol": "TCP", "port": 8000}]},
        {"from": [_named("monitoring")], "ports": [{"protocol": "TCP", "port": 9090}]},
    ]


def test_ingress_from_other_tenants_only_where_the_receiver_grants_it(prod):
    granted = viewed(_allowances, tenant_of(prod, "eval"), prod)["allow-from-tenants"]
    assert granted["ingress"] == [{"from": [_named("llm-finetune", "llm-finetune-data")], "ports": [{"protocol": "TCP", "port": 8080}]}]
    # eval may reach llm-finetune only if llm-finetune says so; it does not.
    assert "allow-from-tenants" not in viewed(_allowances, tenant_of(prod, "llm-finetune"), prod)


def test_a_grant_gives_the_sender_the_matching_egress(prod):
    """Under default-deny egress an ingress grant alone would do nothing: the sender gets the egress."""
    sender = viewed(_allowances, tenant_of(prod, "llm-finetune"), prod)["allow-to-tenants"]
    assert sender == {"podSelector": {}, "policyTypes": ["Egress"],
                      "egress": [{"to": [_named("eval")], "ports": [{"protocol": "TCP", "port": 8080}]}]}
    # Nobody granted eval or inference anything.
    for name in ("eval", "inference"):
        assert "allow-to-tenants" not in viewed(_allowances, tenant_of(prod, name), prod)


def test_grant_without_ports_allows_every_port_and_ignores_self(make_tenant, make_environment):
    tenant = make_tenant(network={"ingressFrom": {"tenants": ["team-a", "team-b"]}})
    other = make_tenant(name="team-b", namespaces=["team-b-data"])
    environment = _with_tenants(make_environment(), tenant, other)
    rule = _allowances(tenant, environment.view(tenant))["allow-from-tenants"]["ingress"][0]
    assert "ports" not in rule
    assert rule["from"] == [_named("team-b", "team-b-data")]
    assert _allowances(other, environment.view(other))["allow-to-tenants"]["egress"] == [{"to": [_named("team-a")]}]
    # A grant to a tenant that is not in the environment opens nothing.
    assert "allow-from-tenants" not in _allowances(tenant, _with_tenants(make_environment(), tenant).view(tenant))


def test_api_server_egress_is_an_opt_in_to_the_stack_endpoints(make_tenant, make_environment):
    environment = make_environment(clusterNetwork={"apiServer": {"cidrs": ["10.0.0.10/32", "10.0.0.11/32"], "ports": [{"port": 6443}]}})
    assert "allow-api-server" not in _allowances(make_tenant(), environment.view(make_tenant()))
    spec = viewed(_allowances, make_tenant(network={"apiServer": True}), environment)["allow-api-server"]
    assert spec["egress"] == [{"to": [{"ipBlock": {"cidr": "10.0.0.10/32"}}, {"ipBlock": {"cidr": "10.0.0.11/32"}}],
                               "ports": [{"protocol": "TCP", "port": 6443}]}]


def test_wide_egress_never_reaches_the_cloud_metadata_endpoints(make_tenant, make_environment):
    tenant = make_tenant(network={"egress": [
        {"cidr": "0.0.0.0/0"}, {"cidr": "::/0"}, {"cidr": "169.254.0.0/16", "except": ["169.254.169.0/24"]},
        {"cidr": "10.0.0.0/8"},
    ]})
    blocks = [r["to"][0]["ipBlock"] for r in _allowances(tenant, make_environment().view(tenant))["allow-egress"]["egress"]]
    assert blocks == [
        {"cidr": "0.0.0.0/0", "except": ["169.254.169.254/32"]},
        {"cidr": "::/0", "except": ["fd00:ec2::254/128"]},
        {"cidr": "169.254.0.0/16", "except": ["169.254.169.0/24"]},  # already excluded by the tenant's own except
        {"cidr": "10.0.0.0/8"},
    ]
    # Naming exactly the endpoint is the explicit grant.
    assert metadata_excepts("169.254.169.254/32", []) == []


def test_egress_rules_with_except_and_port_ranges(make_tenant, make_environment):
    tenant = make_tenant(
        network={"egress": [
            {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"], "ports": [{"port": 8000, "endPort": 8100}, {"port": 53, "protocol": "UDP"}]},
            {"cidr": "192.168.1.0/24"},
        ]}
    )
    spec = _allowances(tenant, make_environment().view(tenant))["allow-egress"]
    assert spec["policyTypes"] == ["Egress"]
    assert spec["egress"] == [
        {"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
         "ports": [{"protocol": "TCP", "port": 8000, "endPort": 8100}, {"protocol": "UDP", "port": 53}]},
        {"to": [{"ipBlock": {"cidr": "192.168.1.0/24"}}]},
    ]


def test_policies_with_nothing_to_allow_are_left_out(make_tenant, make_environment):
    # An unknown role, and a known one without ports (validate rejects both): never every port.
    tenant = make_tenant(network={"ingressFrom": {"platform": ["unknown-role", "monitoring"]}, "apiServer": True})
    names = set(_allowances(tenant, make_environment().view(tenant)))
    assert names == {"default-deny", "allow-same-tenant", "allow-dns"}

"""What the rendered NetworkPolicies mean, asked of the evaluator in network_reachability.py: every
pair of tenant namespaces, the cloud metadata endpoint, the API server, DNS and platform ingress.

Expectations come from the tenant and stack files, never from the builders' output."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from components.manifests.build import environment_objects
from components.fleet.environment import Environment, LoadedTenant

from .network_reachability import Address, Cluster, Pod, selects

METADATA_V4, METADATA_V6 = "169.254.169.254", "fd00:ec2::254"
PROBE_PORTS = (22, 443, 8000, 8080, 9090)


def _cluster(environment: Environment) -> Cluster:
    objects = [o for objs in environment_objects(environment).values() for o in objs]
    platform = environment.platform
    extra = {ns: {} for namespaces in platform.platform_namespaces.values() for ns in namespaces}
    extra[platform.cluster_dns.namespace] = {}
    extra["intruder"] = {"gpu-tenancy.dev/tenant": "eval"}  # anyone who can create namespaces can set labels
    return Cluster.from_objects(objects, extra)


@pytest.fixture(scope="module")
def prod_cluster(environments) -> Cluster:
    return _cluster(environments["prod"])


def _tenant_namespaces(environment: Environment) -> dict[str, str]:
    return {ns: t.name for t in environment.tenants for ns in t.spec.all_namespaces}


def _expected_between(environment: Environment, source: str, destination: str, port: int) -> bool:
    if source == destination:
        return True
    spec = next(t.spec for t in environment.tenants if t.name == destination)
    grant = spec.network.ingress_from
    if source not in grant.tenants:
        return False
    return not grant.ports or any(p.port <= port <= (p.end_port or p.port) and p.protocol == "TCP" for p in grant.ports)


def test_selector_semantics():
    assert selects({}, {"a": "b"}) and selects(None, {})
    assert selects({"matchExpressions": [{"key": "k", "operator": "NotIn", "values": ["x"]}]}, {})
    assert not selects({"matchExpressions": [{"key": "k", "operator": "In", "values": ["x"]}]}, {})
    assert selects({"matchExpressions": [{"key": "k", "operator": "DoesNotExist"}]}, {"j": "1"})


@pytest.mark.parametrize("env", ["prod", "dev", "staging"])
def test_every_pair_of_tenant_namespaces(environments, env):
    environment = environments[env]
    cluster = _cluster(environment)
    owner = _tenant_namespaces(environment)
    checked = 0
    for (src_ns, src), (dst_ns, dst) in itertools.product(owner.items(), repeat=2):
        for port in PROBE_PORTS:
            got = cluster.may_reach(Pod.of(src_ns, app="x"), Pod.of(dst_ns, app="y"), port)
            assert got == _expected_between(environment, src, dst, port), (src_ns, dst_ns, port)
            checked += 1
    assert checked == len(owner) ** 2 * len(PROBE_PORTS)
    # The grant is live in prod: llm-finetune reaches eval on 8080 and only there; eval never reaches back.
    if env == "prod":
        assert cluster.may_reach(Pod.of("llm-finetune-data"), Pod.of("eval"), 8080)
        assert not cluster.may_reach(Pod.of("llm-finetune"), Pod.of("eval"), 8081)
        assert not cluster.may_reach(Pod.of("eval"), Pod.of("llm-finetune"), 8080)


def test_a_namespace_labelled_as_a_tenant_gets_none_of_its_access(prod_cluster):
    for port in PROBE_PORTS:
        assert not prod_cluster.may_reach(Pod.of("intruder"), Pod.of("eval"), port)
        assert not prod_cluster.may_reach(Pod.of("eval"), Pod.of("intruder"), port)


def test_nobody_reaches_the_cloud_metadata_endpoint(environments):
    for env, environment in environments.items():
        cluster = _cluster(environment)
        for namespace in _tenant_namespaces(environment):
            for address in (METADATA_V4, METADATA_V6):
                assert not cluster.may_reach(Pod.of(namespace), Address(address), 80), (env, namespace, address)


def test_wide_egress_excludes_metadata_unless_named(make_tenant, make_environment):
    wide = make_tenant(name="wide", network={"egress": [{"cidr": "0.0.0.0/0"}, {"cidr": "::/0"}]})
    granted = make_tenant(name="granted", network={"egress": [{"cidr": "0.0.0.0/0"}, {"cidr": "169.254.169.254/32", "ports": [{"port": 80}]}]})
    environment = dataclasses.replace(make_environment(), tenants=[LoadedTenant(wide, None), LoadedTenant(granted, None)])
    cluster = Cluster.from_objects([o for objs in environment_objects(environment).values() for o in objs])
    assert cluster.may_reach(Pod.of("wide"), Address("8.8.8.8"), 443)
    assert cluster.may_reach(Pod.of("wide"), Address("2001:db8::1"), 443)
    assert not cluster.may_reach(Pod.of("wide"), Address(METADATA_V4), 80)
    assert not cluster.may_reach(Pod.of("wide"), Address(METADATA_V6), 80)
    assert cluster.may_reach(Pod.of("granted"), Address(METADATA_V4), 80)
    assert not cluster.may_reach(Pod.of("granted"), Address(METADATA_V4), 443)


def test_an_ip_block_matches_a_pod_by_its_address(make_tenant, make_environment):
    """As on the dataplane (kube-network-policies, upstream's NetworkPolicy e2e tests): a pod whose
    address lies in an egress CIDR is reached through it, even in a namespace no grant names; the
    lane gives pods addresses, the unit tests do not (selectors only)."""
    wide = make_tenant(name="wide", network={"egress": [{"cidr": "10.0.0.0/8", "ports": [{"port": 443}]}]})
    environment = dataclasses.replace(make_environment(), tenants=[LoadedTenant(wide, None)])
    cluster = Cluster.from_objects([o for objs in environment_objects(environment).values() for o in objs],
                                   {"kube-system": {}})
    metrics = (("app", "metrics"),)
    assert cluster.may_reach(Pod.of("wide"), Pod("kube-system", metrics, ip="10.244.0.20"), 443)
    assert not cluster.may_reach(Pod.of("wide"), Pod("kube-system", metrics, ip="10.244.0.20"), 8443)
    assert not cluster.may_reach(Pod.of("wide"), Pod("kube-system", metrics, ip="192.168.0.20"), 443)
    assert not cluster.may_reach(Pod.of("wide"), Pod("kube-system", metrics), 443)


def test_api_server_only_for_tenants_that_opt_in(environments):
    for env, environment in environments.items():
        cluster = _cluster(environment)
        api = environment.platform.cluster_network.api_server
        assert api is not None, env
        address = api.cidrs[0].split("/")[0]
        port = api.ports[0].port
        for loaded in environment.tenants:
            for namespace in loaded.spec.all_namespaces:
                assert cluster.may_reach(Pod.of(namespace), Address(address), port) == loaded.spec.network.api_server, (env, namespace)
                assert not cluster.may_reach(Pod.of(namespace), Address(address), port + 1)
    assert any(t.spec.network.api_server for t in environments["prod"].tenants)


def test_dns_reaches_the_cluster_dns_pods_and_node_local_cache_only(environments):
    for env, environment in environments.items():
        cluster = _cluster(environment)
        dns = environment.platform.cluster_dns
        dns_pod = Pod.of(dns.namespace, **dns.pod_labels)
        for namespace in _tenant_namespaces(environment):
            pod = Pod.of(namespace)
            for protocol in ("UDP", "TCP"):
                assert cluster.may_reach(pod, dns_pod, 53, protocol), (env, namespace)
            assert not cluster.may_reach(pod, dns_pod, 443)
            assert not cluster.may_reach(pod, Pod.of(dns.namespace, app="other"), 53, "UDP")
            if dns.node_local:
                assert cluster.may_reach(pod, Address(dns.node_local), 53, "UDP")
                assert not cluster.may_reach(pod, Address(dns.node_local), 80)


def test_platform_ingress_on_named_ports_only(prod_cluster, environments):
    environment = environments["prod"]
    platform = environment.platform
    for loaded in environment.tenants:
        grants = {}
        for grant in loaded.spec.network.ingress_from.platform:
            role, ports = (grant, []) if isinstance(grant, str) else (grant.role, grant.ports)
            grants[role] = {p.port for p in (ports or platform.platform_ports[role])}
        for role, namespaces in platform.platform_namespaces.items():
            for source in namespaces:
                for port in PROBE_PORTS:
                    want = port in grants.get(role, set())
                    assert prod_cluster.may_reach(Pod.of(source), Pod.of(loaded.name), port) == want, (loaded.name, role, port)
    # inference: the ingress controller on 8000 (its own grant), monitoring on 9090 (the stack's port).
    assert prod_cluster.may_reach(Pod.of("ingress-nginx"), Pod.of("inference"), 8000)
    assert not prod_cluster.may_reach(Pod.of("ingress-nginx"), Pod.of("inference"), 9090)

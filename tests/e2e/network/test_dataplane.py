"""Every example stack's NetworkPolicies enforced by kube-network-policies on real packets, and
every cell compared with the project's evaluator (tests/manifests/network_reachability.py).

A cell is (source, destination, protocol, port): pods of every tenant namespace, of the platform
namespaces, of a namespace labelled as a tenant by someone who is not one, the cluster DNS pod and
another kube-system pod; outside addresses for the API server, the node-local DNS cache, the
metadata endpoint, each egress CIDR and one address no policy names; the ports the policies name
plus one they do not, over TCP and UDP. Expectations come from the evaluator, never from the agent.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from components.manifests.build import environment_objects
from components.load import load_environment
from tests.e2e.network.dataplane import NODE_NAME, Agent, Relay, Topology, agent_binary
from tests.e2e.network.plan import Cell, Plan, PlannedEndpoint, plan_stack, pod_ranges
from tools.control_plane import REPO_ROOT

pytestmark = pytest.mark.network

STACKS = ("prod", "staging", "dev")
AGENT_ACCOUNT = ("kube-system", "kube-network-policies")
READY_WITHIN = 90.0   # seconds for the agent to sync its caches and answer the queue


@pytest.fixture(scope="module")
def credentials(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The agent's in-cluster credentials: a ServiceAccount with the read-only grants upstream's
    install.yaml gives it (list/watch pods, namespaces, NetworkPolicies), a token and the CA."""
    namespace, name = AGENT_ACCOUNT
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["pods", "namespaces"], "verbs": ["list", "watch"]},
                      {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list", "watch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    for obj in ({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}},
                role, binding):
        control_plane.apply(obj)
    token = k8s.CoreV1Api(control_plane.api_client).create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
    directory = tmp_path_factory.mktemp("serviceaccount")
    (directory / "token").write_text(token)
    (directory / "ca.crt").write_bytes(Path(control_plane.ca_file).read_bytes())
    (directory / "namespace").write_text(namespace)
    for path in directory.iterdir():
        path.chmod(0o600)
    return directory


def _render(stack: str, known: Iterable[dict[str, Any]] = ()) -> tuple[Plan, list[dict[str, Any]]]:
    """The example stack's rendered objects (the pure builders, offline) plus `known`, and the
    lane's plan for them."""
    environment = load_environment(REPO_ROOT, stack)
    objects = [o for objs in environment_objects(environment).values() for o in objs] + list(known)
    return plan_stack(stack, environment, objects), objects


def _reset(apiserver: Any) -> None:
    """No NetworkPolicy and no pod left from the previous stack (only this lane creates them)."""
    core, net = k8s.CoreV1Api(apiserver.api_client), k8s.NetworkingV1Api(apiserver.api_client)
    for policy in net.list_network_policy_for_all_namespaces().items:
        net.delete_namespaced_network_policy(policy.metadata.name, policy.metadata.namespace)
    for pod in core.list_pod_for_all_namespaces().items:
        core.delete_namespaced_pod(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0)
    apiserver.wait_for(lambda: not core.list_pod_for_all_namespaces().items
                       and not net.list_network_policy_for_all_namespaces().items,
                       timeout=60, what="pods and NetworkPolicies of the previous stack gone")


def _probe_pod(endpoint: PlannedEndpoint) -> dict[str, Any]:
    """A pod bound to the lane's node that no kubelet runs; valid under PodSecurity `restricted`."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"probe-{endpoint.name}", "namespace": endpoint.namespace,
                     "labels": dict(endpoint.labels)},
        "spec": {
            "nodeName": NODE_NAME,
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "probe", "image": "registry.invalid/probe:never-pulled",
                            "securityContext": {"allowPrivilegeEscalation": False,
                                                "capabilities": {"drop": ["ALL"]}}}],
        },
    }


def _apply_stack(apiserver: Any, plan: Plan, objects: list[dict[str, Any]]) -> None:
    """The stack's Namespaces and NetworkPolicies (as the program applies them), the namespaces it
    does not render, and one pod per planned pod endpoint whose status carries its lane address."""
    rendered = [o for o in objects if o["kind"] in ("Namespace", "NetworkPolicy")]
    refused = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"], r.reason)
               for o, r in apiserver.apply_rendered(rendered) if isinstance(r, ApiException)]
    assert not refused, f"{plan.stack}: the API server refused {refused}"
    for name, labels in plan.extra_namespaces.items():
        apiserver.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}},
                        field_manager="dataplane-lane")
    core = k8s.CoreV1Api(apiserver.api_client)
    for endpoint in (e for e in plan.endpoints if e.is_pod):
        apiserver.wait_for(lambda: core.read_namespaced_service_account("default", endpoint.namespace),
                           what=f"ServiceAccount {endpoint.namespace}/default")
        pod = core.create_namespaced_pod(endpoint.namespace, _probe_pod(endpoint))
        core.patch_namespaced_pod_status(pod.metadata.name, endpoint.namespace, {"status": {
            "phase": "Running", "podIP": endpoint.addresses[0], "podIPs": [{"ip": a} for a in endpoint.addresses]}})


def _sentinel(plan: Plan) -> Cell:
    """An allowed cell between two pods no policy isolates: it proves the agent answers the queue."""
    return next(c for c in plan.cells if c.expected and c.source.is_pod and c.destination.is_pod
                and c.source.namespace == c.destination.namespace == "kube-system")


def _as_probes(cells: list[Cell]) -> list[tuple[str, str, str, int]]:
    return [(c.source.name, c.destination.address(c.family), c.protocol, c.port) for c in cells]


def _wait_until_enforcing(topology: Topology, agent: Agent, sentinel: Cell) -> float:
    start = time.monotonic()
    while time.monotonic() - start < READY_WITHIN:
        assert agent.alive(), f"kube-network-policies exited:\n{agent.log_text()[-3000:]}"
        if topology.probe(_as_probes([sentinel]), timeout=1.0) == [sentinel.destination.name]:
            return time.monotonic() - start
    raise AssertionError(f"the agent did not answer {sentinel} within {READY_WITHIN}s:\n"
                         f"{agent.log_text()[-3000:]}\n{topology.node_state()}")


def _agent_verdicts(log: str) -> dict[str, int]:
    """How many packets the agent judged, by verdict (its -v=2 log has one line per packet)."""
    counts: dict[str, int] = {}
    for line in log.splitlines():
        if '"Finished syncing packet"' in line and 'verdict="' in line:
            verdict = line.split('verdict="', 1)[1].split('"', 1)[0]
            counts[verdict] = counts.get(verdict, 0) + 1
    return counts


def test_every_endpoint_has_an_allowed_cell_both_ways():
    """A denied cell means a dropped packet only if the wires work: every endpoint of every stack
    sends and receives in some cell the evaluator allows, so a broken site shows as a disagreement."""
    for stack in STACKS:
        plan, _ = _render(stack)
        for endpoint in plan.endpoints:
            assert any(c.expected and c.source == endpoint for c in plan.cells), (stack, endpoint.name, "sends")
            assert any(c.expected and c.destination == endpoint for c in plan.cells), (stack, endpoint.name, "receives")


def _verdict(answer: str | None, cell: Cell) -> str:
    if answer == cell.destination.name:
        return "allowed"
    return "denied" if answer is None else f"answered {answer!r}"


class Enforced:
    """A stack applied, its endpoints built, the agent enforcing: probe cells with `.judge`."""

    def __init__(self, plan: Plan, topology: Topology, agent: Agent, ready_after: float) -> None:
        self.plan, self.topology, self.agent, self.ready_after = plan, topology, agent, ready_after
        self.reprobed = 0   # unanswered cells of batches in which the kernel dropped packets

    def judge(self, cells: list[Cell], window: int = 256) -> list[str]:
        """The dataplane's verdict per cell: "allowed", "denied" or what went wrong.

        When the kernel drops queued packets itself (the agent's netlink socket full: a slow agent
        on busy cores), no policy decided them, so the unanswered cells of that batch are probed
        again in smaller batches until a batch runs without such drops."""
        answers: list[str | None] = [None] * len(cells)
        todo = list(range(len(cells)))
        while todo:
            suspect = []
            for start in range(0, len(todo), window):
                batch = todo[start:start + window]
                before = self.topology.queue_drops()
                got = self.topology.probe(_as_probes([cells[i] for i in batch]), window=window)
                for i, answer in zip(batch, got):
                    answers[i] = answer
                if self.topology.queue_drops() != before:
                    suspect += [i for i, answer in zip(batch, got) if answer is None]
            assert self.agent.alive(), f"kube-network-policies exited while probing:\n{self.agent.log_text()[-3000:]}"
            self.reprobed += len(suspect)
            todo, window = suspect, window // 2
            assert not todo or window >= 16, f"the kernel keeps dropping queued packets: {self.topology.queue_drops()}"
        return [_verdict(answer, cell) for cell, answer in zip(cells, answers)]


@contextmanager
def enforced(apiserver: Any, stack: str, credentials: Path, log: Path,
             known: Iterable[dict[str, Any]] = (), hidden: Iterable[dict[str, Any]] = ()) -> Iterator[Enforced]:
    """Apply `stack` plus `known` and `hidden` objects (the plan's evaluator sees `known`, not
    `hidden`), build its endpoints, check the queue is fail-closed, start the agent and wait until
    it enforces. Namespaces, the relay and the agent are gone afterwards, also on failure."""
    plan, objects = _render(stack, known)
    _reset(apiserver)
    _apply_stack(apiserver, plan, objects + list(hidden))
    topology = Topology()
    relay = agent = None
    try:
        for endpoint in plan.endpoints:
            topology.add_site(endpoint.name, endpoint.addresses)
        topology.steer_new_connections_to_queue()
        topology.serve(plan.probes)
        sentinel = _sentinel(plan)
        # Fail-closed: the queue has no reader yet, so even a connection every policy allows is dropped.
        assert topology.probe(_as_probes([sentinel]), timeout=1.5) == [None], \
            f"{sentinel} passed with no agent on the queue: the lane would not be fail-closed"
        relay = Relay(topology.node, ("127.0.0.1", apiserver.port))
        agent = Agent(agent_binary(), topology.node, relay.port, credentials, log)
        yield Enforced(plan, topology, agent, _wait_until_enforcing(topology, agent, sentinel))
    finally:
        if agent is not None:
            agent.stop()
        if relay is not None:
            relay.close()
        topology.close()


@pytest.mark.parametrize("stack", STACKS)
def test_every_cell_agrees_with_the_evaluator(control_plane, credentials, e2e_summary, tmp_path, stack):
    started = time.monotonic()
    with enforced(control_plane, stack, credentials, tmp_path / "agent.log") as lane:
        plan = lane.plan
        verdicts_of_cells = lane.judge(plan.cells)
        log = lane.agent.log_text()
        node_state = lane.topology.node_state()
    disagreements = [f"{cell}: dataplane {got}" for cell, got in zip(plan.cells, verdicts_of_cells)
                     if got != ("allowed" if cell.expected else "denied")]
    verdicts = _agent_verdicts(log)
    allowed, denied = plan.counts()
    total = len(plan.cells)
    e2e_summary.append(
        f"network dataplane {stack}: {total - len(disagreements)}/{total} cells agree with the evaluator "
        f"(allowed {allowed}, denied {denied}; {sum(c.family == 6 for c in plan.cells)} over IPv6; "
        f"{len(plan.endpoints)} endpoints, "
        f"{len(plan.probes)} protocol/ports); agent verdicts {verdicts.get('accept', 0)} accept, "
        f"{verdicts.get('drop', 0)} drop; {lane.reprobed} cells probed again after kernel queue drops; "
        f"enforcing after {lane.ready_after:.1f}s, its own nftables rules "
        f"{'refused by the kernel, tolerated' if 'syncing nftables rules' in log else 'accepted'}; "
        f"{time.monotonic() - started:.0f}s")
    assert not disagreements, (f"{stack}: {len(disagreements)} of {total} cells disagree:\n"
                               + "\n".join(disagreements[:60]) + f"\n{node_state}")
    # Nothing passes the queue unjudged (fail-closed, checked in `enforced`), so every allowed cell
    # and the sentinel are agent accepts (a SYN retransmitted under load may be judged twice), and
    # every denied cell is at least one agent drop.
    assert verdicts.get("accept", 0) >= allowed + 1, verdicts
    assert verdicts.get("drop", 0) >= denied, verdicts


def test_a_policy_the_evaluator_does_not_know_shows_as_disagreement(control_plane, credentials, tmp_path):
    """The comparison can fail: a NetworkPolicy applied behind the evaluator's back (every namespace
    may reach eval on the unnamed TCP port) turns exactly the cells from pods whose egress nothing
    isolates into eval on that port to "allowed", where the evaluator says "denied"."""
    unnamed = _render("prod")[0].probes[-2]
    assert unnamed[0] == "TCP"
    opened = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "opened-behind-the-evaluator", "namespace": "eval"},
              "spec": {"podSelector": {}, "policyTypes": ["Ingress"],
                       "ingress": [{"from": [{"namespaceSelector": {}}],
                                    "ports": [{"protocol": "TCP", "port": unnamed[1]}]}]}}
    with enforced(control_plane, "prod", credentials, tmp_path / "agent.log", hidden=[opened]) as lane:
        into_eval = [c for c in lane.plan.cells if c.destination.name == "eval" and (c.protocol, c.port) == unnamed]
        got = lane.judge(into_eval)
    # Pods that may egress anywhere (no policy of theirs isolates them) now reach eval on that port.
    unisolated = {"ingress-nginx", "monitoring", "intruder", "cluster-dns", "kube-system-other"}
    flipped = {c.source.name for c, verdict in zip(into_eval, got) if verdict == "allowed" and not c.expected}
    assert flipped == unisolated, (flipped, got)


def test_an_ip_block_over_pod_addresses_reaches_those_pods(control_plane, credentials, tmp_path):
    """Whether an ipBlock matches pods is the implementation's choice in the API's words; the
    reference agent matches them (as upstream's NetworkPolicy e2e tests expect), so the evaluator
    does too when it knows the pod's address. An egress rule of eval to the whole pod range on the
    unnamed port: eval's pods then reach every pod no ingress policy isolates on it, and no other."""
    plan, _ = _render("prod")
    unnamed = plan.probes[-2]
    pod_range = str(pod_ranges(load_environment(REPO_ROOT, "prod").platform.cluster_network.pods)[4])
    wide = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "egress-to-the-pod-range", "namespace": "eval"},
            "spec": {"podSelector": {}, "policyTypes": ["Egress"],
                     "egress": [{"to": [{"ipBlock": {"cidr": pod_range}}],
                                 "ports": [{"protocol": "TCP", "port": unnamed[1]}]}]}}
    with enforced(control_plane, "prod", credentials, tmp_path / "agent.log", known=[wide]) as lane:
        from_eval = [c for c in lane.plan.cells
                     if c.source.namespace == "eval" and c.destination.is_pod and (c.protocol, c.port) == unnamed]
        got = lane.judge(from_eval)
    disagreements = [f"{c}: dataplane {v}" for c, v in zip(from_eval, got) if v != ("allowed" if c.expected else "denied")]
    assert not disagreements, disagreements
    reached = {c.destination.name for c, v in zip(from_eval, got) if v == "allowed"}
    assert {"ingress-nginx", "monitoring", "intruder", "cluster-dns", "kube-system-other"} <= reached, reached

"""One stack of a project applied to a control plane the way a real cluster has it: the vendored
CRDs installed, the stack's static GPU nodes registered by their usual field managers, every
rendered object applied once (the e2e lanes' `prod_stack` fixture; tools/engine.py's LocalCluster
prepares a cluster with the same steps before `pulumi up`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from kubernetes.client.rest import ApiException

from tools.control_plane import REPO_ROOT, ControlPlane, k8s_client

# Managers that own node labels before we patch: the kubelet registering the
# node, the GPU Operator's default MIG config, GPU feature discovery.
KUBELET, GPU_OPERATOR, GFD = "kubelet", "gpu-operator", "gpu-feature-discovery"
# Custom resources the builders may emit; their CRDs are vendored in components/data.
CRD_DATA_DIRS = ("kueue", "kai-scheduler", "prometheus-operator", "gateway-api")


class AppliedStack:
    """One stack of the example project, applied to the session's control plane."""

    def __init__(self, environment: Any, objects: dict[str, list[dict[str, Any]]],
                 results: list[tuple[dict[str, Any], Any]], nodes_before: dict[str, dict[str, Any]],
                 crds: list[str]) -> None:
        self.environment = environment
        self.objects = objects              # environment_objects(): {"_platform": [...], tenant: [...]}
        self.results = results              # [(object, applied dict | ApiException)] of the first apply
        self.nodes_before = nodes_before    # Node objects as "registered", before our patches
        self.crds = crds                    # CRDs installed from components/data

    @property
    def all_objects(self) -> list[dict[str, Any]]:
        return [o for objs in self.objects.values() for o in objs]

    def of_kind(self, kind: str, owner: str | None = None) -> list[dict[str, Any]]:
        pool = self.objects[owner] if owner else self.all_objects
        return [o for o in pool if o["kind"] == kind]

    def find(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        for o in self.all_objects:
            meta = o["metadata"]
            if o["kind"] == kind and meta["name"] == name and meta.get("namespace") == namespace:
                return o
        raise KeyError(f"no rendered {kind} {namespace or ''}/{name}")

    def tenant(self, name: str) -> Any:
        return next(t.spec for t in self.environment.tenants if t.name == name)

    @staticmethod
    def render(stack: str, root: Path = REPO_ROOT) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
        """(Environment, environment_objects) of one stack of a project (offline, pure builders)."""
        from components.manifests.build import environment_objects
        from components.load import load_environment

        environment = load_environment(root, stack)
        return environment, environment_objects(environment)


def install_crds(cp: ControlPlane, timeout: float = 30.0) -> list[str]:
    """Apply the vendored CRDs (components/data/{kueue,kai-scheduler,prometheus-operator,gateway-api}) and wait until Established."""
    import yaml

    data = REPO_ROOT / "components" / "data"
    names = []
    for sub in CRD_DATA_DIRS:
        for path in sorted((data / sub).glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    cp.apply(doc, field_manager="e2e-crd-install")
                    names.append(doc["metadata"]["name"])
    ext = k8s_client.ApiextensionsV1Api(cp.api_client)

    def established(name: str) -> bool:
        conds = ext.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conds)

    for name in names:
        cp.wait_for(lambda n=name: established(n), timeout=timeout, what=f"CRD {name} Established")
    cp.dynamic.resources.invalidate_cache()
    return names


def register_nodes(cp: ControlPlane, environment: Any, registered: Iterable[str] = (), only: Any = None) -> None:
    """Create the stack's static GPU nodes the way a cluster has them before we patch: all but the
    `registered` ones (a kept cluster gets only the nodes its stack gained), and only those in
    `only`, if given (a node joining later).

    The kubelet registers each node with its own labels; the GPU Operator sets
    its default MIG config label and GFD the GPU product, each as its own
    field manager (Update operations), so the test can see that our patches
    take over exactly our keys and leave theirs alone.
    """
    core = k8s_client.CoreV1Api(cp.api_client)
    platform, known = environment.platform, set(registered)
    for pool in platform.node_pools.values():
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        for node in (n for n in pool.nodes if n not in known and (only is None or n in only)):
            cp.create_node(node, {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                                  "node.kubernetes.io/instance-type": "gpu-e2e"}, field_manager=KUBELET)
            # The GPU Operator's default MIG config and one of its operand labels (it labels GPU nodes
            # `nvidia.com/gpu.deploy.<operand>=true` for the daemonsets it runs there).
            core.patch_node(node, {"metadata": {"labels": {"nvidia.com/mig.config": "all-disabled",
                                                           "nvidia.com/gpu.deploy.mig-manager": "true"}}},
                            field_manager=GPU_OPERATOR)
            if gpu_class is not None and gpu_class.product is not None:   # none on the GPU Operator's DRA stack (no GFD)
                core.patch_node(node, {"metadata": {"labels": {"nvidia.com/gpu.product": gpu_class.product}}},
                                field_manager=GFD)


def apply_example_stack(apiserver: ControlPlane, stack_name: str = "prod") -> AppliedStack:
    """One stack of the example project (prod by default): CRDs installed, static GPU nodes
    registered, every rendered object applied once (server-side apply, field manager
    gpu-tenancy), quotas and policies settled.

    Rejected objects do not fail the fixture: they are in `.results` for
    test_tenancy_apply.py to report; the other tests then fail on what is missing.
    """
    environment, objects = AppliedStack.render(stack_name)
    crds = install_crds(apiserver)
    apiserver.create_namespace("gpu-operator")  # the GPU Operator's namespace (MIG/time-slicing ConfigMaps)
    if environment.platform.monitoring is not None:  # kube-prometheus-stack's namespace (PrometheusRule, dashboards)
        apiserver.create_namespace(environment.platform.monitoring.namespace)
    register_nodes(apiserver, environment)
    core = k8s_client.CoreV1Api(apiserver.api_client)
    nodes_before = {n.metadata.name: apiserver.api_client.sanitize_for_serialization(n)
                    for n in core.list_node().items}
    stack = AppliedStack(environment, objects, [], nodes_before, crds)
    stack.results = apiserver.apply_rendered(stack.all_objects)
    apiserver.wait_namespaces_ready(stack.all_objects)
    wait_policies_typechecked(apiserver, stack.all_objects)
    wait_policies_in_force(apiserver)
    return stack


def wait_policies_typechecked(cp: ControlPlane, objects: Iterable[dict[str, Any]]) -> None:
    """Wait until the status controller has type-checked every ValidatingAdmissionPolicy among `objects`."""
    adm = k8s_client.AdmissionregistrationV1Api(cp.api_client)

    def typechecked(name: str) -> bool:
        p = adm.read_validating_admission_policy(name)
        return p.status is not None and p.status.observed_generation == p.metadata.generation

    for vap in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"):
        cp.wait_for(lambda n=vap["metadata"]["name"]: typechecked(n), what=f"type checking of {vap['metadata']['name']}")


# The canary's name: a ConfigMap by this name is what its policy refuses, nothing else.
CANARY = "gpu-tenancy-policies-in-force"


def wait_policies_in_force(cp: ControlPlane, timeout: float = 60.0) -> None:
    """Wait until the API server enforces every admission policy and binding applied so far.

    The API server accepts a policy and its binding before its admission plugin has them: its
    informers deliver them a moment later (seen: a refusal the stack owes, admitted right after the
    apply). A canary policy + binding refusing one ConfigMap name is applied last; once a dry-run
    create of that ConfigMap is refused, the plugin's policy and binding informers have delivered
    every event before the canary's (a watch delivers one kind in resourceVersion order) and it
    recompiles the whole set from them, so every earlier policy is in force too. Then the canary is
    removed. For example, after `cp.apply_rendered(objects)`: `wait_policies_in_force(cp)`.
    """
    adm = k8s_client.AdmissionregistrationV1Api(cp.api_client)
    core = k8s_client.CoreV1Api(cp.api_client)
    name = f"{CANARY}-{time.monotonic_ns()}"
    adm.create_validating_admission_policy({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                         "resources": ["configmaps"]}]},
                 "validations": [{"expression": f"object.metadata.name != '{CANARY}'", "message": "canary"}]}})
    adm.create_validating_admission_policy_binding({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]}})

    def refused() -> bool:
        try:
            core.create_namespaced_config_map("default", {"metadata": {"name": CANARY}}, dry_run="All")
        except ApiException as exc:
            return exc.status in (403, 422) and name in (exc.body or "")
        return False

    try:
        cp.wait_for(refused, timeout=timeout, interval=0.1, what="the admission policies applied so far in force (canary)")
    finally:
        adm.delete_validating_admission_policy_binding(name)
        adm.delete_validating_admission_policy(name)


def apply_tenant(cp: ControlPlane, objects: list[dict[str, Any]]) -> None:
    """Apply one tenant's rendered objects next to an applied stack (a tenant a test module makes,
    in that stack's inventory): none refused, its namespaces ready, its own admission policies
    type-checked without warnings."""
    results = cp.apply_rendered(objects)
    failed = [(o["kind"], o["metadata"]["name"], r) for o, r in results if isinstance(r, ApiException)]
    assert not failed, failed
    cp.wait_namespaces_ready(objects)
    adm = k8s_client.AdmissionregistrationV1Api(cp.api_client)
    for vap in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"):
        def checked(name=vap["metadata"]["name"]):
            status = adm.read_validating_admission_policy(name).status
            return status is not None and status.type_checking is not None and status
        status = cp.wait_for(checked, what=f"type checking of {vap['metadata']['name']}")
        assert not (status.type_checking.expression_warnings or []), status.type_checking.expression_warnings
    wait_policies_in_force(cp)


def remove_tenant(cp: ControlPlane, objects: list[dict[str, Any]]) -> None:
    """Delete what `apply_tenant` applied: its namespaces (with everything in them) and its cluster-scoped objects."""
    for obj in objects:
        if obj["kind"] == "Namespace":
            cp.delete_namespace(obj["metadata"]["name"])
        elif "namespace" not in obj["metadata"]:
            resource = cp.dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            try:
                cp.dynamic.delete(resource, name=obj["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    raise

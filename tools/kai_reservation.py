"""A stand-in for KAI's GPU reservation pod on kwok's nodes: it publishes the GPU a reservation pod holds.

How KAI places a GPU share (`gpu-fraction` annotation, KAI v0.17 at the snapshot tools/build.sh
builds; pkg/binder/binding/resourcereservation): the scheduler puts the share into a *GPU group*
of a node; for the first share of a group the binder creates a **reservation pod** in
`kai-resource-reservation` (`gpu-reservation-<hash>`, label `runai-gpu-group: <group>`,
`spec.nodeName` set, one `nvidia.com/gpu`) and waits (`--resource-reservation-allocation-timeout`,
40 s) until that pod carries the annotation `run.ai/reserve_for_gpu_index`. The pod's own program
(cmd/resourcereservation) writes it once the kubelet has started it: the UUID of the one GPU the
device plugin gave its container (NVML, `DeviceGetHandleByIndex(0)`). The binder then writes that
GPU into the share's ConfigMap (`NVIDIA_VISIBLE_DEVICES`) and binds the share; later shares of
the group find the reservation pod and its annotation and bind at once.

On kwok no container runs, so nothing would ever write the annotation and every share would fail
to bind. `ReservationStandIn` does the program's part: for each reservation pod kwok reports
Running it picks a GPU of the node that no other reservation pod there holds, and annotates the pod
with that GPU's UUID (stable per node and index, `device_uuid`). The device plugin's choice among
the node's free GPUs is not modelled: whole-GPU pods hold no device identity here, so only the
reservation pods' GPUs are kept apart (what the binder's sharing depends on).

kwok starts a pod 2-10 s after it is bound unless the pod's annotations say otherwise (its Stages'
defaults), and the binder creates the reservation pods without them. The binder holds the GPU
group's lock while it waits (and every bind to the node syncs the node's groups under those locks),
so that random start would also hold back whole-GPU pods bound to the node meanwhile: seconds of
wall time, minutes of a compressed replay. `reservation_start_policy` gives the reservation pods
the start the replay's own pods have (at once, `tools.runtime.start_at_once`), by a
MutatingAdmissionPolicy on the KAI reservation namespace: what a node with the image cached does.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Iterable

from tools.runtime import start_at_once

RESERVATION_NAMESPACE = "kai-resource-reservation"   # the binder's --resource-reservation-namespace default
RESERVATION_SERVICE_ACCOUNT = "kai-resource-reservation"   # its --resource-reservation-service-account default
GPU_INDEX_ANNOTATION = "run.ai/reserve_for_gpu_index"
GPU_GROUP_LABEL = "runai-gpu-group"
GPU_RESOURCE = "nvidia.com/gpu"
_UUIDS = uuid.UUID("6f1c1a52-5b0e-4c59-9d4a-000000000036")   # the namespace of the stand-in's device UUIDs


START_POLICY = "gpu-tenancy-kwok-reservation-start"


def reservation_start_policy(namespace: str = RESERVATION_NAMESPACE) -> list[dict[str, Any]]:
    """A MutatingAdmissionPolicy and its binding that annotate every pod created in `namespace`
    (KAI's reservation pods) to be started by kwok as soon as it is bound.

    >>> policy, binding = reservation_start_policy()
    >>> binding["spec"]["policyName"] == policy["metadata"]["name"] == START_POLICY
    True
    """
    annotations = ", ".join(f'"{key}": "{value}"' for key, value in sorted(start_at_once().items()))
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": START_POLICY},
        "spec": {
            "failurePolicy": "Fail", "reinvocationPolicy": "Never",
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            },
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                "expression": f"Object{{metadata: Object.metadata{{annotations: {{{annotations}}}}}}}"}}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": START_POLICY}, "spec": {"policyName": START_POLICY},
    }
    return [policy, binding]


def device_uuid(node: str, index: int) -> str:
    """The UUID the stand-in gives GPU `index` of `node`, in NVML's `GPU-<uuid>` form (stable across runs).

    >>> device_uuid("stg-a100-01", 0) == device_uuid("stg-a100-01", 0) != device_uuid("stg-a100-01", 1)
    True
    >>> device_uuid("n", 0).startswith("GPU-")
    True
    """
    return f"GPU-{uuid.uuid5(_UUIDS, f'{node}/{index}')}"


def free_device(node: str, gpus: int, held: Iterable[str]) -> str | None:
    """The UUID of the lowest-numbered GPU of `node` (of `gpus`) that no reservation pod holds; None if all are held.

    >>> free_device("n", 2, [device_uuid("n", 0)]) == device_uuid("n", 1)
    True
    >>> free_device("n", 1, [device_uuid("n", 0)]) is None
    True
    """
    taken = set(held)
    return next((u for u in (device_uuid(node, i) for i in range(gpus)) if u not in taken), None)


class ReservationStandIn:
    """Annotates KAI's Running reservation pods with a GPU of their node, as their program would: a thread.

    `published` maps each annotated pod (name) to the GPU UUID it was given, for the tests to read.
    """

    def __init__(self, cp: Any, namespace: str = RESERVATION_NAMESPACE, interval: float = 0.5) -> None:
        from kubernetes import client as k8s_client

        self.cp, self.namespace, self.interval = cp, namespace, interval
        self.core = k8s_client.CoreV1Api(cp.client_for("e2e-kai-reservation-stand-in", ["system:masters"]))
        self.published: dict[str, str] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kai-reservation-stand-in", daemon=True)

    def start(self) -> "ReservationStandIn":
        """Create the ServiceAccount the reservation pods run as (KAI's chart does; without it the API
        server refuses them) and apply `reservation_start_policy`, wait until a dry-run pod shows it
        in force, then start annotating."""
        from kubernetes.client.rest import ApiException

        try:
            self.core.create_namespaced_service_account(self.namespace, {"metadata": {"name": RESERVATION_SERVICE_ACCOUNT}})
        except ApiException as exc:
            if exc.status != 409:
                raise
        for manifest in reservation_start_policy(self.namespace):
            self.cp.apply(manifest, field_manager="e2e-kai-reservation-stand-in")
        self.cp.wait_for(self._starts_at_once, timeout=30, what=f"{START_POLICY} in force")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _starts_at_once(self) -> bool:
        probe = {"metadata": {"generateName": "start-policy-probe-"},
                 "spec": {"serviceAccountName": RESERVATION_SERVICE_ACCOUNT, "automountServiceAccountToken": False,
                          "containers": [{"name": "probe", "image": "registry.invalid/probe:1"}]}}
        created = self.core.create_namespaced_pod(self.namespace, probe, dry_run="All")
        return start_at_once().items() <= (created.metadata.annotations or {}).items()

    def _gpus(self, node: str) -> int:
        return int((self.core.read_node(node).status.allocatable or {}).get(GPU_RESOURCE, "0"))

    def publish_once(self) -> None:
        """Annotate every Running reservation pod that has no GPU yet (one pass)."""
        pods = self.core.list_namespaced_pod(self.namespace).items
        held: dict[str, list[str]] = {}
        for pod in pods:
            if (pod.metadata.annotations or {}).get(GPU_INDEX_ANNOTATION):
                held.setdefault(pod.spec.node_name, []).append(pod.metadata.annotations[GPU_INDEX_ANNOTATION])
        for pod in pods:
            if pod.status.phase != "Running" or (pod.metadata.annotations or {}).get(GPU_INDEX_ANNOTATION):
                continue
            node = pod.spec.node_name
            device = free_device(node, self._gpus(node), held.get(node, []))
            if device is None:   # the device plugin would not have started it: every GPU is reserved
                self._error(f"{pod.metadata.name} on {node}: no free GPU")
                continue
            self.core.patch_namespaced_pod(pod.metadata.name, self.namespace,
                                           {"metadata": {"annotations": {GPU_INDEX_ANNOTATION: device}}})
            held.setdefault(node, []).append(device)
            self.published[pod.metadata.name] = device

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.publish_once()
            except Exception as exc:   # a pod deleted between list and patch: the next pass sees the new state
                self._error(f"{type(exc).__name__}: {exc}"[:300])
            self._stop.wait(self.interval)

    def _error(self, text: str) -> None:
        if text not in self.errors:   # each pass would repeat it
            self.errors.append(text)

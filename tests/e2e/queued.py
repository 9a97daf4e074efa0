"""GPU pods of the real-apiserver lane as Kueue would leave them (helpers of its tests)."""

from __future__ import annotations


def queued(pod: dict) -> dict:
    """The pod as Kueue's pod webhook leaves it in a tenant namespace (this lane runs no Kueue): the
    LocalQueue label and the admission gate, which gpu-tenancy-kueue-queue wants on GPU pods of
    Kueue stacks. Not on a pod with `nodeName`, which the API server refuses to gate.

    >>> queued({"metadata": {"name": "p"}, "spec": {}})["spec"]["schedulingGates"]
    [{'name': 'kueue.x-k8s.io/admission'}]
    """
    if pod["spec"].get("nodeName"):
        return pod
    pod["metadata"].setdefault("labels", {}).setdefault("kueue.x-k8s.io/queue-name", "default")
    pod["spec"].setdefault("schedulingGates", [{"name": "kueue.x-k8s.io/admission"}])
    return pod

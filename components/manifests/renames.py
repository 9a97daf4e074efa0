"""What a rename through `previousNames` does on the cluster, in one sentence shared by the offline
diff (`tenants diff`, warning `tenant-renamed`) and the Pulumi program (a warning in `pulumi
preview`/`up`), so that a reviewer reads the same words in both.

Pulumi adopts a renamed tenant's resources through aliases, but an object whose Kubernetes name
carries the tenant's name (admission policies, cluster role binding, alert rules) gets a new name:
the engine deletes the old object and creates the new one. The old ClusterQueue is the exception:
it is kept, stopped (`components.manifests.kueue.departing_cluster_queue`), as Kueue would hold
its delete while workloads are admitted to it.
"""

from __future__ import annotations

import re
from typing import Iterable

from ..fleet.budget import budget_home
from ..spec.tenant import Tenant
from .meta import KubeObject


def renamed_objects(old: str, tenant: Tenant, objects: Iterable[KubeObject]) -> list[tuple[str, str]]:
    """(kind, old name) of each object outside the tenant's namespaces whose name carries the
    tenant's name: the objects a rename deletes and re-creates under the new name. A namespaced
    one is named `namespace/name`. Objects inside the tenant's namespaces keep their names.

    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="b", displayName="B",
    ...     costCenter="cc-1", previousNames=["a"])
    >>> renamed_objects("a", t, [{"kind": "ClusterQueue", "metadata": {"name": "b"}},
    ...     {"kind": "Role", "metadata": {"name": "tenant-b", "namespace": "b"}}])
    [('ClusterQueue', 'a')]
    """
    # The name as a whole token: "b" in "gpu-tenancy-guard-b" or "gpu-tenancy:b:viewer", not in "ab".
    token = re.compile(rf"(?<![a-z0-9]){re.escape(tenant.name)}(?![a-z0-9])")
    own = set(tenant.all_namespaces)
    objects = list(objects)
    # An object still built under the old name (a stopped ClusterQueue) is kept, not deleted.
    kept = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects}
    found = []
    for obj in objects:
        meta = obj["metadata"]
        namespace = meta.get("namespace")
        if (obj["kind"] == "Namespace" or namespace in own or meta["name"] in tenant.previous_names
                or not token.search(meta["name"])):
            continue
        name = token.sub(old, meta["name"])
        if (obj["kind"], namespace, name) in kept:
            continue
        found.append((obj["kind"], f"{namespace}/{name}" if namespace else name))
    return sorted(found)


def rename_message(old: str, tenant: Tenant, objects: Iterable[KubeObject], protect_namespaces: bool) -> str:
    """The warning about tenant `old` renamed to `tenant` (which lists it in `previousNames`).

    >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="b", displayName="B",
    ...     costCenter="cc-1", previousNames=["a"], namespaces=["a"])
    >>> rename_message("a", t, [{"kind": "ClusterQueue", "metadata": {"name": "b"}}], False)[:78]
    'tenant a is renamed to b (previousNames): Pulumi adopts its resources, but Kub'
    """
    name = tenant.name
    kept = old in tenant.namespaces
    if kept:
        namespaces = f" and {old} stays one of its namespaces"
        if budget_home(tenant) == old:
            namespaces += (f", keeping the tenant's compute and GPU budget until the team moves (namespace {name} "
                           f"gets none until then; docs/renaming.md)")
    else:
        namespaces = (f" and namespace {old} is RETAINED with its workloads and data, no longer managed; move them, "
                      f"or keep it by listing `namespaces: [{old}]`")
        if protect_namespaces:
            namespaces += ("; this stack protects namespaces, so `pulumi up` refuses to replace the protected "
                           "namespace until it is unprotected (`pulumi state unprotect`)")
    objects = list(objects)
    replaced = renamed_objects(old, tenant, objects)
    named = ""
    if any(o["kind"] == "ClusterQueue" and o["metadata"]["name"] == old and o["spec"].get("stopPolicy") == "HoldAndDrain"
           for o in objects):
        named += (f"; ClusterQueue {old} is not deleted but stopped (stopPolicy: HoldAndDrain): admitted workloads "
                  f"must finish before Kueue lets a ClusterQueue go, so Kueue evicts them and they requeue to "
                  f"ClusterQueue {name}; the empty queue is deleted when {old} leaves previousNames")
    if replaced:
        named += (f"; the objects named after {old} are DELETED and created under the new name: "
                 + ", ".join(f"{kind} {object_name}" for kind, object_name in replaced))
    return (f"tenant {old} is renamed to {name} (previousNames): Pulumi adopts its resources, but Kubernetes "
            f"cannot rename a namespace, so namespace {name} is created{namespaces}{named}")

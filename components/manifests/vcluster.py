"""The optional per-tenant vCluster: a Helm release description with values generated from the spec.

A vCluster is a virtual control plane running as pods in the tenant's own namespace; the pods
created inside it are synced to that host namespace and run there under the namespace's
ResourceQuota, LimitRange, NetworkPolicies, Pod Security and GPU placement policy. The values
below make it say so from the inside too (keys of the chart's values.schema.json, v0.36.1):

* `sync.fromHost.nodes`: real nodes, synced only where the vCluster's pods run, except for a tenant
  with dedicated pools, whose nodes are synced by `<labelDomain>/tenant: <tenant>`. The selector
  labels also become the node selector of every synced pod, CPU-only ones included (its CoreDNS,
  its workloads' CPU pods): on dedicated nodes that is right, as they carry only the tenant's taint,
  which the synced pods tolerate (below). Shared pools carry the GPU taint, which a CPU-only pod may
  not tolerate (the placement policy), so a selector onto them (`<labelDomain>/gpu-class: <class>`,
  as before) left the vCluster's CPU pods no node at all, CPU nodes or not (seen on the runtime
  lane); without one, its CPU pods run on the cluster's CPU nodes like the tenant's own, and its
  GPU pods are placed as the host's are (their own selector or their Kueue flavor, checked by the
  placement policy). `syncBackChanges` stays off, so nothing in the vCluster can edit host node
  labels or taints;
* `sync.toHost.pods.enforceTolerations`: the dedicated-pool taint `<labelDomain>/tenant=<tenant>`;
* `sync.toHost.pods.priorityClassName`: the tenant's `vcluster.priorityClassName`, if set;
* `sync.fromHost.priorityClasses` off (and `toHost` too): the chart has one rule for either sync,
  every verb on PriorityClasses cluster-wide, and whoever holds the vCluster's ServiceAccount token
  could create a class above every tenant's and preempt them. With both off the syncer drops a
  pod's `priorityClassName`, so the vCluster's pods run at `vcluster.priorityClassName` or at the
  host's default priority, and the host's PriorityClass-scoped quotas meter them there;
* `networking.advanced.proxyKubelets` off (`byHostname`, `byIP`): the chart's default gives the
  vCluster `get` on `nodes/proxy`, `nodes/stats` and `nodes/metrics` of every node, the kubelet
  API (exec into any pod of the cluster). The syncer then fakes no kubelet: what reads a node's
  kubelet from inside (node stats and metrics for metrics-server or Prometheus) finds none;
* `sync.toHost.{priorityClasses,namespaces,persistentVolumes,storageClasses}` off: each would let
  the vCluster create cluster-scoped host objects (a hostPath PersistentVolume reaches the node's
  disk);
* `policies.resourceQuota` / `policies.limitRange`: the tenant's own `tenant-quota` and LimitRange,
  mirrored. Every chart-default key the tenant does not set is `null`, which Helm deletes, so the
  chart's defaults (`count/pods: 20`, ...) never tighten the tenant's quota. Pulumi drops `None`
  from map inputs: hand the values to Helm as a file (`values_yaml`) so the nulls arrive;
* `policies.networkPolicy`: on, with `workload.publicEgress` off. NetworkPolicies add up, so the
  chart's default public egress would widen the tenant's default-deny; what remains are the
  rules the control plane and the workloads need to talk to each other and to the API server;
* `policies.podSecurityStandard`: the namespace's Pod Security level, checked inside the vCluster;
* DRA (`sync.toHost.{resourceClaims,resourceClaimTemplates}`, `sync.fromHost.deviceClasses`): on
  only for a tenant with a DeviceClass grant. Its claims are synced into the host namespace, where
  the host claim policy, RBAC and quota judge the syncer's copy as they judge the tenant's own
  (`components.manifests.claim_policy`); the tool-owned DeviceClasses the tenant may claim are
  synced in by label. Without a grant all three stay off: DRA does not exist inside the vCluster,
  and the host quota pins every DeviceClass at 0 anyway.

The tenant's `vcluster.values` are merged last (maps merge, lists and scalars replace). Which keys
they may reach is one table, `components.validate.vcluster.VALUES`: the keys above are its
`platform` rules (overriding them is rejected by `tenants validate`), and anything not on its
allow-list is rejected too, because the chart turns values into host RBAC for the vCluster's
ServiceAccount.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import yaml

from ..fleet.facts import TenantView
from ..spec.tenant import Tenant
from .gpu_nodes import TAINT_EFFECT
from .limit_range import container_limits
from .claim_policy import claimable_device_classes
from .meta import gpu_class_label, platform_labels, tenant_label
from .namespace import pod_security_level
from .device_classes import device_class_hard
from .quota import compute_hard, ephemeral_storage_hard, gpu_hard, object_count_hard, storage_hard

RELEASE_NAME = "vcluster"
CHART = "vcluster"

# Keys of the chart's own `policies.resourceQuota.quota` and `policies.limitRange.{default,defaultRequest}`
# defaults. Helm merges user values over chart defaults, so each one we do not set is nulled.
CHART_QUOTA_DEFAULT_KEYS = (
    "count/configmaps", "count/endpoints", "count/persistentvolumeclaims", "count/pods", "count/secrets",
    "count/services", "limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
    "requests.ephemeral-storage", "requests.memory", "requests.storage", "services.loadbalancers",
    "services.nodeports",
)
CHART_LIMIT_DEFAULT_KEYS = ("cpu", "ephemeral-storage", "memory")

def node_selector(tenant: Tenant, view: TenantView) -> dict[str, str]:
    """Node labels the vCluster syncs nodes by (and pins all its pods to): the tenant label of its
    dedicated nodes; {} for a tenant on shared pools only, whose CPU pods cannot run there.

    >>> node_selector(prod.tenants[1].spec, prod.view(prod.tenants[1].spec))
    {'gpu.acme.dev/tenant': 'inference'}
    >>> node_selector(dev.tenants[2].spec, dev.view(dev.tenants[2].spec))   # llm-finetune, on the shared L4s
    {}
    """
    platform = view.platform
    if any(pool in platform.node_pools for pool in tenant.gpu.dedicated_pools):
        return {tenant_label(platform): tenant.name}
    return {}


def enforced_tolerations(tenant: Tenant, view: TenantView) -> list[str]:
    """Tolerations added to every synced pod, in vCluster's `key=value:Effect` form.

    >>> enforced_tolerations(prod.tenants[1].spec, prod.view(prod.tenants[1].spec))
    ['gpu.acme.dev/tenant=inference:NoSchedule']
    """
    platform = view.platform
    if any(pool in platform.node_pools for pool in tenant.gpu.dedicated_pools):
        return [f"{tenant_label(platform)}={tenant.name}:{TAINT_EFFECT}"]
    return []


def mirrored_quota(tenant: Tenant, view: TenantView) -> dict[str, Any]:
    """`policies.resourceQuota.quota`: the tenant's `tenant-quota`, chart defaults it leaves open nulled.

    >>> mirrored_quota(dev.tenants[0].spec, dev.view(dev.tenants[0].spec))["count/pods"] is None
    True
    """
    gpus = gpu_hard(view)
    hard: dict[str, Any] = {
        **storage_hard(tenant, view.platform),
        **object_count_hard(tenant, view.platform),
        **ephemeral_storage_hard(tenant, view.platform),
        **compute_hard(tenant),
        **gpus,
        **device_class_hard(view, set(gpus)),
    }
    for key in CHART_QUOTA_DEFAULT_KEYS:
        hard.setdefault(key, None)
    return dict(sorted(hard.items()))


def mirrored_limit_range(tenant: Tenant, view: TenantView) -> dict[str, Any]:
    """`policies.limitRange` sections from the tenant's effective LimitRange.

    >>> mirrored_limit_range(dev.tenants[0].spec, dev.view(dev.tenants[0].spec))["max"]
    {'ephemeral-storage': '100Gi'}
    """
    item = container_limits(tenant, view)
    sections: dict[str, Any] = {}
    for section in ("default", "defaultRequest", "max", "min"):
        values: dict[str, Any] = dict(item.get(section, {}))
        if section in ("default", "defaultRequest"):
            for key in CHART_LIMIT_DEFAULT_KEYS:
                values.setdefault(key, None)
        sections[section] = dict(sorted(values.items()))
    return sections


def device_class_selector(tenant: Tenant, view: TenantView) -> dict[str, Any] | None:
    """Label selector of the host DeviceClasses synced into the vCluster: the tool-owned ones the tenant may claim.

    Tool-owned DeviceClasses carry their GPU class label, and a DeviceClass's grant is its GPU
    class's grant, so selecting the granted GPU classes selects exactly the claimable owned classes.
    A granted class a driver installs carries no label of ours and stays invisible inside; a claim
    may still name it (nothing looks DeviceClasses up when a claim is written) and the host decides.
    None when the tenant may claim no DeviceClass.

    >>> device_class_selector(dra.tenants[0].spec, dra.view(dra.tenants[0].spec))["matchExpressions"]
    [{'key': 'gpu.dra.dev/gpu-class', 'operator': 'In', 'values': ['h100']}]
    """
    platform = view.platform
    claimable = claimable_device_classes(tenant, view)
    if not claimable:
        return None
    classes = sorted({c for name in claimable if (c := platform.device_classes[name].gpu_class) is not None})
    return {
        "matchExpressions": [{"key": gpu_class_label(platform), "operator": "In", "values": classes}],
        "matchLabels": platform_labels(view.environment_label),
    }


def dra_sync(tenant: Tenant, view: TenantView) -> dict[str, dict[str, Any]]:
    """`sync.toHost` claims and `sync.fromHost.deviceClasses`: on only with a DeviceClass grant.

    >>> dra_sync(dev.tenants[2].spec, dev.view(dev.tenants[2].spec))["toHost"]
    {'resourceClaimTemplates': {'enabled': False}, 'resourceClaims': {'enabled': False}}
    """
    selector = device_class_selector(tenant, view)
    enabled = selector is not None
    return {
        "fromHost": {"deviceClasses": {"enabled": True, "selector": selector} if enabled else {"enabled": False}},
        "toHost": {"resourceClaimTemplates": {"enabled": enabled}, "resourceClaims": {"enabled": enabled}},
    }


def generated_values(tenant: Tenant, view: TenantView) -> dict[str, Any]:
    """Chart values from the spec alone, before the tenant's overrides (see the module docstring).

    >>> sorted(generated_values(dev.tenants[2].spec, dev.view(dev.tenants[2].spec)))
    ['networking', 'policies', 'sync']
    """
    quota = mirrored_quota(tenant, view)
    limits = mirrored_limit_range(tenant, view)
    pods: dict[str, Any] = {"enabled": True, "enforceTolerations": enforced_tolerations(tenant, view)}
    if tenant.vcluster.priority_class_name is not None:
        pods["priorityClassName"] = tenant.vcluster.priority_class_name
    dra = dra_sync(tenant, view)
    return {
        "networking": {"advanced": {"proxyKubelets": {"byHostname": False, "byIP": False}}},
        "policies": {
            "limitRange": {"enabled": any(v is not None for s in limits.values() for v in s.values()), **limits},
            "networkPolicy": {"enabled": True, "workload": {"publicEgress": {"enabled": False}}},
            "podSecurityStandard": pod_security_level(tenant, view.platform),
            "resourceQuota": {"enabled": any(v is not None for v in quota.values()), "quota": quota},
        },
        "sync": {
            "fromHost": {
                **dra["fromHost"],
                "nodes": {"enabled": True, "selector": {"labels": node_selector(tenant, view)}, "syncBackChanges": False},
                "priorityClasses": {"enabled": False},
            },
            "toHost": {
                "namespaces": {"enabled": False},
                "persistentVolumes": {"enabled": False},
                "pods": pods,
                "priorityClasses": {"enabled": False},
                **dra["toHost"],
                "storageClasses": {"enabled": False},
            },
        },
    }


def deep_merge(base: Any, override: Any) -> Any:
    """`override` over `base`: maps merge key by key, anything else (lists, scalars, null) replaces.

    >>> deep_merge({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2], "d": None}})
    {'a': {'b': 1, 'c': [2], 'd': None}}
    """
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = deep_merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def _plain(value: Any) -> Any:
    """Maps sorted by key; YAML decimals (the loader keeps `0.5` exact) as JSON numbers for Helm."""
    if isinstance(value, dict):
        return {key: _plain(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def vcluster_values(tenant: Tenant, view: TenantView) -> dict[str, Any]:
    """The chart values: generated ones with the tenant's `vcluster.values` merged last, maps sorted.

    >>> vcluster_values(dev.tenants[0].spec, dev.view(dev.tenants[0].spec))["policies"]["networkPolicy"]["enabled"]
    True
    """
    return _plain(deep_merge(generated_values(tenant, view), tenant.vcluster.values))


def values_yaml(values: dict[str, Any]) -> str:
    """The values as a YAML document for Helm, keeping the `null`s that delete chart defaults.

    Pulumi drops `None` entries from a resource's map inputs, so a Release given `values=` would
    keep chart defaults such as `count/pods: 20`; pass this text as a values file instead
    (`value_yaml_files=[pulumi.StringAsset(values_yaml(release["values"]))]`).

    >>> print(values_yaml({"quota": {"count/pods": None, "pods": "500"}}), end="")
    quota:
      count/pods: null
      pods: '500'
    """
    return yaml.safe_dump(values, sort_keys=True, default_flow_style=False, allow_unicode=True)


def vcluster_release(tenant: Tenant, view: TenantView) -> dict | None:
    """The tenant's vCluster as a plain Helm release description, or None when it has none.

    >>> vcluster_release(dev.tenants[2].spec, dev.view(dev.tenants[2].spec))["chart"], vcluster_release(dev.tenants[0].spec, dev.view(dev.tenants[0].spec))
    ('vcluster', None)
    """
    if not tenant.vcluster.enabled or tenant.is_decommissioned:
        return None
    platform = view.platform
    return {
        "name": RELEASE_NAME,
        "namespace": tenant.name,
        # A local copy (directory or .tgz, relative to the project root) replaces the repository.
        "chart": platform.vcluster.chart or CHART,
        "repository": None if platform.vcluster.chart else platform.vcluster.repository,
        "version": platform.vcluster.chart_version,
        "values": vcluster_values(tenant, view),
    }

"""The optional per-tenant vCluster as a Helm release (see docs/queues-and-vclusters.md for why v3.Release)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from ..manifests.vcluster import values_yaml


def register_vcluster(name: str, release: dict, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """A `helm.v3.Release` of the vcluster chart with the generated values.

    A Release (not `helm.v4.Chart`) because vCluster's chart relies on Helm semantics (release
    name, upgrade of a StatefulSet, hooks) and the release is one object to retain or delete.

    >>> from components.manifests.vcluster import vcluster_release
    >>> release = vcluster_release(dev.tenants[2].spec, dev.view(dev.tenants[2].spec))
    >>> [(r.type, r.inputs["chart"]) for r in pulumi_mocks(lambda: register_vcluster("llm-finetune-vcluster", release, None))]
    [('kubernetes:helm.sh/v3:Release', 'vcluster')]
    """
    # A local chart (`vcluster.chart` in the stack) has no repository; its path is relative to the
    # project root, which is the working directory of `pulumi` and of the provider it starts.
    repository = {"repository_opts": {"repo": release["repository"]}} if release.get("repository") else {}
    return k8s.helm.v3.Release(
        name,
        name=release["name"],
        namespace=release["namespace"],
        chart=release["chart"],
        version=release["version"],
        **repository,
        # A values file, not `values=`: Pulumi drops None entries from map inputs, and the nulls
        # are what delete chart defaults (e.g. count/pods: 20) that would tighten the tenant's quota.
        value_yaml_files=[pulumi.StringAsset(values_yaml(release["values"]))],
        skip_await=False,
        opts=opts,
    )

"""The optional per-tenant vCluster as a Helm release (see docs/queues-and-vclusters.md for why v3.Release)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s


def register_vcluster(name: str, release: dict, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """A `helm.v3.Release` of the vcluster chart with the generated values.

    A Release (not `helm.v4.Chart`) because vCluster's chart relies on Helm semantics (release
    name, upgrade of a StatefulSet, hooks) and the release is one object to retain or delete.

    >>> register_vcluster("team-a-vcluster", {"name": "vcluster", ...}, opts)   # doctest: +SKIP
    """
    return k8s.helm.v3.Release(
        name,
        name=release["name"],
        namespace=release["namespace"],
        chart=release["chart"],
        version=release["version"],
        repository_opts={"repo": release["repository"]},
        values=release["values"],
        skip_await=False,
        opts=opts,
    )

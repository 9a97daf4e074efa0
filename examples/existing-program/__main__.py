"""An existing Pulumi program that adds gpu-tenancy's fleet to a cluster it manages (docs/library.md).

The tenants come from plain data (here a dict; it could be a database, an API or another stack's
outputs), not from tenants/ + stacks/ files, and the provider is built from a kubeconfig that is a
Pulumi Output, as it is when the program creates the cluster itself.
"""

import pulumi
import pulumi_kubernetes as k8s

from components import Fleet, InvalidInput, environment_from_data

PLATFORM = {
    "labelDomain": "gpu.example.org",
    "gpuClasses": {
        "l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "exclusive"},
    },
    "nodePools": {
        "l4-pool": {"gpuClass": "l4", "gpusPerNode": 4, "nodes": ["gpu-node-1", "gpu-node-2"]},
    },
}

TENANTS = {
    "search": {
        "apiVersion": "gpu-tenancy.dev/v1alpha2",
        "kind": "Tenant",
        "name": "search",
        "displayName": "Search",
        "costCenter": "cc-1001",
        "access": {"owners": {"groups": ["search-leads"]}, "developers": {"groups": ["search-eng"]}},
        "quota": {
            "cpu": {"requests": "32", "limits": "64"},
            "memory": {"requests": "128Gi", "limits": "256Gi"},
            "gpu": {"l4": 4},
        },
        "gpu": {"classes": ["l4"]},
    },
    "ranking": {
        "apiVersion": "gpu-tenancy.dev/v1alpha2",
        "kind": "Tenant",
        "name": "ranking",
        "displayName": "Ranking",
        "costCenter": "cc-1002",
        "access": {"owners": {"groups": ["ranking-leads"]}},
        "quota": {
            "cpu": {"requests": "16", "limits": "32"},
            "memory": {"requests": "64Gi", "limits": "128Gi"},
            "gpu": {"l4": 2},
        },
        "gpu": {"classes": ["l4"]},
    },
}

# Any Output works here: e.g. `cluster.kubeconfig` of the cluster this program creates.
kubeconfig = pulumi.Config().require_secret("kubeconfig")
provider = k8s.Provider("gpu-cluster", kubeconfig=kubeconfig)

try:
    environment = environment_from_data(pulumi.get_stack(), PLATFORM, TENANTS)
except InvalidInput as err:  # every problem at once, nothing registered
    raise pulumi.RunError(f"invalid tenants:\n{err}") from None

fleet = Fleet("shared-gpu", environment, pulumi.ResourceOptions(providers=[provider]))
pulumi.export("tenants", fleet.summary)

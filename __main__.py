"""The Pulumi program: read this stack's inventory and the tenant files, build the fleet.

The stack `<env>` deploys the environment (only its platform objects when the environment is
sharded); a shard stack `<env>.<shard>` deploys that shard's tenants (docs/sharding.md). Invalid
input stops the program before any resource is registered: nothing is half-applied.
"""

from pathlib import Path

import pulumi

from components.resources.departures import warn_about_departures
from components.resources.fleet import Fleet
from components.resources.kubernetes import cluster_provider
from components.manifests.gpu_nodes import node_group_requirements
from components.manifests.kueue import kueue_configuration
from components.load import fewer_gc_passes_from_now, load_program_environment
from components.spec.problems import InvalidInput

# Building and registering a large fleet makes millions of long-lived objects; registration runs
# after this file has returned, so the collector is relaxed for the rest of the process.
fewer_gc_passes_from_now()
stack = pulumi.get_stack()
try:
    environment = load_program_environment(Path(__file__).parent, stack, pulumi.Config().get_object("platform"))
except InvalidInput as err:
    raise pulumi.RunError(f"invalid tenants or stack configuration:\n{err}") from None

opts = None
if environment.platform.kube_context:
    provider = cluster_provider(environment.platform.kube_context)
    opts = pulumi.ResourceOptions(providers=[provider])
fleet = Fleet(environment.name, environment, opts, stack=stack)

pulumi.export("tenants", fleet.summary)
warn_about_departures(fleet.summary, fleet.renames)  # the preview lists a leaving tenant's objects as deletes; say what happens
if fleet.platform is not None:
    pulumi.export("nodeGroupRequirements", node_group_requirements(environment.facts))
    if kueue_configuration(environment.platform):   # what Kueue's own Configuration must hold (DRA mappings)
        pulumi.export("kueueConfiguration", kueue_configuration(environment.platform))

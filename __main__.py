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
from components.load import fewer_gc_passes, load_program_environment
from components.spec.problems import InvalidInput

stack = pulumi.get_stack()
try:
    environment = load_program_environment(Path(__file__).parent, stack, pulumi.Config().get_object("platform"))
except InvalidInput as err:
    raise pulumi.RunError(f"invalid tenants or stack configuration:\n{err}") from None

opts = None
if environment.platform.kube_context:
    provider = cluster_provider(environment.platform.kube_context)
    opts = pulumi.ResourceOptions(providers=[provider])
with fewer_gc_passes():  # building a large fleet makes millions of long-lived objects
    fleet = Fleet(environment.name, environment, opts, stack=stack)

pulumi.export("tenants", fleet.summary)
warn_about_departures(fleet.summary)  # the preview lists a leaving tenant's objects as deletes; say they stay
if fleet.platform is not None:
    pulumi.export("nodeGroupRequirements", node_group_requirements(environment.facts))

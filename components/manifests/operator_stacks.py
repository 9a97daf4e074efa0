"""The Pulumi Kubernetes Operator (v2) as the engine: one `pulumi.com/v1` `Stack` per Pulumi stack
of an environment (docs/operator.md).

Each Stack CR names the program's git source, the Pulumi stack, and how its workspace pod gets
its credentials, by reference only (a Secret holding the Pulumi access token or passphrase, and
one holding the kubeconfig of the stack's `kubeContext`). The stack's own config is not copied
in: it is the checked-in `stacks/Pulumi.<env>.yaml` (shard stacks read their environment's), so
that there stays one inventory to edit. A shard's Stack lists the environment's Stack as a
`prerequisite`: the operator runs it only after the platform stack succeeded (the deploy graph of
`tenants stacks`), and the shards among themselves in any order, one workspace each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..fleet.environment import Environment
from ..fleet.shard_stacks import StackPart, stack_parts
from .meta import STACK_ROLE_LABEL, KubeObject, environment_label, kube_object, object_meta, platform_labels

API_VERSION = "pulumi.com/v1"
MAX_NAME = 42                                  # the Stack CRD's CEL rule on metadata.name
KUBECONFIG_DIR = "/var/run/gpu-tenancy/kubeconfig"
WORKSPACE_CONTAINER = "pulumi"                 # the operator's name for the workspace pod's main container


@dataclass(frozen=True)
class OperatorSettings:
    """Where the operator finds the program and the credentials (`tenants stacks --format operator`)."""

    repository: str                            # git URL of this project (projectRepo)
    branch: str = "main"
    namespace: str = "pulumi-operator"         # where the Stack CRs, their Secrets and workspaces live
    organization: Optional[str] = None         # Pulumi organization; None: the access token's default
    backend: Optional[str] = None              # a self-managed backend URL; None: Pulumi Cloud
    credentials_secret: str = "pulumi-credentials"  # key accessToken (Pulumi Cloud) or passphrase (backend)
    service_account: Optional[str] = None      # the workspace pod's ServiceAccount
    image: Optional[str] = None                # a workspace image that can run the Python program
    refresh: bool = True                       # read drift from the cluster before each update


def stack_resource_name(stack: str) -> str:
    """The Stack CR's name for a Pulumi stack: the same name, which Kubernetes accepts (dots included).

    >>> stack_resource_name("prod.a")
    'prod.a'
    """
    if len(stack) > MAX_NAME:
        raise ValueError(f"stack {stack}: the operator's Stack names are at most {MAX_NAME} characters; use a shorter shard name")
    return stack


def kubeconfig_secret(environment: str) -> str:
    """The Secret (key `config`) holding the kubeconfig of an environment's `kubeContext`.

    >>> kubeconfig_secret("prod")
    'prod-kubeconfig'
    """
    return f"{environment}-kubeconfig"


def operator_stacks(environment: Environment, settings: OperatorSettings) -> list[KubeObject]:
    """One `Stack` CR per Pulumi stack of the environment, in deploy order.

    >>> stacks = operator_stacks(lab, OperatorSettings("https://git.example/x"))
    >>> [(s["metadata"]["name"], s["spec"].get("prerequisites")) for s in stacks]
    [('lab', None), ('lab.blue', [{'name': 'lab'}]), ('lab.green', [{'name': 'lab'}])]
    """
    return [_stack(environment, part, settings) for part in stack_parts(environment)]


def _stack(environment: Environment, part: StackPart, settings: OperatorSettings) -> KubeObject:
    secret = settings.credentials_secret
    env_refs = {"PULUMI_ACCESS_TOKEN": {"type": "Secret", "secret": {"name": secret, "key": "accessToken"}}}
    if settings.backend:
        env_refs = {"PULUMI_CONFIG_PASSPHRASE": {"type": "Secret", "secret": {"name": secret, "key": "passphrase"}}}
    spec = {
        "stack": f"{settings.organization}/{part.stack}" if settings.organization else part.stack,
        "projectRepo": settings.repository,
        "branch": settings.branch,
        "shallow": True,
        # Drift (an object edited by hand) is read before each update, so the diff is against the
        # cluster; it costs a read per resource.
        "refresh": settings.refresh,
        # Deleting the CR must never delete tenants: their namespaces hold workloads and data.
        "destroyOnFinalize": False,
        # One workspace pod per stack holds the whole fleet in memory: free it once the update is done.
        "workspaceReclaimPolicy": "Delete",
        "envRefs": env_refs,
    }
    if settings.backend:
        spec["backend"] = settings.backend
    if settings.service_account:
        spec["serviceAccountName"] = settings.service_account
    needs = [{"name": stack_resource_name(n)} for n in part.needs]
    if needs:
        spec["prerequisites"] = needs
    workspace = _workspace(environment, settings)
    if workspace:
        spec["workspaceTemplate"] = {"spec": workspace}
    # The environment label is the stack's `environment` (else its name), as on every object the stack deploys.
    labels = {**platform_labels(environment_label(environment)), STACK_ROLE_LABEL: "shard" if part.shard else "environment"}
    return kube_object(API_VERSION, "Stack", object_meta(stack_resource_name(part.stack), namespace=settings.namespace,
                                                         labels=labels), spec=spec)


def _workspace(environment: Environment, settings: OperatorSettings) -> dict:
    """The workspace pod's additions: the image, and the kubeconfig of `kubeContext` from a Secret
    (the program's provider asks for that context; without one it uses the pod's own identity)."""
    workspace: dict = {}
    if settings.image:
        workspace["image"] = settings.image
    if environment.platform.kube_context:
        workspace["env"] = [{"name": "KUBECONFIG", "value": f"{KUBECONFIG_DIR}/config"}]
        workspace["podTemplate"] = {"spec": {
            "containers": [{"name": WORKSPACE_CONTAINER, "volumeMounts": [
                {"name": "kubeconfig", "mountPath": KUBECONFIG_DIR, "readOnly": True}]}],
            "volumes": [{"name": "kubeconfig", "secret": {"secretName": kubeconfig_secret(environment.name)}}],
        }}
    return workspace

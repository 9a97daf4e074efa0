"""What admission enforces in every tenant namespace: Pod Security, the guard rails (quota keys,
ingress annotations, ServiceAccount tokens, ephemeral storage, object sizes) and the image policy
(`Platform.podSecurity`, `guardRails`, `images`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from ..base import DnsSubdomain, Model
from ..quantity import Quantity
from ..tenant import ImageRegistry, ObjectCounts, PodSecurityLevel, RequestsLimits, StorageQuota


class PodSecurity(Model):
    """Pod Security Admission for every tenant namespace."""

    level: PodSecurityLevel = Field("baseline", description="Pod Security Standard enforced on every tenant namespace (tenants may only tighten it)")
    version: Annotated[str, Field(pattern=r"^(latest|v1\.[0-9]+)$")] = Field(
        "latest",
        description="version of the standard; latest (the cluster's own checks) or a pin no older than the "
        "cluster (validate warns about an older pin: it misses checks added since, e.g. probe `host` in v1.34)",
    )


# A count for every built-in namespaced kind a tenant role may create (and ReplicaSets, which
# Deployments create as often as their revisionHistoryLimit, which the tenant sets), so that the
# number of objects a namespace holds in etcd is bounded. Custom resources (JobSets, Kubeflow and
# Ray jobs, the bundles' kinds) are not counted by default: a count key for a kind the cluster does
# not serve stops the quota controller from computing the namespace's usage, and the quota then
# refuses every pod. A stack adds them here once their CRDs are installed;
# tests/manifests/test_quota.py keeps both lists complete against the roles and bundles.
DEFAULT_KIND_COUNTS = {
    "serviceaccounts": 100,
    "deployments.apps": 500, "statefulsets.apps": 200, "replicasets.apps": 5000,
    "horizontalpodautoscalers.autoscaling": 200,
    "cronjobs.batch": 200, "jobs.batch": 2000,
    "ingresses.networking.k8s.io": 100,
    "rolebindings.rbac.authorization.k8s.io": 100,
    "poddisruptionbudgets.policy": 100,
    "leases.coordination.k8s.io": 100,
}
# Kinds members may create that only a CRD or an optional API group serves: counted only when the
# stack lists them in guardRails.objects.kinds (see above).
CUSTOM_RESOURCE_KINDS = (
    "jobsets.jobset.x-k8s.io",
    *(f"{kind}.kubeflow.org" for kind in ("jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs")),
    "trainjobs.trainer.kubeflow.org",
    "resourceclaims.resource.k8s.io", "resourceclaimtemplates.resource.k8s.io",
    "notebooks.kubeflow.org", "poddefaults.kubeflow.org", "scheduledworkflows.kubeflow.org",
    *(f"{kind}.pipelines.kubeflow.org" for kind in ("experiments", "jobs", "pipelines", "pipelineversions", "recurringruns", "runs")),
    "workflows.argoproj.io",
    *(f"{kind}.ray.io" for kind in ("rayclusters", "rayjobs", "rayservices")),
    *(f"{kind}.serving.kserve.io" for kind in ("inferencegraphs", "inferenceservices", "servingruntimes", "trainedmodels")),
    "leaderworkersets.leaderworkerset.x-k8s.io",
)


def _default_guard_objects() -> ObjectCounts:
    return ObjectCounts(
        pods=1000, services=100, servicesLoadBalancers=0, servicesNodePorts=0,
        persistentVolumeClaims=100, configMaps=1000, secrets=1000, kinds=DEFAULT_KIND_COUNTS,
    )


NGINX = "nginx.ingress.kubernetes.io/"
# ingress-nginx annotations that change only how the controller serves the tenant's own backends.
# Left out on purpose: anything that makes the controller fetch or send elsewhere (auth-url,
# auth-signin, mirror-target, mirror-uri, global-rate-limit*, custom-http-errors/default-backend,
# upstream-vhost, proxy-redirect-*), service-upstream, ssl-passthrough and every *snippet*.
_DEFAULT_INGRESS_ANNOTATIONS = tuple(NGINX + name for name in (
    "affinity", "affinity-mode", "app-root", "auth-realm", "auth-tls-pass-certificate-to-upstream", "auth-tls-verify-client",
    "auth-tls-verify-depth", "auth-type", "backend-protocol", "client-body-buffer-size", "cors-allow-credentials",
    "cors-allow-headers", "cors-allow-methods", "cors-allow-origin", "cors-expose-headers", "cors-max-age", "enable-cors",
    "force-ssl-redirect", "limit-burst-multiplier", "limit-connections", "limit-rpm", "limit-rps", "proxy-body-size",
    "proxy-buffer-size", "proxy-buffering", "proxy-connect-timeout", "proxy-next-upstream", "proxy-next-upstream-timeout",
    "proxy-next-upstream-tries", "proxy-read-timeout", "proxy-request-buffering", "proxy-send-timeout", "proxy-ssl-name",
    "proxy-ssl-server-name", "proxy-ssl-verify", "proxy-ssl-verify-depth", "rewrite-target", "session-cookie-expires",
    "session-cookie-max-age", "session-cookie-name", "session-cookie-path", "session-cookie-samesite", "ssl-redirect",
    "use-regex", "whitelist-source-range",
))
_DEFAULT_SECRET_ANNOTATIONS = tuple(NGINX + name for name in ("auth-secret", "auth-tls-secret", "proxy-ssl-secret"))
AnnotationKey = Annotated[str, Field(pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", max_length=316)]


class IngressAnnotations(Model):
    """Which ingress-controller annotations tenants may set: an allow-list, never a deny-list.

    An annotation whose key starts with a controller prefix is refused unless listed; others (your
    own, tools' tracking annotations) are not the controller's business and pass. `*snippet*` keys
    are refused always."""

    controller_prefixes: list[Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/$")]] = Field(
        [NGINX], description="annotation key prefixes the cluster's ingress controllers read, e.g. nginx.ingress.kubernetes.io/"
    )
    allowed: list[AnnotationKey] = Field(
        list(_DEFAULT_INGRESS_ANNOTATIONS),
        description="controller annotations tenants may set (full keys); the default is ingress-nginx's that change only "
        "how it serves the tenant's own backends (no auth-url, mirror-*, upstream-vhost, ...)",
    )
    secret_references: list[AnnotationKey] = Field(
        list(_DEFAULT_SECRET_ANNOTATIONS),
        description="controller annotations that name a Secret (`[namespace/]name`): allowed only naming a Secret "
        "of the Ingress's own namespace",
    )

    @model_validator(mode="after")
    def _meaningful(self) -> "IngressAnnotations":
        for key in (*self.allowed, *self.secret_references):
            if "snippet" in key:
                raise ValueError(f"'{key}': snippet annotations inject raw controller configuration and are never allowed")
            if not any(key.startswith(p) for p in self.controller_prefixes):
                raise ValueError(f"'{key}' has none of the controllerPrefixes ({', '.join(self.controller_prefixes)}): "
                                 "annotations of other prefixes are allowed anyway; list controller annotations only")
        return self


class ServiceAccountTokens(Model):
    """Bounds on the ServiceAccount tokens a pod asks the kubelet for (projected `serviceAccountToken`).

    Anyone who may create pods may run them as any ServiceAccount of the namespace, the tenant's CI
    account included, and the kubelet mints the token the pod spec asks for: without a bound, a
    developer gets the CI account's token for any audience and a lifetime of years."""

    max_expiration_seconds: Annotated[int, Field(ge=600, le=86400, strict=True)] = Field(
        3607, description="longest token lifetime a pod may ask for (the kube-api-access volume the API server injects asks 3607)"
    )
    audiences: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(
        [], description="audiences a pod may ask a token for besides the API server's own (audience unset), e.g. vault"
    )


class EphemeralStorageGuardRail(Model):
    """Node-local scratch space (container writable layers, logs, disk-backed emptyDirs) of every tenant
    namespace, unless the tenant sets its own `quota.ephemeralStorage` and `limits.*.ephemeralStorage`.

    The quota keys are admission-time accounting of what pods declare; the per-container limit is
    what the kubelet evicts a pod for exceeding (measured periodically, so a pod may overshoot
    between two measurements). `max` is also a bound: no tenant may set a larger per-container value.
    The LimitRange defaults always come with the quota keys, so a pod that states no ephemeral-storage
    is given some instead of being refused."""

    quota: RequestsLimits = Field(
        default_factory=lambda: RequestsLimits(requests="100Gi", limits="500Gi"),
        description="requests.ephemeral-storage and limits.ephemeral-storage of each namespace (a tenant with N namespaces may hold N times)",
    )
    default_request: Quantity = Field("256Mi", description="request given to containers that state none (what the scheduler reserves on a node)")
    default: Quantity = Field("4Gi", description="limit given to containers that state none (the kubelet evicts a pod above its limits)")
    max: Quantity = Field("100Gi", description="largest limit one container may set; tenants cannot raise it")

    @model_validator(mode="after")
    def _ordered(self) -> "EphemeralStorageGuardRail":
        if self.default_request > self.default:
            raise ValueError(f"defaultRequest ({self.default_request}) is above default ({self.default}); a defaulted container's request must not exceed its limit")
        if self.default > self.max:
            raise ValueError(f"default ({self.default}) is above max ({self.max}); every defaulted container would be refused")
        requests, limits = self.quota.requests, self.quota.limits
        if requests is not None and limits is not None and requests > limits:
            raise ValueError(f"quota.requests ({requests}) is above quota.limits ({limits}); every pod's limits are >= its requests, so the requests could never be used")
        if requests is not None and self.default_request > requests:
            raise ValueError(f"defaultRequest ({self.default_request}) is above quota.requests ({requests}); no defaulted pod could be admitted")
        if limits is not None and self.default > limits:
            raise ValueError(f"default ({self.default}) is above quota.limits ({limits}); no defaulted pod could be admitted")
        return self


class GuardRails(Model):
    """Quota keys every tenant namespace gets unless the tenant sets its own: object counts, storage and ephemeral storage."""

    objects: ObjectCounts = Field(default_factory=_default_guard_objects, description="object counts per namespace; unset counts are unlimited")
    storage: StorageQuota = Field(
        default_factory=lambda: StorageQuota(requests="1Ti"),
        description="storage per namespace: total requests.storage and per-StorageClass caps a tenant gets unless it sets its own",
    )
    ephemeral_storage: EphemeralStorageGuardRail = Field(
        default_factory=EphemeralStorageGuardRail,
        description="node-local scratch space per namespace (quota keys) and per container (LimitRange default and max) "
        "a tenant gets unless it sets its own; the max bounds every tenant",
    )
    storage_classes: list[DnsSubdomain] = Field(
        [],
        description="every StorageClass of the cluster; a class neither the tenant nor `storage` gives a cap is pinned at 0",
    )
    pdb_min_available: bool = Field(
        False,
        description="let tenants' PodDisruptionBudgets use minAvailable (below 100%); it blocks a node drain whenever it "
        "reaches the replica count, so by default only maxUnavailable of at least 1 is admitted",
    )
    service_account_tokens: ServiceAccountTokens = Field(
        default_factory=ServiceAccountTokens, description="lifetime and audiences of the tokens pods may ask for"
    )
    ingress_annotations: IngressAnnotations = Field(
        default_factory=IngressAnnotations, description="ingress-controller annotations tenants may set (an allow-list)"
    )
    data_bytes_per_object: Annotated[int, Field(ge=1024, le=1048576, strict=True)] = Field(
        262144,
        description="most bytes the data and binaryData of one ConfigMap or Secret may hold (checked at admission; the API "
        "server's own limit is 1 MiB), so that the object counts bound what a namespace stores in etcd",
    )


class ImagePolicy(Model):
    """Where tenants' pods may pull images from, enforced at admission on every container (init and
    ephemeral ones too) and every image volume; off while neither the stack nor a tenant lists a registry
    and digests are not required."""

    registries: list[ImageRegistry] = Field(
        [],
        description="registries (or paths below one) every tenant may pull from, e.g. [nvcr.io/nvidia, registry.acme.dev]; "
        "a tenant's images.registries add to them; images must then be written in full (docker.io/library/nginx, not nginx)",
    )
    require_digest: bool = Field(
        False, description="every image pinned by digest (name@sha256:<64 hex>), so a re-pushed tag cannot change what runs"
    )

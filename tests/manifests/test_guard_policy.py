"""The guard policy with a tenant's TenantGrant as its parameters, replayed on two CEL engines
(tests/manifests/cel_admission.py) against the objects a tenant member may write: pods, Services,
Ingresses, Secrets, RoleBindings."""

from __future__ import annotations

import dataclasses

import pytest

from components.manifests import guard_policy as gp
from components.manifests.tenant_grant import tenant_grant

from .cel_admission import ENGINES
from .cel_admission import admit as _admit
from .example_tenants import viewed

GPU = {"limits": {"nvidia.com/gpu": "1"}}
MEMBER = {"operator": False}
OPERATOR = {"operator": True}


@pytest.fixture(params=ENGINES, ids=lambda e: e.name)
def engine(request):
    return request.param


@dataclasses.dataclass(frozen=True)
class Guard:
    """The guard policy as one tenant's binding applies it: with the tenant's TenantGrant as params."""

    policy: dict
    grant: dict

    def __getitem__(self, key):
        return self.policy[key]


def admit(engine, guard: Guard, obj, *, given=None, **kwargs):
    """Admission as a tenant member (the `operator` variable asks the authorizer, which is not offline)."""
    return _admit(engine, guard.policy, obj, given=given or MEMBER, params=guard.grant, **kwargs)


def policy_for(environment, tenant: str, platform=None) -> Guard:
    spec = next(t.spec for t in environment.tenants if t.name == tenant)
    facts, view = environment.facts, environment.view(spec)
    if platform is not None:
        facts, view = dataclasses.replace(facts, platform=platform), dataclasses.replace(view, platform=platform)
    return Guard(gp.guard_policy(facts), tenant_grant(spec, view))


def pod(env=None, resources=None, **spec):
    container = {"name": "main", "image": "registry.invalid/app:1", "resources": resources or {}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def service(**spec):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": spec}


def ingress(hosts=(), annotations=None, tls=None, **spec):
    rules = [{"host": h} if h else {"http": {"paths": []}} for h in hosts]
    meta = {"name": "i", **({"annotations": annotations} if annotations else {})}
    body = {"rules": rules, **spec}
    if tls is not None:
        body["tls"] = [{"hosts": tls}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta, "spec": body}


def binding(*subjects, name="extra"):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant-viewer"},
            "subjects": list(subjects)}


def group(name):
    return {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def user(name):
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def account(namespace, name):
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


# ---- pods ------------------------------------------------------------------------------------


def test_system_unknown_and_ungranted_priority_classes_are_refused(engine, prod):
    # eval has no grant for the stack's online-inference and training classes (defaultTenantCap pods: 0):
    # refused here, not only by their pods: 0 quotas, which churn can get past (kubernetes#141904).
    policy = policy_for(prod, "eval")
    for name in ("system-node-critical", "system-cluster-critical", "someone-elses", "training", "online-inference"):
        assert admit(engine, policy, pod(priorityClassName=name), resource="pods") == [
            f"PriorityClass '{name}' is not granted to tenant eval: its pods may use batch, interactive "
            "(quota.priorityClasses in the tenant file; classes with defaultTenantCap pods: 0 need an entry there)"
        ]
    assert admit(engine, policy, pod(priorityClassName="batch"), resource="pods") == []
    assert admit(engine, policy, pod(), resource="pods") == []
    assert admit(engine, policy_for(prod, "llm-finetune"), pod(priorityClassName="training"), resource="pods") == []


CROSS_NAMESPACE = "pod (anti-)affinity with namespaces or a namespaceSelector is not granted to tenant eval"


@pytest.mark.parametrize("kind", ["podAffinity", "podAntiAffinity"])
@pytest.mark.parametrize("term", [{"namespaces": ["inference"]}, {"namespaceSelector": {}}])
def test_cross_namespace_affinity_is_refused_without_its_grant(engine, prod, kind, term):
    selector = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}
    required = {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{**selector, **term}]}}}
    preferred = {"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": {**selector, **term}}]}}}
    policy = policy_for(prod, "eval")
    for spec in (required, preferred):
        message = admit(engine, policy, pod(**spec), resource="pods")
        assert len(message) == 1 and message[0].startswith(CROSS_NAMESPACE), message
    own = {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [selector]}}}
    assert admit(engine, policy, pod(**own), resource="pods") == []


def test_cross_namespace_affinity_is_admitted_with_its_grant(engine, prod):
    tenant = next(t for t in prod.tenants if t.name == "eval")
    quota = tenant.spec.quota.model_copy(update={"cross_namespace_affinity": True})
    granted = dataclasses.replace(prod, tenants=[dataclasses.replace(tenant, spec=tenant.spec.model_copy(update={"quota": quota}))])
    term = {"labelSelector": {}, "topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    assert admit(engine, policy_for(prod, "eval"), pod(**spec), resource="pods") != []
    assert admit(engine, policy_for(granted, "eval"), pod(**spec), resource="pods") == []


def test_gpu_visibility_without_a_gpu_request_is_refused(engine, prod):
    policy = policy_for(prod, "eval")
    message = admit(engine, policy, pod(env={"NVIDIA_VISIBLE_DEVICES": "all"}), resource="pods")
    assert len(message) == 1 and message[0].startswith("environment variable NVIDIA_VISIBLE_DEVICES is refused in pods of tenant eval")
    # Set by hand even with a GPU request: the device plugin sets it for the GPUs allocated.
    assert len(admit(engine, policy, pod(env={"NVIDIA_VISIBLE_DEVICES": "0,1,2"}, resources=GPU), resource="pods")) == 1
    message = admit(engine, policy, pod(env={"NVIDIA_DRIVER_CAPABILITIES": "all"}), resource="pods")
    assert len(message) == 1 and message[0].startswith("environment variable NVIDIA_DRIVER_CAPABILITIES is refused")
    assert admit(engine, policy, pod(env={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}, resources=GPU), resource="pods") == []
    assert admit(engine, policy, pod(runtimeClassName="nvidia"), resource="pods") == [
        "RuntimeClass 'nvidia' exposes GPUs: pods of tenant eval may use it only with a GPU request (nvidia.com resources)"
    ]
    assert admit(engine, policy, pod(runtimeClassName="nvidia", resources=GPU), resource="pods") == []
    assert admit(engine, policy, pod(runtimeClassName="gvisor"), resource="pods") == []
    # Init containers count too.
    init = pod()
    init["spec"]["initContainers"] = [{"name": "i", "image": "x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]
    assert len(admit(engine, policy, init, resource="pods")) == 1


def test_gpu_variables_cannot_come_in_through_env_from(engine, prod, environments):
    """`envFrom` makes variables of a ConfigMap's or Secret's keys, after a prefix: both halves refused."""
    policy = policy_for(prod, "eval")
    spelled = pod()
    spelled["spec"]["containers"][0]["envFrom"] = [{"prefix": "NVIDIA_", "configMapRef": {"name": "innocent"}}]
    (message,) = admit(engine, policy, spelled, resource="pods")
    assert message.startswith("envFrom prefix NVIDIA_ is refused in pods of tenant eval: it begins the name of NVIDIA_VISIBLE_DEVICES")
    spelled["spec"]["containers"][0]["envFrom"] = [{"prefix": "APP_", "configMapRef": {"name": "settings"}},
                                                   {"configMapRef": {"name": "plain"}}]
    assert admit(engine, policy, spelled, resource="pods") == []   # an ordinary prefix, and none
    for kind, resource, field in (("ConfigMap", "configmaps", "data"), ("ConfigMap", "configmaps", "binaryData"),
                                  ("Secret", "secrets", "data")):
        value = "YWxs" if field != "data" or kind == "Secret" else "all"
        holder = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "innocent"}, field: {"NVIDIA_VISIBLE_DEVICES": value}}
        (message,) = admit(engine, policy, holder, resource=resource)
        assert message.startswith("key NVIDIA_VISIBLE_DEVICES is refused in ConfigMaps and Secrets of tenant eval"), (kind, field)
        assert admit(engine, policy, holder, resource=resource, given=OPERATOR) == []
        holder[field] = {"VISIBLE_DEVICES": value, "nvidia_visible_devices": value}   # other names are fine
        assert admit(engine, policy, holder, resource=resource) == [], (kind, field)
    # On a KAI stack the binder writes the variable into the share's own ConfigMap.
    staging = policy_for(environments["staging"], "eval")
    share = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p-shared-gpu-0"}, "data": {"NVIDIA_VISIBLE_DEVICES": "0"}}
    assert len(admit(engine, staging, share, resource="configmaps")) == 1
    assert admit(engine, staging, share, resource="configmaps", user="system:serviceaccount:kai-scheduler:binder") == []


KAI_PREFIX = "notebook-x7k2p9q-shared-gpu"


def kai_share(*, prefix=KAI_PREFIX, config_map=f"{KAI_PREFIX}-0", annotations=None):
    """A fraction pod as KAI's webhook leaves it (pkg/binder/common/gpu_access.go AddGPUSharingEnvVars)."""
    body = pod()
    body["metadata"]["annotations"] = annotations if annotations is not None else {"gpu-fraction": "0.5", "runai/shared-gpu-configmap": prefix}
    container = body["spec"]["containers"][0]
    container["env"] = [{"name": name, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": name}}}
                        for name in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION")]
    container["envFrom"] = [{"configMapRef": {"name": f"{config_map}-evar", "optional": False}}]
    return body


def test_the_gpu_variables_kais_webhook_injects_into_a_share_are_admitted(engine, environments):
    staging = environments["staging"]
    policy = policy_for(staging, "eval")
    assert admit(engine, policy, kai_share(), resource="pods") == []
    init = kai_share(config_map=f"{KAI_PREFIX}-i0")
    init["spec"]["initContainers"] = init["spec"].pop("containers")
    init["spec"]["containers"] = [{"name": "main", "image": "x"}]
    assert admit(engine, policy, init, resource="pods") == []


@pytest.mark.parametrize("case", ["by value", "no share annotation", "another ConfigMap", "prefix not KAI's", "other key"])
def test_gpu_variables_only_look_like_kais_when_they_are(engine, environments, case):
    staging = environments["staging"]
    policy = policy_for(staging, "eval")
    body = {
        "by value": lambda: pod(env={"NVIDIA_VISIBLE_DEVICES": "all"}),
        "no share annotation": lambda: kai_share(annotations={"runai/shared-gpu-configmap": KAI_PREFIX}),
        "another ConfigMap": lambda: kai_share(config_map="settings"),
        "prefix not KAI's": lambda: kai_share(prefix="settings", config_map="settings-0"),
        "other key": lambda: kai_share(),
    }[case]()
    if case == "other key":
        body["spec"]["containers"][0]["env"][0]["valueFrom"]["configMapKeyRef"]["key"] = "ALL_GPUS"
    message = admit(engine, policy, body, resource="pods")
    assert len(message) == 1 and message[0].startswith("environment variable NVIDIA_VISIBLE_DEVICES is refused in pods of tenant eval")


def test_on_a_kai_stack_the_values_that_show_no_gpu_are_admitted(engine, environments, prod):
    """KAI's deviceaccess webhook plugin (admission.blockNvidiaVisibleDevices) sets `void` in containers without a GPU."""
    for value in ("void", "none"):
        assert admit(engine, policy_for(environments["staging"], "eval"), pod(env={"NVIDIA_VISIBLE_DEVICES": value}), resource="pods") == []
        assert len(admit(engine, policy_for(prod, "eval"), pod(env={"NVIDIA_VISIBLE_DEVICES": value}), resource="pods")) == 1
    assert len(admit(engine, policy_for(environments["staging"], "eval"), pod(env={"NVIDIA_VISIBLE_DEVICES": "0"}), resource="pods")) == 1


def test_stacks_without_kai_keep_the_plain_gpu_variable_rule(prod):
    assert "shared-gpu" not in str(policy_for(prod, "eval")["spec"]["variables"])


# HAMi-core reads its bound from the container's environment: on a stack whose KAI shares it bounds
# (staging: kaiFractions.memoryBound: hamicore) a pod may not set it, only KAI's webhook, from the share's ConfigMap.
HAMI_CORE_ATTEMPTS = {
    "CUDA_DEVICE_MEMORY_LIMIT": "80g",      # the bound itself (KAI's webhook replaces it only in the share's container)
    "CUDA_DEVICE_MEMORY_LIMIT_0": "80g",    # per device: read before CUDA_DEVICE_MEMORY_LIMIT, which KAI sets
    "CUDA_DEVICE_SM_LIMIT_1": "100",
    "GPU_CORE_UTILIZATION_POLICY": "DISABLE",
    "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/mine.cache",
    "ACTIVE_OOM_KILLER": "false",
    "CUDA_TASK_PRIORITY": "0",
    "CUDA_REDIRECT": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
}


def hami_share(**env):
    """KAI's share with the variable its hamicore webhook plugin adds, and `env` set by hand in the same container."""
    body = kai_share()
    container = body["spec"]["containers"][0]
    container["env"].append({"name": "CUDA_DEVICE_MEMORY_LIMIT", "valueFrom": {"configMapKeyRef": {
        "name": f"{KAI_PREFIX}-0", "key": "CUDA_DEVICE_MEMORY_LIMIT", "optional": True}}})
    container["env"] += [{"name": k, "value": v} for k, v in env.items()]
    return body


@pytest.mark.parametrize("name", sorted(HAMI_CORE_ATTEMPTS))
def test_hami_core_variables_are_refused_where_hami_core_bounds_kai_shares(engine, environments, prod, name):
    staging = policy_for(environments["staging"], "eval")
    (message,) = admit(engine, staging, hami_share(**{name: HAMI_CORE_ATTEMPTS[name]}), resource="pods")
    assert message.startswith(f"environment variable {name} is refused in pods of tenant eval: HAMi-core reads it, and the "
                              "stack bounds KAI GPU shares by HAMi-core (kaiFractions.memoryBound: hamicore)")
    assert len(admit(engine, staging, pod(env={name: HAMI_CORE_ATTEMPTS[name]}), resource="pods")) == 1   # in any pod
    # Where nothing loads HAMi-core into shares, the names mean nothing to the platform.
    assert admit(engine, policy_for(prod, "eval"), pod(env={name: HAMI_CORE_ATTEMPTS[name]}), resource="pods") == []


def test_the_bound_kais_webhook_injects_is_admitted_and_ordinary_variables_too(engine, environments):
    staging = policy_for(environments["staging"], "eval")
    assert admit(engine, staging, hami_share(CUDA_VISIBLE_DEVICES="0", LIBCUDA_LOG_LEVEL="0", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"),
                 resource="pods") == []
    # The same reference to a ConfigMap that is not the share's own is a bound the pod chose.
    foreign = hami_share()
    foreign["spec"]["containers"][0]["env"][-1]["valueFrom"]["configMapKeyRef"]["name"] = "settings"
    (message,) = admit(engine, staging, foreign, resource="pods")
    assert message.startswith("environment variable CUDA_DEVICE_MEMORY_LIMIT is refused")


def test_hami_core_variables_cannot_come_in_through_env_from(engine, environments, prod):
    staging = policy_for(environments["staging"], "eval")
    for prefix in ("CUDA_DEVICE_", "CUDA_DEVICE_MEMORY_LIMIT_", "GPU_CORE_", "ACTIVE_"):
        spelled = pod()
        spelled["spec"]["containers"][0]["envFrom"] = [{"prefix": prefix, "configMapRef": {"name": "innocent"}}]
        (message,) = admit(engine, staging, spelled, resource="pods")
        assert message.startswith(f"envFrom prefix {prefix} is refused in pods of tenant eval: it begins the name of"), prefix
        assert admit(engine, policy_for(prod, "eval"), spelled, resource="pods") == [], prefix
    ordinary = pod()
    ordinary["spec"]["containers"][0]["envFrom"] = [{"prefix": "CUDA_APP_", "configMapRef": {"name": "settings"}}]
    assert admit(engine, staging, ordinary, resource="pods") == []
    for key in ("CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT_3", "CUDA_REDIRECT"):
        holder = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "innocent"}, "data": {key: "x"}}
        (message,) = admit(engine, staging, holder, resource="configmaps")
        assert message.startswith(f"key {key} is refused in ConfigMaps and Secrets of tenant eval"), key
        assert admit(engine, policy_for(prod, "eval"), holder, resource="configmaps") == []
    # KAI's binder writes the bound into the share's ConfigMap (hamicore binder plugin).
    share = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{KAI_PREFIX}-0"}, "data": {"CUDA_DEVICE_MEMORY_LIMIT": "40960m"}}
    assert admit(engine, staging, share, resource="configmaps", user="system:serviceaccount:kai-scheduler:binder") == []
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}}
    assert admit(engine, staging, plain, resource="configmaps") == []


def token_pod(service_account="trainer-ci", **token):
    volume = {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token", **token}}]}}
    return pod(serviceAccountName=service_account, volumes=[{"name": "data", "emptyDir": {}}, volume])


def test_projected_tokens_are_bounded_in_lifetime_and_audience(engine, prod):
    policy = policy_for(prod, "llm-finetune")
    bound = ("ServiceAccount tokens projected into pods of tenant llm-finetune must expire within 3607 seconds and have no "
             "audience (the API server's) or one of: none (guardRails.serviceAccountTokens): a pod may run as any "
             "ServiceAccount of its namespace, the CI account's too")
    for attack in (token_pod(expirationSeconds=2**32), token_pod(audience="https://ci.acme.dev"),
                   token_pod(audience="vault", expirationSeconds=3600)):
        assert admit(engine, policy, attack, resource="pods") == [bound], attack
    # Neighbours: the API server's audience within the bound, what the API server injects, no token volume at all.
    for fine in (token_pod(expirationSeconds=3600), token_pod(expirationSeconds=3607, audience=""), token_pod(), pod()):
        assert admit(engine, policy, fine, resource="pods") == [], fine


def test_the_stack_lists_extra_token_audiences(engine, prod):
    rails = prod.platform.guard_rails
    tokens = rails.service_account_tokens.model_copy(update={"audiences": ["vault"], "max_expiration_seconds": 7200})
    platform = prod.platform.model_copy(update={"guard_rails": rails.model_copy(update={"service_account_tokens": tokens})})
    policy = policy_for(prod, "llm-finetune", platform)
    assert admit(engine, policy, token_pod(audience="vault", expirationSeconds=7200), resource="pods") == []
    assert len(admit(engine, policy, token_pod(audience="vault", expirationSeconds=7201), resource="pods")) == 1
    assert len(admit(engine, policy, token_pod(audience="https://ci.acme.dev"), resource="pods")) == 1


# ---- Services ----------------------------------------------------------------------------------


def test_external_ips_are_refused(engine, prod):
    messages = admit(engine, policy_for(prod, "eval"), service(externalIPs=["10.20.0.5"], ports=[{"port": 80}]), resource="services")
    assert messages == ["Services of tenant eval may not set spec.externalIPs: they capture traffic meant for any address "
                        "(CVE-2020-8554); use a LoadBalancer Service where granted"]
    assert admit(engine, policy_for(prod, "eval"), service(type="ClusterIP", ports=[{"port": 80}]), resource="services") == []


def test_load_balancer_ips_are_refused(engine, prod):
    policy = policy_for(prod, "eval")
    lb = ("Services of tenant eval may not set spec.loadBalancerIP: it claims a shared load-balancer address "
          "another tenant or the platform may own; the load balancer allocates one")
    ports = [{"port": 443}]
    assert admit(engine, policy, service(type="LoadBalancer", loadBalancerIP="203.0.113.7", ports=ports), resource="services") == [lb]
    assert admit(engine, policy, service(type="LoadBalancer", ports=ports), resource="services") == []
    assert admit(engine, policy, service(type="LoadBalancer", loadBalancerIP="", ports=ports), resource="services") == []
    # An object admitted before the rule existed stays updatable; moving it to another address does not.
    legacy = service(type="LoadBalancer", loadBalancerIP="203.0.113.7", ports=ports)
    assert admit(engine, policy, legacy, resource="services", operation="UPDATE", old=legacy) == []
    moved = service(type="LoadBalancer", loadBalancerIP="203.0.113.8", ports=ports)
    assert admit(engine, policy, moved, resource="services", operation="UPDATE", old=legacy) == [lb]


def test_external_name_only_to_granted_hostnames(engine, prod):
    policy = policy_for(prod, "eval")
    assert admit(engine, policy, service(type="ExternalName", externalName="datasets.acme.dev"), resource="services") == []
    for target in ("objects.acme.dev", "169.254.169.254", "datasets.acme.dev.evil.com"):
        assert admit(engine, policy, service(type="ExternalName", externalName=target), resource="services") == [
            f"ExternalName '{target}' is not granted to tenant eval; granted: datasets.acme.dev (network.externalNames; never IP addresses)"
        ]
    # None by default.
    assert len(admit(engine, policy_for(prod, "llm-finetune"), service(type="ExternalName", externalName="datasets.acme.dev"), resource="services")) == 1


# ---- Ingresses ---------------------------------------------------------------------------------


def test_ingress_hosts_are_the_tenants_own(engine, prod):
    policy = policy_for(prod, "llm-finetune")
    for hosts in (["llm-finetune.apps.acme.dev"], ["ui.llm-finetune.apps.acme.dev", "*.llm-finetune.apps.acme.dev"]):
        assert admit(engine, policy, ingress(hosts), resource="ingresses") == [], hosts
    rule = ("Ingress hosts of tenant llm-finetune must be one of: llm-finetune.apps.acme.dev, "
            "or a subdomain of: llm-finetune.apps.acme.dev")
    assert admit(engine, policy, ingress(["eval.apps.acme.dev"]), resource="ingresses") == [
        f"Ingress host 'eval.apps.acme.dev' is not allowed (a rule without host catches every host); {rule}"]
    assert admit(engine, policy, ingress(["xllm-finetune.apps.acme.dev"]), resource="ingresses")
    assert admit(engine, policy, ingress([""]), resource="ingresses") == [
        f"Ingress host '' is not allowed (a rule without host catches every host); {rule}"]
    assert admit(engine, policy, ingress(["llm-finetune.apps.acme.dev"], tls=["eval.apps.acme.dev"]), resource="ingresses") == [
        f"a TLS host is not allowed; {rule}"]
    assert admit(engine, policy, ingress([], defaultBackend={"service": {"name": "x", "port": {"number": 80}}}), resource="ingresses") == [
        f"Ingresses of tenant llm-finetune may not set spec.defaultBackend: it catches every host; {rule}"]
    # Explicit hostnames of the tenant file.
    assert admit(engine, policy_for(prod, "inference"), ingress(["api.acme.dev"]), resource="ingresses") == []


def test_snippet_annotations_are_refused(engine, prod):
    policy = policy_for(prod, "eval")
    body = ingress(["eval.apps.acme.dev"], annotations={"nginx.ingress.kubernetes.io/configuration-snippet": "return 200;"})
    assert admit(engine, policy, body, resource="ingresses") == [
        "annotation nginx.ingress.kubernetes.io/configuration-snippet is refused in tenant eval: snippet annotations "
        "inject raw configuration into the shared ingress controller"]
    fine = ingress(["eval.apps.acme.dev"], annotations={"nginx.ingress.kubernetes.io/rewrite-target": "/"})
    assert admit(engine, policy, fine, resource="ingresses") == []


def test_controller_annotations_only_from_the_allow_list(engine, prod):
    policy = policy_for(prod, "eval")
    host = ["eval.apps.acme.dev"]
    for key, value in (("auth-url", "http://169.254.169.254/latest/meta-data/"),
                       ("mirror-target", "http://web.llm-finetune.svc:8080$request_uri"), ("upstream-vhost", "web.inference.svc")):
        messages = admit(engine, policy, ingress(host, annotations={f"nginx.ingress.kubernetes.io/{key}": value}), resource="ingresses")
        assert len(messages) == 1 and messages[0].startswith(
            f"annotation nginx.ingress.kubernetes.io/{key} is not on the allow-list of ingress-controller annotations of tenant eval"), messages
        assert "nginx.ingress.kubernetes.io/rewrite-target" in messages[0]  # the message says what is allowed
    ordinary = {"nginx.ingress.kubernetes.io/rewrite-target": "/", "nginx.ingress.kubernetes.io/proxy-body-size": "64m",
                "cert-manager.io/cluster-issuer": "letsencrypt", "app.kubernetes.io/part-of": "eval-ui"}
    assert admit(engine, policy, ingress(host, annotations=ordinary), resource="ingresses") == []


def test_secret_annotations_name_only_the_namespaces_own_secrets(engine, prod):
    policy = policy_for(prod, "eval")
    host = ["eval.apps.acme.dev"]
    eval_ns = {"metadata": {"name": "eval"}}
    for key in ("auth-tls-secret", "proxy-ssl-secret", "auth-secret"):
        foreign = ingress(host, annotations={f"nginx.ingress.kubernetes.io/{key}": "inference/serving-tls"})
        assert admit(engine, policy, foreign, resource="ingresses", namespace=eval_ns) == [
            f"annotation nginx.ingress.kubernetes.io/{key} names a Secret of another namespace: Ingresses of tenant eval "
            "may name only Secrets of their own namespace (name, or eval/name)"]
        for own in ("eval/client-ca", "client-ca"):
            fine = ingress(host, annotations={f"nginx.ingress.kubernetes.io/{key}": own})
            assert admit(engine, policy, fine, resource="ingresses", namespace=eval_ns) == [], own
    # Not a prefix match on the namespace name: eval-x is another namespace.
    sibling = ingress(host, annotations={"nginx.ingress.kubernetes.io/auth-tls-secret": "evalx/ca"})
    assert len(admit(engine, policy, sibling, resource="ingresses", namespace=eval_ns)) == 1


def test_the_stack_allow_list_replaces_the_default(prod):
    from components.spec.stack import IngressAnnotations

    custom = IngressAnnotations(controllerPrefixes=["haproxy.org/"], allowed=["haproxy.org/timeout-server"], secretReferences=[])
    assert custom.allowed == ["haproxy.org/timeout-server"]
    with pytest.raises(ValueError, match="never allowed"):
        IngressAnnotations(allowed=["nginx.ingress.kubernetes.io/server-snippet"])
    with pytest.raises(ValueError, match="has none of the controllerPrefixes"):
        IngressAnnotations(allowed=["example.com/anything"])


# ---- PodDisruptionBudgets ------------------------------------------------------------------------


def pdb(**spec):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


def test_budgets_that_block_a_drain_are_refused(engine, prod):
    policy = policy_for(prod, "inference")
    for blocking in (pdb(maxUnavailable=0), pdb(maxUnavailable="0%"), pdb(maxUnavailable="00%"), pdb(minAvailable="100%"),
                     pdb(minAvailable=2), pdb(minAvailable="50%"), pdb()):
        messages = admit(engine, policy, blocking, resource="poddisruptionbudgets")
        assert len(messages) == 1 and messages[0].startswith(
            "PodDisruptionBudgets of tenant inference must allow a disruption: set maxUnavailable to at least 1"), blocking
    for fine in (pdb(maxUnavailable=1), pdb(maxUnavailable="10%"), pdb(maxUnavailable=3)):
        assert admit(engine, policy, fine, resource="poddisruptionbudgets") == [], fine


def test_the_stack_may_allow_min_available_below_100_percent(engine, prod):
    platform = prod.platform.model_copy(update={"guard_rails": prod.platform.guard_rails.model_copy(update={"pdb_min_available": True})})
    policy = policy_for(prod, "inference", platform)
    assert admit(engine, policy, pdb(minAvailable=2), resource="poddisruptionbudgets") == []
    assert len(admit(engine, policy, pdb(minAvailable="100%"), resource="poddisruptionbudgets")) == 1
    assert len(admit(engine, policy, pdb(maxUnavailable=0), resource="poddisruptionbudgets")) == 1


# ---- Kueue Workloads -----------------------------------------------------------------------------


def workload(priority=None, priority_class=None):
    spec = {"queueName": "default", "podSets": []}
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec.update(priorityClassName=priority_class, priorityClassSource="scheduling.k8s.io/priorityclass")
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "job-x"}, "spec": spec}


def test_workload_priority_never_above_the_tenants_classes(engine, prod):
    policy = policy_for(prod, "llm-finetune")   # batch 10000, interactive 40000, training 50000; not online-inference
    for value, cls in ((2000001000, "system-node-critical"), (100000, "online-inference")):
        assert admit(engine, policy, workload(value, cls), resource="workloads") == [
            f"Kueue Workload priority {value} is above what tenant llm-finetune may use (50000, the highest of its "
            "PriorityClasses: batch=10000, interactive=40000, training=50000): its Job names a PriorityClass it is not "
            "granted (e.g. system-node-critical) and would be admitted ahead of everyone"]
    for fine in (workload(50000, "training"), workload(0), workload()):
        assert admit(engine, policy, fine, resource="workloads") == [], fine
    # inference is granted online-inference.
    assert admit(engine, policy_for(prod, "inference"), workload(100000, "online-inference"), resource="workloads") == []


# ---- Secrets -----------------------------------------------------------------------------------


def test_service_account_token_secrets_are_refused(engine, prod):
    policy = policy_for(prod, "llm-finetune")
    token = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "t", "annotations": {"kubernetes.io/service-account.name": "trainer-ci"}}}
    assert admit(engine, policy, token, resource="secrets") == [
        "Secrets of type kubernetes.io/service-account-token are refused in tenant llm-finetune: the token never expires "
        "and outlives its creator's membership; use short-lived tokens (TokenRequest, projected volumes)"]
    assert admit(engine, policy, {**token, "type": "Opaque"}, resource="secrets") == []


# ---- RoleBindings ------------------------------------------------------------------------------


@pytest.mark.parametrize("subject", [
    group("system:authenticated"), group("system:unauthenticated"), group("system:serviceaccounts"),
    user("system:anonymous"), user("system:serviceaccount:eval:default"), group("eval-eng"), user("mallory@acme.dev"),
    account("eval", "default"), account("kube-system", "default"),
], ids=lambda s: f"{s['kind']}:{s.get('namespace', '')}:{s['name']}")
def test_foreign_and_system_subjects_are_refused(engine, prod, subject):
    messages = admit(engine, policy_for(prod, "llm-finetune"), binding(subject), resource="rolebindings", given=MEMBER)
    assert len(messages) == 1 and messages[0].startswith(f"RoleBinding subject {subject['kind']} '{subject['name']}'")
    assert "is not a member of tenant llm-finetune" in messages[0] and "never system: users or groups" in messages[0]


def test_the_tenants_own_subjects_may_be_bound(engine, prod):
    policy = policy_for(prod, "llm-finetune")
    body = binding(group("llm-finetune-eng"), group("research-all"), account("llm-finetune-data", "etl"), account("llm-finetune", "trainer-ci"))
    assert admit(engine, policy, body, resource="rolebindings", given=MEMBER) == []


def test_identity_patterns_of_the_stack_widen_what_may_be_bound(engine, prod):
    environment = type(prod)(prod.name, prod.platform.model_copy(update={"tenant_access": prod.platform.tenant_access.model_copy(
        update={"bindable_users": r"^[a-z.]+@acme\.dev$"})}), None, prod.tenants)
    policy = policy_for(environment, "llm-finetune")
    assert admit(engine, policy, binding(user("jo.doe@acme.dev")), resource="rolebindings", given=MEMBER) == []
    assert len(admit(engine, policy, binding(user("jo.doe@evil.dev")), resource="rolebindings", given=MEMBER)) == 1


def test_managed_role_bindings_belong_to_the_platform(engine, prod):
    policy = policy_for(prod, "llm-finetune")
    managed = binding(group("llm-finetune-leads"), name="tenant-owners")
    expected = ("RoleBindings tenant-owners, tenant-developers, tenant-viewers of tenant llm-finetune are managed by the "
                "platform (tenant file access); change the tenant file instead, or create a RoleBinding with another name")
    for operation, obj, old in (("UPDATE", managed, managed), ("DELETE", None, managed), ("CREATE", managed, None)):
        assert admit(engine, policy, obj, old=old, operation=operation, resource="rolebindings", given=MEMBER) == [expected]
        assert admit(engine, policy, obj, old=old, operation=operation, resource="rolebindings", given=OPERATOR) == []
    # A binding the owner made may be changed and deleted by them.
    own = binding(group("llm-finetune-eng"))
    assert admit(engine, policy, None, old=own, operation="DELETE", resource="rolebindings", given=MEMBER) == []


def test_one_policy_for_the_environment_one_binding_and_grant_per_tenant_in_its_namespaces_only(prod):
    from components.manifests.build import platform_objects

    policies = [o for o in platform_objects(prod) if o["metadata"]["name"] == "gpu-tenancy-guard"]
    assert [o["kind"] for o in policies] == ["ValidatingAdmissionPolicy"]
    (policy,) = policies
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {
        "matchExpressions": [{"key": "gpu-tenancy.dev/tenant", "operator": "Exists"}]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["paramKind"] == {"apiVersion": "gpu-tenancy.dev/v1alpha1", "kind": "TenantGrant"}
    resources = {r for rule in policy["spec"]["matchConstraints"]["resourceRules"] for r in rule["resources"]}
    assert resources == {"pods", "services", "configmaps", "secrets", "ingresses", "rolebindings", "poddisruptionbudgets", "workloads"}
    # Nothing of a tenant is in the policy: onboarding one changes no other object.
    text = str(policy).replace("online-inference", "")   # a PriorityClass of the stack, not the tenant
    assert [t.name for t in prod.tenants if t.name in text] == []
    (policy_binding,) = viewed(gp.guard_objects, next(t.spec for t in prod.tenants if t.name == "eval"), prod)
    grant = viewed(tenant_grant, next(t.spec for t in prod.tenants if t.name == "eval"), prod)
    assert policy_binding["spec"] == {
        "matchResources": {"namespaceSelector": {"matchLabels": {"gpu-tenancy.dev/tenant": "eval"}}},
        "paramRef": {"name": "eval", "parameterNotFoundAction": "Deny"},
        "policyName": "gpu-tenancy-guard", "validationActions": ["Deny"]}
    assert (grant["kind"], grant["metadata"]["name"], grant["spec"]["tenant"]) == ("TenantGrant", "eval", "eval")
    assert "namespace" not in grant["metadata"]


def test_a_grant_is_valid_against_its_crd_schema(prod):
    """Every example tenant's TenantGrant against the CRD's structural schema (what the API server checks)."""
    import jsonschema

    from components.manifests.tenant_grant import grant_crd

    schema = grant_crd(prod.facts)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for loaded in prod.tenants:
        jsonschema.validate(viewed(tenant_grant, loaded.spec, prod), schema)
    broken = viewed(tenant_grant, prod.tenants[0].spec, prod)
    broken["spec"]["groups"] = "team-a"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


# ---- ConfigMap and Secret size ---------------------------------------------------------------


def test_configmap_and_secret_data_is_bounded_in_bytes_keys_included(engine, prod):
    import base64

    policy = policy_for(prod, "eval")
    bound = prod.platform.guard_rails.data_bytes_per_object

    def config_map(**fields):
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, **fields}

    def secret(**fields):
        return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, **fields}

    def b64(size):
        return base64.b64encode(b"x" * size).decode()

    at_bound = [config_map(data={"a": "x" * (bound - 12)}, binaryData={"b": b64(10)}), secret(data={"a": b64(bound - 1)}),
                config_map(), secret(type="Opaque")]
    for obj in at_bound:
        assert admit(engine, policy, obj, resource=obj["kind"].lower() + "s") == [], obj["metadata"]
    # each one byte above, counting the one-letter keys
    above = [config_map(data={"a": "x" * bound}), config_map(data={"a": "\u00e9" * (bound // 2)}),
             config_map(data={"a": "x" * (bound - 2)}, binaryData={"b": b64(1)}), secret(data={"a": b64(bound)})]
    for obj in above:
        (message,) = admit(engine, policy, obj, resource=obj["kind"].lower() + "s")
        assert message.startswith(f"data of one {obj['kind']} in tenant eval may hold at most {bound} bytes")
        assert f"this one holds {bound + 1} " in message

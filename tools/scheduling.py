"""The scheduling plane: kube-scheduler and Kueue against a control plane (tools/control_plane.py).

On top of the control plane (etcd, kube-apiserver, kube-controller-manager) this starts:

* kube-controller-manager with the **job controller** besides the lane's usual ones
  (Kueue unsuspends a Job; the job controller then creates its pods);
* **kube-scheduler** (`tools/kube-scheduler`, same Kubernetes module and version as
  the API server), which binds pods to the Nodes registered below;
* the **Kueue controller manager** (`tools/controllers`, `sigs.k8s.io/kueue` at
  `KUEUE_VERSION`, the release whose CRDs `components/data/kueue` ships), with:
  - every Kueue CRD from that module's own source (`config/components/crd/bases`, read
    from the Go module cache `tools/build.sh` fills), the conversion webhook of the CRDs
    upstream patches (`crd/kustomization.yaml`) pointed at Kueue on loopback;
  - its webhooks (`config/components/webhook/manifests.yaml`) for the Kueue API group,
    `batch` Jobs and Pods (the `pod` integration, which gates a labelled pod until its
    Workload is admitted), pointed at `https://127.0.0.1:<port>/<path>` (no Service, no
    kube-proxy), and those of its `rayjob`, `raycluster` and `leaderworkerset` integrations, whose
    CRDs (KubeRay's, LWS's, at the versions Kueue's go.mod requires) are installed before it starts
    and whose operators the tests impersonate (none is built); webhooks of frameworks the lane does
    not enable (Deployments, ...) are left out, as Kueue answers them with a no-op;
  - certificates minted here: a throw-away CA and a serving certificate for both
    `kueue-webhook-service.kueue-system.svc` and `127.0.0.1`, stored in the Secret Kueue's
    internal certificate manager reads (it keeps valid certificates and injects the CA into
    the webhook configurations and CRDs), and written to its `certDir` as the kubelet would
    mount the Secret.

* the **JobSet controller manager** (`tools/controllers`, `sigs.k8s.io/jobset` at `JOBSET_VERSION`,
  the release Kueue requires) on every Kueue stack, Kueue's `jobset` integration enabled:
  - its CRD from that module's own source (`config/components/crd/bases`; it serves one version, so
    the conversion webhook upstream patches in is never called and is left out);
  - its webhooks (`config/components/webhook/manifests.yaml` with upstream's patches, which select
    only the pods of a JobSet) pointed at loopback with a certificate minted here, its internal
    certificate management off (it would write to a fixed `/tmp` directory);
  - its own identity, the ServiceAccount `jobset-system/jobset-controller-manager`, with upstream's
    ClusterRole (`config/components/rbac/role.yaml`): what the queue policy trusts of the JobSet
    controller (it may update `jobsets/status`) is proven with the RBAC it really has.

Nodes: no kubelet runs. Each static node of the stack is registered with the labels the
kubelet and GPU Feature Discovery set, then the stack's own node patches are applied, and its
`status` gets `capacity`/`allocatable` for cpu, memory, ephemeral-storage, pods and the GPU resources its pool
offers (`nvidia.com/gpu`, the time-sliced share, the MIG profiles of its layout) and a Ready
condition. kube-scheduler binds pods to them; bound pods stay Pending (nothing runs them),
which is all the tests need.

The lane (`make e2e-scheduling`) is tests/e2e/scheduling.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import yaml

from components.manifests.kueue import kueue_configuration
from tools.applied_stack import AppliedStack, install_crds, wait_policies_in_force
from tools.control_plane import (
    BIN_DIR,
    CONTROLLERS,
    REPO_ROOT,
    VERSIONS,
    ControlPlane,
    free_port,
    missing_binaries,
)

KUEUE_VERSION = VERSIONS["KUEUE_VERSION"]
JOBSET_VERSION = VERSIONS["JOBSET_VERSION"]
SCHEDULING_BINARIES = ("kube-scheduler", "kueue", "jobset")
# Set by `make e2e-scheduling`: a scheduling lane that cannot run fails instead of skipping.
REQUIRED_ENV = "GPU_TENANCY_SCHEDULING_REQUIRED"
KUEUE_NAMESPACE = "kueue-system"
KUEUE_SERVICE = "kueue-webhook-service"          # Kueue's defaults (internalCertManagement)
KUEUE_SECRET = "kueue-webhook-server-cert"
KUEUE_WEBHOOK_PREFIX = "kueue-"                   # upstream's kustomize namePrefix
# The rotator of Kueue's internal certificate manager accepts a CA whose certificate is
# valid for this name (cert-controller verifies it like a serving certificate).
KUEUE_CA_NAME = "kueue-ca"
WEBHOOK_GROUPS = {"kueue.x-k8s.io", "batch", "jobset.x-k8s.io", "ray.io", "leaderworkerset.x-k8s.io", ""}   # "": core, for the pod integration
# Upstream's kustomize (config/default): namespace, name prefix, and the names its manager reads.
JOBSET_NAMESPACE = "jobset-system"
JOBSET_PREFIX = "jobset-"
JOBSET_SERVICE_ACCOUNT = "jobset-controller-manager"
JOBSET_USER = f"system:serviceaccount:{JOBSET_NAMESPACE}:{JOBSET_SERVICE_ACCOUNT}"


def _cache_dir() -> Path:
    return Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")


def kueue_module_dir() -> Path:
    """Kueue's module source in the shared Go module cache (tools/build.sh downloads it)."""
    return _cache_dir() / "go" / "mod" / "sigs.k8s.io" / f"kueue@{KUEUE_VERSION}"


def jobset_module_dir() -> Path:
    """JobSet's module source in the shared Go module cache (tools/build.sh downloads it)."""
    return _cache_dir() / "go" / "mod" / "sigs.k8s.io" / f"jobset@{JOBSET_VERSION}"


def required_module_dir(module: str) -> Path:
    """The module source of `module` at the version Kueue's go.mod requires (KubeRay, LWS): whose
    CRDs Kueue's integrations are built against."""
    for line in (kueue_module_dir() / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == module:
            return _cache_dir() / "go" / "mod" / module.rsplit("/", 1)[0] / f"{module.rsplit('/', 1)[1]}@{words[1]}"
    raise LookupError(f"Kueue's go.mod requires no {module}")


# The CRDs of the frameworks whose controllers the lane does not run but whose Kueue integrations it
# enables (their controllers are impersonated by the tests): module -> CRD files under config/crd/bases.
INTEGRATION_CRDS = {
    "github.com/ray-project/kuberay/ray-operator": ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml"),
    "sigs.k8s.io/lws": ("leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
}


def integration_crd_paths() -> list[Path]:
    """The CRD files of INTEGRATION_CRDS, at the versions Kueue requires."""
    return [required_module_dir(module) / "config" / "crd" / "bases" / name for module, names in INTEGRATION_CRDS.items() for name in names]


def scheduling_unavailable_reason() -> str:
    missing = [b for b in (*missing_binaries(), *SCHEDULING_BINARIES) if not os.access(BIN_DIR / b, os.X_OK)]
    if missing:
        return (f"scheduling lane: {', '.join(sorted(set(missing)))} not built in {BIN_DIR}; run "
                "`make e2e-scheduling` (tools/build.sh builds them from Go modules, cached)")
    for name, module in (("Kueue", kueue_module_dir()), ("JobSet", jobset_module_dir())):
        if not (module / "config" / "components" / "crd" / "bases").is_dir():
            return (f"scheduling lane: {name}'s CRDs are read from its module source {module}, "
                    f"which is missing; run `tools/build.sh {name.lower()}` (it downloads the module)")
    missing_crds = [str(p) for p in integration_crd_paths() if not p.is_file()]
    if missing_crds:
        return f"scheduling lane: the CRDs of Kueue's Ray and LWS integrations are missing: {', '.join(missing_crds)}"
    return ""


# --------------------------------------------------------------------------
# Kueue's webhook certificates
# --------------------------------------------------------------------------


def mint_webhook_certs(directory: Path, service: str = f"{KUEUE_SERVICE}.{KUEUE_NAMESPACE}.svc",
                       ca_name: str = KUEUE_CA_NAME) -> dict[str, bytes]:
    """A CA and a serving certificate (for `service` and 127.0.0.1) Kueue's certificate rotator keeps as they are.

    cert-controller regenerates (and the apiserver could then not verify 127.0.0.1) unless:
    the CA certificate verifies for the name `kueue-ca`, its key is PKCS#1 RSA, and both
    certificates stay valid for 90 days from now. Returns the Secret's data.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    until = now + datetime.timedelta(days=365)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca = (
        x509.CertificateBuilder().subject_name(ca_subject).issuer_name(ca_subject).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(ca_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    dns = service
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns)]))
        .issuer_name(ca_subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(dns), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    rsa_pkcs1 = serialization.PrivateFormat.TraditionalOpenSSL
    data = {
        "ca.crt": ca.public_bytes(pem),
        "ca.key": ca_key.private_bytes(pem, rsa_pkcs1, serialization.NoEncryption()),
        "tls.crt": cert.public_bytes(pem),
        "tls.key": key.private_bytes(pem, rsa_pkcs1, serialization.NoEncryption()),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):   # what the kubelet would mount from the Secret
        (directory / name).write_bytes(data[name])
        (directory / name).chmod(0o600)
    return data


# --------------------------------------------------------------------------
# Kueue's CRDs and webhooks, from its module source, pointed at loopback
# --------------------------------------------------------------------------


def _yaml_docs(path: Path) -> list[dict[str, Any]]:
    import yaml

    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def conversion_crds(module: Path) -> set[str]:
    """Plural names of the CRDs whose conversion webhook upstream's kustomization enables."""
    text = (module / "config" / "components" / "crd" / "kustomization.yaml").read_text()
    return set(re.findall(r"^- path: patches/webhook_in_([a-z]+)\.yaml\s*$", text, flags=re.M))


def kueue_crds(module: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    converted = conversion_crds(module)
    crds = []
    for path in sorted((module / "config" / "components" / "crd" / "bases").glob("*.yaml")):
        for doc in _yaml_docs(path):
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            if doc["spec"]["names"]["plural"] in converted:
                doc["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {"clientConfig": {"url": f"{webhook_url}/convert", "caBundle": ca_bundle},
                                "conversionReviewVersions": ["v1"]},
                }
            crds.append(doc)
    return crds


def kueue_webhook_configurations(module: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    configs = []
    for doc in _yaml_docs(module / "config" / "components" / "webhook" / "manifests.yaml"):
        hooks = []
        for hook in doc.get("webhooks", []):
            groups = {g for rule in hook.get("rules", []) for g in rule.get("apiGroups", [])}
            if not groups & WEBHOOK_GROUPS:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{webhook_url}{path}", "caBundle": ca_bundle}
            if "kueue.x-k8s.io" not in groups:   # upstream's kustomize patch for job webhooks
                hook["namespaceSelector"] = {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                    "values": ["kube-system", KUEUE_NAMESPACE]}]}
            hooks.append(hook)
        doc["metadata"]["name"] = KUEUE_WEBHOOK_PREFIX + doc["metadata"]["name"]
        doc["webhooks"] = hooks
        configs.append(doc)
    return configs


def jobset_crds(module: Path) -> list[dict[str, Any]]:
    """JobSet's CRDs from its module source, as upstream's kustomization lists them."""
    return [doc for path in sorted((module / "config" / "components" / "crd" / "bases").glob("*.yaml"))
            for doc in _yaml_docs(path) if doc.get("kind") == "CustomResourceDefinition"]


def jobset_webhook_configurations(module: Path, webhook_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """JobSet's webhook configurations with upstream's patches (JSON patches replacing a webhook by
    index, `config/components/webhook/patches`), named as its kustomize names them, pointed at loopback."""
    import yaml

    webhook_dir = module / "config" / "components" / "webhook"
    kustomization = yaml.safe_load((webhook_dir / "kustomization.yaml").read_text())
    patches = {p["target"]["kind"]: yaml.safe_load((webhook_dir / p["path"]).read_text()) for p in kustomization.get("patches", [])}
    configs = []
    for doc in _yaml_docs(webhook_dir / "manifests.yaml"):
        for op in patches.get(doc["kind"], []):
            assert op["op"] == "replace" and op["path"].startswith("/webhooks/"), op   # all upstream has
            doc["webhooks"][int(op["path"].rsplit("/", 1)[1])] = op["value"]
        for hook in doc["webhooks"]:
            hook["clientConfig"] = {"url": f"{webhook_url}{hook['clientConfig']['service']['path']}", "caBundle": ca_bundle}
        doc["metadata"]["name"] = JOBSET_PREFIX + doc["metadata"]["name"]
        configs.append(doc)
    return configs


def jobset_cluster_role(module: Path) -> dict[str, Any]:
    """Upstream's ClusterRole of the JobSet manager (`config/components/rbac/role.yaml`), with its kustomize name."""
    (role,) = [d for d in _yaml_docs(module / "config" / "components" / "rbac" / "role.yaml") if d.get("kind") == "ClusterRole"]
    role["metadata"] = {"name": JOBSET_PREFIX + role["metadata"]["name"]}
    return role


def _manager_config(api_version: str, health_port: int, webhook_port: int, cert_dir: Path, *more: str) -> str:
    """A controller-runtime manager's Configuration (Kueue's, JobSet's): every listener on loopback
    (probes on `health_port`, webhooks on `webhook_port` with the certificates in `cert_dir`, no
    metrics), no leader election, then `more` lines."""
    return "\n".join([
        f"apiVersion: {api_version}",
        "kind: Configuration",
        "health:",
        f"  healthProbeBindAddress: 127.0.0.1:{health_port}",
        "metrics:",
        '  bindAddress: "0"',
        "webhook:",
        "  host: 127.0.0.1",
        f"  port: {webhook_port}",
        f"  certDir: {cert_dir}",
        "leaderElection:",
        "  leaderElect: false",
        *more,
        "",
    ])


def jobset_config(health_port: int, webhook_port: int, cert_dir: Path) -> str:
    return _manager_config(
        "config.jobset.x-k8s.io/v1alpha1", health_port, webhook_port, cert_dir,
        "internalCertManagement:",
        "  enable: false",   # its rotator writes to /tmp/k8s-webhook-server; the certificates are minted here
    )


# What Kueue's shipped kueue-manager-config sets (config/components/manager/controller_manager_config.yaml
# of its module) that the lane keeps as upstream has it: each controller's worker count
# (controller-runtime's default is one: Kueue's Job reconciler then unsuspended 81 of 3,651 admitted
# Jobs in ten minutes of a 1,000-tenant run) and its client's rate limits.
UPSTREAM_MANAGER_FIELDS = ("controller", "clientConnection")


def upstream_manager_fields(module: Path) -> dict[str, Any]:
    """UPSTREAM_MANAGER_FIELDS of the Configuration Kueue's module ships; at v0.19.2, for example,
    `upstream_manager_fields(kueue_module_dir())["controller"]["groupKindConcurrency"]["Job.batch"]` is 5."""
    shipped = yaml.safe_load((module / "config" / "components" / "manager" / "controller_manager_config.yaml").read_text())
    return {field: shipped[field] for field in UPSTREAM_MANAGER_FIELDS}


def kueue_config(health_port: int, webhook_port: int, cert_dir: Path, stack_fields: dict | None = None,
                 upstream: dict | None = None) -> str:
    """Kueue's Configuration for the lane: `upstream` (`upstream_manager_fields`: what Kueue's shipped
    configuration sets for its controllers' workers and its client), plus the fields the stack needs
    Kueue to hold (`components.manifests.kueue.kueue_configuration`: its DRA deviceClassMappings), as
    a real installation holds them in its kueue-manager-config.

    >>> "  deviceClassMappings: []" in kueue_config(1, 2, Path("/c"), {"resources": {"deviceClassMappings": []}}).splitlines()
    True
    >>> "    Job.batch: 5" in kueue_config(1, 2, Path("/c"), upstream={"controller": {"groupKindConcurrency": {"Job.batch": 5}}}).splitlines()
    True
    """
    more = [line for fields in (upstream, stack_fields) if fields for line in yaml.safe_dump(fields, sort_keys=True).splitlines()]
    return _manager_config(
        "config.kueue.x-k8s.io/v1beta2", health_port, webhook_port, cert_dir,
        f"namespace: {KUEUE_NAMESPACE}",
        "internalCertManagement:",
        "  enable: true",
        f"  webhookServiceName: {KUEUE_SERVICE}",
        f"  webhookSecretName: {KUEUE_SECRET}",
        "featureGates:",
        "  VisibilityOnDemand: false",   # would start an extra API server on a fixed port
        "integrations:",
        # pod: bare GPU pods queue too; jobset: one Workload per JobSet (docs/queues-and-vclusters.md)
        # ray, lws: their CRDs only (the operators are impersonated), docs/queues-and-vclusters.md
        "  frameworks: [batch/job, pod, jobset.x-k8s.io/jobset, ray.io/rayjob, ray.io/raycluster, leaderworkerset.x-k8s.io/leaderworkerset]",
        *more,
    )


# --------------------------------------------------------------------------
# The control plane with the scheduler and Kueue
# --------------------------------------------------------------------------


class SchedulingPlane:
    """A ControlPlane plus kube-scheduler and Kueue (all stopped with the plane)."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.kueue_health = ""

    def start_scheduler(self) -> None:
        cfg = self.cp.kubeconfig_for("system:kube-scheduler", ["system:masters"], name="kube-scheduler")
        self.cp._start("kube-scheduler", [
            f"--kubeconfig={cfg}",
            "--leader-elect=false",
            "--secure-port=0",
            "--profiling=false",
            "--v=1",
        ])

    def _wait_ready(self, url: str, what: str, timeout: float) -> None:
        cp = self.cp

        def ready() -> bool:
            cp._check_alive()
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    return r.status == 200
            except Exception:
                return False

        cp.wait_for(ready, timeout=timeout, interval=0.5, what=what)

    def _install_crds(self, crds: list[dict[str, Any]], field_manager: str) -> None:
        from kubernetes import client as k8s_client

        cp = self.cp
        for crd in crds:
            cp.apply(crd, field_manager=field_manager)
        ext = k8s_client.ApiextensionsV1Api(cp.api_client)

        def established(name: str) -> bool:
            conds = ext.read_custom_resource_definition(name).status.conditions or []
            return any(c.type == "Established" and c.status == "True" for c in conds)

        for crd in crds:
            name = crd["metadata"]["name"]
            cp.wait_for(lambda n=name: established(n), timeout=60, what=f"CRD {name} Established")
        cp.dynamic.resources.invalidate_cache()

    def start_jobset(self, timeout: float = 120.0) -> float:
        """Install JobSet's CRD, RBAC and webhooks, start its controller as its ServiceAccount, wait until
        its webhooks serve. Returns seconds. Before Kueue: Kueue's jobset integration needs the CRD."""
        started = time.monotonic()
        cp, module = self.cp, jobset_module_dir()
        webhook_port, health_port = free_port(), free_port()
        cert_dir = cp.workdir / "jobset-certs"
        data = mint_webhook_certs(cert_dir, f"{JOBSET_PREFIX}webhook-service.{JOBSET_NAMESPACE}.svc", f"{JOBSET_PREFIX}ca")
        ca_bundle = base64.b64encode(data["ca.crt"]).decode()
        self._install_crds(jobset_crds(module), "e2e-jobset-install")
        cp.create_namespace(JOBSET_NAMESPACE)
        role = jobset_cluster_role(module)
        cp.apply(role, field_manager="e2e-jobset-install")
        cp.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                  "metadata": {"name": role["metadata"]["name"] + "binding"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role["metadata"]["name"]},
                  "subjects": [{"kind": "ServiceAccount", "name": JOBSET_SERVICE_ACCOUNT, "namespace": JOBSET_NAMESPACE}]},
                 field_manager="e2e-jobset-install")
        for config in jobset_webhook_configurations(module, f"https://127.0.0.1:{webhook_port}", ca_bundle):
            cp.apply(config, field_manager="e2e-jobset-install")
        config_path = cp.workdir / "jobset-config.yaml"
        config_path.write_text(jobset_config(health_port, webhook_port, cert_dir))
        kubeconfig = cp.kubeconfig_for(JOBSET_USER, ["system:serviceaccounts", f"system:serviceaccounts:{JOBSET_NAMESPACE}"],
                                       name="jobset")
        cp._start("jobset", [f"--config={config_path}", f"--kubeconfig={kubeconfig}", "--zap-log-level=2"])
        self._wait_ready(f"http://127.0.0.1:{health_port}/readyz", "JobSet readyz (webhook server serving)", timeout)
        return time.monotonic() - started

    def start_kueue(self, timeout: float = 120.0, stack_fields: dict | None = None) -> float:
        """Install Kueue's CRDs and webhooks, start it (its Configuration holding `stack_fields`, see
        `kueue_config`), wait until its webhooks serve. Returns seconds."""
        from kubernetes import client as k8s_client

        started = time.monotonic()
        cp, module = self.cp, kueue_module_dir()
        webhook_port, health_port = free_port(), free_port()
        cert_dir = cp.workdir / "kueue-certs"
        data = mint_webhook_certs(cert_dir)
        ca_bundle = base64.b64encode(data["ca.crt"]).decode()
        url = f"https://127.0.0.1:{webhook_port}"
        # Kueue's Ray and LWS integrations need their CRDs when it starts.
        self._install_crds([doc for path in integration_crd_paths() for doc in _yaml_docs(path)], "e2e-kueue-install")
        self._install_crds(kueue_crds(module, url, ca_bundle), "e2e-kueue-install")
        cp.create_namespace(KUEUE_NAMESPACE)
        k8s_client.CoreV1Api(cp.api_client).create_namespaced_secret(KUEUE_NAMESPACE, {
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": KUEUE_SECRET},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})
        for config in kueue_webhook_configurations(module, url, ca_bundle):
            cp.apply(config, field_manager="e2e-kueue-install")
        config_path = cp.workdir / "kueue-config.yaml"
        config_path.write_text(kueue_config(health_port, webhook_port, cert_dir, stack_fields, upstream_manager_fields(module)))
        kubeconfig = cp.kubeconfig_for("kueue-controller-manager", ["system:masters"], name="kueue")
        cp._start("kueue", [f"--config={config_path}", f"--kubeconfig={kubeconfig}", "--zap-log-level=2"])
        self.kueue_health = f"http://127.0.0.1:{health_port}/readyz"
        self._wait_ready(self.kueue_health, "Kueue readyz (webhook server serving)", timeout)
        return time.monotonic() - started


# --------------------------------------------------------------------------
# Nodes with capacity
# --------------------------------------------------------------------------

NODE_CPU, NODE_MEMORY, NODE_EPHEMERAL, NODE_PODS = "128", "1Ti", "3Ti", "110"


def node_allocatable(platform: Any, pool_name: str) -> dict[str, str]:
    """What one node of the pool advertises: cpu/memory/pods and its pool's GPU resources."""
    from components.fleet import gpu_capacity as cap

    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "ephemeral-storage": NODE_EPHEMERAL, "pods": NODE_PODS}
    pool = platform.node_pools[pool_name]
    if cap.is_dra_only(platform, pool.gpu_class):   # no device plugin runs there: the DRA driver publishes ResourceSlices
        return resources
    for resource, count in cap.node_gpu_resources(platform, pool).items():
        resources[resource] = str(count)
    return resources


def inventory_nodes(environment: Any) -> Iterator[tuple[str, str, dict[str, str], dict[str, str]]]:
    """(node, pool, labels the kubelet and GFD set, allocatable) for every static node of the stack."""
    platform = environment.platform
    for pool_name, pool in sorted(platform.node_pools.items()):
        gpu_class = platform.gpu_classes.get(pool.gpu_class)
        allocatable = node_allocatable(platform, pool_name)
        for node in pool.nodes:
            labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux",
                      "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "gpu-e2e"}
            if gpu_class is not None and gpu_class.product is not None:   # none on the GPU Operator's DRA stack (no GFD)
                labels["nvidia.com/gpu.product"] = gpu_class.product
            yield node, pool_name, labels, allocatable


def register_ready_nodes(cp: ControlPlane, environment: Any) -> dict[str, str]:
    """Create every static node (kubelet/GFD labels), ready with capacity. Returns node -> pool."""
    from kubernetes import client as k8s_client

    core = k8s_client.CoreV1Api(cp.api_client)
    pools = {}
    for node, pool_name, labels, allocatable in inventory_nodes(environment):
        cp.create_node(node, labels, field_manager="kubelet")
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        core.patch_node_status(node, {"status": {
            "capacity": allocatable, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "registered by the e2e scheduling lane (no kubelet)",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
        }})
        pools[node] = pool_name
    return pools


NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def clear_not_ready_taints(cp: ControlPlane, nodes: Iterable[str]) -> None:
    """Remove the `not-ready` taint the API server puts on every new Node, as the node lifecycle
    controller does once the node reports Ready (that controller does not run: with no kubelet
    heartbeats it would mark every node unreachable). Other taints (ours) stay."""
    from kubernetes import client as k8s_client

    core = k8s_client.CoreV1Api(cp.api_client)
    for name in nodes:
        taints = core.read_node(name).spec.taints or []
        keep = [cp.api_client.sanitize_for_serialization(t) for t in taints if t.key != NOT_READY_TAINT]
        if len(keep) != len(taints):
            core.patch_node(name, {"spec": {"taints": keep}}, field_manager="node-lifecycle-controller")


@contextlib.contextmanager
def cpu_node(cp: ControlPlane, name: str, cpu: str = "2") -> Iterator[str]:
    """One untainted, Ready node without GPUs, as every cluster has for CPU work, removed afterwards:
    the GPU nodes are all tainted (dedicated pools by tenant, shared ones, MIG pools included, by the
    GPU taint), so a CPU-only pod has nowhere else to go."""
    from kubernetes import client as k8s_client

    core = k8s_client.CoreV1Api(cp.api_client)
    cp.create_node(name, {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}, field_manager="kubelet")
    allocatable = {"cpu": cpu, "memory": NODE_MEMORY, "ephemeral-storage": NODE_EPHEMERAL, "pods": NODE_PODS}
    core.patch_node_status(name, {"status": {"capacity": allocatable, "allocatable": allocatable, "conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e CPU node (no kubelet)"}]}})
    clear_not_ready_taints(cp, [name])
    try:
        yield name
    finally:
        core.delete_node(name)


class SchedulingStack(AppliedStack):
    """An example stack applied to a SchedulingPlane, with its nodes' pools."""

    plane: SchedulingPlane
    node_pool: dict[str, str]
    timings: dict[str, float]


# job-controller creates the pods of a Job Kueue unsuspends; garbage-collector-controller deletes
# them (and the Workload) with their Job between tests.
SCHEDULING_CONTROLLERS = (*CONTROLLERS, "job-controller", "garbage-collector-controller")


def ready_nodes(plane: SchedulingPlane, environment: Any, timings: dict[str, float]) -> dict[str, str]:
    """The scheduling lane's nodes: registered Ready by hand (`register_ready_nodes`), as no kubelet runs."""
    return register_ready_nodes(plane.cp, environment)


def start_scheduling_stack(stack: str, workdir: Path, root: Path = REPO_ROOT, *,
                           controllers: Iterable[str] = SCHEDULING_CONTROLLERS,
                           nodes: Callable[[SchedulingPlane, Any, dict[str, float]], dict[str, str]] = ready_nodes,
                           flags: Mapping[str, Sequence[str]] | None = None) -> SchedulingStack:
    """The stack applied to a control plane with `controllers`, kube-scheduler, Kueue and JobSet (Kueue
    stacks), its inventory registered by `nodes` (which returns node -> pool and may add to the timings);
    `flags` adds to a component's own (ControlPlane)."""
    cp = ControlPlane(BIN_DIR, workdir, controllers=controllers, flags=flags)
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        cp.start()
        timings["control plane"] = time.monotonic() - t0
        plane = SchedulingPlane(cp)
        plane.start_scheduler()
        environment, objects = AppliedStack.render(stack, root)
        if environment.platform.scheduler == "kueue":
            timings["jobset"] = plane.start_jobset()
            timings["kueue"] = plane.start_kueue(stack_fields=kueue_configuration(environment.platform))
        # The vendored CRDs of the custom objects the builders emit (KAI Queues, PrometheusRules).
        # Kueue's are byte-identical to the ones just installed from its module, and server-side
        # apply leaves the conversion webhook, which the vendored files do not set, in place.
        install_crds(cp)
        t1 = time.monotonic()
        cp.create_namespace(environment.platform.gpu_operator.namespace)
        if environment.platform.monitoring is not None:   # kube-prometheus-stack's, as prod_stack does
            cp.create_namespace(environment.platform.monitoring.namespace)
        before = set(timings)
        node_pool = nodes(plane, environment, timings)
        own = sum(v for k, v in timings.items() if k not in before)   # what `nodes` timed (kwok) is not the apply's
        applied = SchedulingStack(environment, objects, [], {}, [])
        applied.results = cp.apply_rendered(applied.all_objects)
        clear_not_ready_taints(cp, node_pool)
        cp.wait_namespaces_ready(applied.all_objects)
        wait_policies_in_force(cp)
        timings["apply stack"] = time.monotonic() - t1 - own
    except BaseException:
        cp.stop()
        raise
    applied.plane, applied.node_pool, applied.timings = plane, node_pool, timings
    return applied


def running_scheduling_stack(stack: str, e2e_summary: list[str], root: Path = REPO_ROOT, what: str = "",
                             lane: str = "scheduling lane", **start: Any) -> Iterator[SchedulingStack]:
    """A started SchedulingStack for a fixture to yield (stopped and cleaned up after), its start-up times
    appended to `e2e_summary` under `lane`; `start` goes to `start_scheduling_stack`; GPU_TENANCY_E2E_KEEP=1
    keeps its directory."""
    workdir = Path(tempfile.mkdtemp(prefix="gpu-tenancy-sched-"))
    keep = os.environ.get("GPU_TENANCY_E2E_KEEP") == "1"
    try:
        applied = start_scheduling_stack(stack, workdir, root, **start)
        e2e_summary.append(f"{lane} ({what or stack}): "
                           + ", ".join(f"{k} {v:.1f}s" for k, v in applied.timings.items()))
        yield applied
        applied.plane.cp.stop()
    finally:
        if keep:
            sys.stderr.write(f"\n[e2e] kept scheduling control-plane dir {workdir}\n")
        else:
            shutil.rmtree(workdir, ignore_errors=True)

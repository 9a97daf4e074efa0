"""A throw-away Kubernetes control plane of the *real* upstream binaries (envtest-style).

etcd, kube-apiserver and kube-controller-manager, pinned in ``tools/versions.env`` and built by
``tools/build.sh`` into ``$GPU_TENANCY_CACHE_DIR/k8s/<K8S_VERSION>/``, started on loopback ports
with certificates minted here by the ``cryptography`` package. No kubelet, scheduler or nodes: pods
are admitted (quota, LimitRange, PodSecurity, ValidatingAdmissionPolicy, RBAC all real) but never
run. Used by the e2e lanes (tests/e2e: the ``apiserver`` fixture), the engine harness
(tools/engine.py) and ``make up``.

:class:`ControlPlane`: ``.api_client`` (admin, ``system:masters``), ``.client_for(user, groups)``
(ApiClient authenticating with a minted client certificate, CN=user, O=each group),
``.kubeconfig`` (admin kubeconfig path), ``.kubeconfig_for(user, groups)``, ``.apply(manifest)``
(server-side apply), ``.create_namespace()``, ``.wait_for(...)``.

Knobs (shared with tools/build.sh): ``GPU_TENANCY_CACHE_DIR`` (default ``<repo>/.cache``; binaries
in ``$GPU_TENANCY_CACHE_DIR/k8s/<K8S_VERSION>``), ``GPU_TENANCY_K8S_BIN_DIR`` (use binaries from
exactly this directory).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence


from tools.lanes import tool_versions
from tools.procfs import proc_stat

REPO_ROOT = Path(__file__).resolve().parents[1]
TOOLS_DIR = REPO_ROOT / "tools"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
# The field manager of the rendered objects (`apply_rendered`), as the Pulumi provider's patches use.
FIELD_MANAGER = "gpu-tenancy"
# A node's taint patch names no field manager: the Pulumi provider gives each its own
# (`pulumi-kubernetes-<random>`, kept in the state); the e2e lanes stand in with this one.
TAINT_PATCH_MANAGER = "pulumi-kubernetes-taints"

# Controllers needed for quota status (ResourceQuota admission rejects
# quota-tracked requests until the controller has filled in status) and for
# namespace deletion / default ServiceAccounts (ServiceAccount admission needs
# the "default" SA before a pod can be created in a namespace).
CONTROLLERS = (
    "resourcequota-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    # Fills in the aggregated ClusterRoles admin/edit/view (they are created
    # with empty rules); without it a RoleBinding to "edit" grants nothing.
    "clusterrole-aggregation-controller",
    # Type-checks ValidatingAdmissionPolicies into status.typeChecking (CEL
    # warnings such as a field that does not exist on the matched kind).
    "validatingadmissionpolicy-status-controller",
    # The Pulumi Kubernetes provider deletes with foreground propagation: the object keeps a
    # foregroundDeletion finalizer that only the garbage collector removes (without it, deleting
    # a cluster-scoped object waits for the provider's 10-minute timeout). tests/e2e/pulumi_engine.
    "garbage-collector-controller",
    # Creates a pod's ResourceClaims from its ResourceClaimTemplates, the claims that quota then
    # meters per DeviceClass (tests/e2e/test_tenancy_dra.py).
    "resource-claim-controller",
)


# The quota controller recalculates a quota from its informer's copy and writes only when usage
# differs from that copy; a pod deleted right after admission charged it can be "released" against
# a copy that never saw the charge, and the charge then stays until the next full resync (5 min by
# default). Tests create and delete pods in quick succession, so they resync often. A full resync
# walks every ResourceQuota (8 per tenant), so benchmarks of a large fleet use the upstream default.
TEST_QUOTA_SYNC_PERIOD = "5s"
UPSTREAM_QUOTA_SYNC_PERIOD = "5m0s"


VERSIONS = tool_versions()
K8S_VERSION = VERSIONS["K8S_VERSION"]


def _bin_dir() -> Path:
    override = os.environ.get("GPU_TENANCY_K8S_BIN_DIR")
    if override:
        return Path(override)
    cache = Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")
    return cache / "k8s" / K8S_VERSION


BIN_DIR = _bin_dir()


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if not os.access(BIN_DIR / b, os.X_OK)]


try:
    from kubernetes import client as k8s_client
    from kubernetes import dynamic as k8s_dynamic
    from kubernetes.client.rest import ApiException

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    _IMPORT_ERROR = ""
except ImportError as _exc:  # pragma: no cover - depends on the environment
    _IMPORT_ERROR = (
        f"real-apiserver e2e lane: {_exc}; install the test extras "
        "(`pip install -e '.[test]'`, or `pip install kubernetes cryptography`)."
    )
    k8s_client = None  # the lanes are gated off (lane_unavailable_reason) before anything uses it


def lane_unavailable_reason(build: bool = False) -> str:
    """Why the lane cannot run here ("" if it can). May run tools/build.sh."""
    if _IMPORT_ERROR:
        return _IMPORT_ERROR
    missing = missing_binaries()
    if not missing:
        return ""
    listed = ", ".join(missing)
    if shutil.which("go") is None:
        return (
            f"real-apiserver e2e lane: {listed} not found in {BIN_DIR} and `go` is not "
            "on PATH to build them. Install Go >= 1.26 (https://go.dev/dl/, put its bin/ on "
            "PATH), then run `make e2e` (or `tools/build.sh` once, ~7 min cold on 2 cores)."
        )
    if build:
        rc = subprocess.call(["bash", str(TOOLS_DIR / "build.sh")], stdout=sys.stderr)
        if rc == 0 and not missing_binaries():
            return ""
        return f"real-apiserver e2e lane: tools/build.sh failed (exit {rc}); see its output above"
    return (
        f"real-apiserver e2e lane: {listed} not built in {BIN_DIR}. Run `make e2e` "
        "(or `tools/build.sh`, ~7 min cold, <1 s warm), or set GPU_TENANCY_E2E_BUILD=1 "
        "to build from pytest."
    )


# --------------------------------------------------------------------------
# Certificates
# --------------------------------------------------------------------------


def _write_key(path: Path, key: Any) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


class CertAuthority:
    """A throw-away CA that mints serving and client certificates (EC P-256)."""

    def __init__(self, directory: Path, common_name: str = "gpu-tenancy-e2e-ca") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
        self.cert_path = self.dir / "ca.crt"
        self._client_cache: dict[tuple[str, tuple[str, ...]], tuple[Path, Path]] = {}
        # A kept cluster (`make up`) restarts with its CA: etcd's objects and the kubeconfigs
        # handed out stay trusted. One that would expire within a day is replaced.
        kept = _kept_ca(self.dir, self._now + datetime.timedelta(days=1))
        if kept is not None:
            self.key, self.cert = kept
            return
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self.cert = (
            self._builder(name, name, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=True,
                    crl_sign=True, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        _write_cert(self.cert_path, self.cert)
        _write_key(self.dir / "ca.key", self.key)

    def _builder(self, subject: x509.Name, issuer: x509.Name, public_key: Any) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + datetime.timedelta(days=2))
        )

    def _leaf(self, subject: x509.Name, usage: x509.ObjectIdentifier,
              sans: list[x509.GeneralName] | None, stem: str) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            self._builder(subject, self.cert.subject, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, content_commitment=False, key_encipherment=False,
                    data_encipherment=False, key_agreement=False, key_cert_sign=False,
                    crl_sign=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = self.dir / f"{stem}.crt", self.dir / f"{stem}.key"
        _write_cert(cert_path, cert)
        _write_key(key_path, key)
        return cert_path, key_path

    def serving_cert(self, stem: str = "serving") -> tuple[Path, Path]:
        sans: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes"),
            x509.DNSName("kubernetes.default"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")])
        return self._leaf(subject, ExtendedKeyUsageOID.SERVER_AUTH, sans, stem)

    def client_cert(self, user: str, groups: Iterable[str] = ()) -> tuple[Path, Path]:
        """(cert, key) paths for CN=user with one O=group per group (cached)."""
        groups_t = tuple(groups)
        with self._lock:
            cached = self._client_cache.get((user, groups_t))
            if cached:
                return cached
            attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups_t]
            attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
            stem = f"client-{len(self._client_cache):04d}"
            paths = self._leaf(x509.Name(attrs), ExtendedKeyUsageOID.CLIENT_AUTH, None, stem)
            self._client_cache[(user, groups_t)] = paths
            return paths


def _kept_ca(directory: Path, valid_until: datetime.datetime) -> tuple[Any, x509.Certificate] | None:
    """The CA a previous start left in `directory`, if it is still valid at `valid_until`.

    >>> _kept_ca(Path("/nonexistent"), datetime.datetime.now(datetime.timezone.utc)) is None
    True
    """
    cert_path, key_path = directory / "ca.crt", directory / "ca.key"
    if not (cert_path.is_file() and key_path.is_file()):
        return None
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    if cert.not_valid_after_utc < valid_until:
        return None
    return serialization.load_pem_private_key(key_path.read_bytes(), password=None), cert


def _service_account_keypair(directory: Path) -> tuple[Path, Path]:
    key_path, pub_path = directory / "sa.key", directory / "sa.pub"
    if key_path.is_file() and pub_path.is_file():   # a restarted cluster: its tokens stay valid
        return key_path, pub_path
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(key_path, key)
    pub_path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return key_path, pub_path


# --------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kept_port(path: Path) -> int:
    """The port recorded in `path` by an earlier start, if it is free again, else a new free one
    (recorded): a restarted cluster keeps its URL, so the kubeconfigs handed out keep working.

    >>> import tempfile; d = Path(tempfile.mkdtemp())
    >>> kept_port(d / "port") == kept_port(d / "port")
    True
    """
    try:
        port = int(path.read_text())
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
    except (OSError, ValueError):
        port = free_port()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{port}\n")
    return port


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: SIGKILL the child if pytest dies without running teardown."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Process:
    """One binary of the control plane (or of a lane on top of it), its output in `log_dir/<name>.log`."""

    def __init__(self, name: str, argv: list[str], log_dir: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the process has used so far (0.0 once it has exited)."""
        try:
            return proc_stat(self.popen.pid)[2]
        except OSError:
            return 0.0

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout: float = 10.0) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        self._log.close()


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    """A running etcd + kube-apiserver + kube-controller-manager."""

    def __init__(self, bin_dir: Path, workdir: Path, controllers: Iterable[str] = CONTROLLERS,
                 quota_sync_period: str = TEST_QUOTA_SYNC_PERIOD, flags: Mapping[str, Sequence[str]] | None = None) -> None:
        self.bin_dir = bin_dir
        self.flags = dict(flags or {})   # component name -> flags added to its own (e.g. its client's rate limits)
        self.controllers = tuple(controllers)
        self.quota_sync_period = quota_sync_period
        self.workdir = workdir
        self.version = K8S_VERSION
        self.cert_dir = workdir / "pki"
        self.log_dir = workdir / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)   # a kept work dir is started again
        self.ca = CertAuthority(self.cert_dir)
        self.ca_file = self.ca.cert_path
        self.port = kept_port(workdir / "port")
        self.url = f"https://127.0.0.1:{self.port}"
        self._procs: list[Process] = []
        self._clients: dict[tuple[str, tuple[str, ...]], k8s_client.ApiClient] = {}
        self._dynamic: k8s_dynamic.DynamicClient | None = None
        self.kubeconfig = self.kubeconfig_for("e2e-admin", ["system:masters"], name="admin")

    # ---- credentials -----------------------------------------------------

    def mint_client_cert(self, user: str, groups: Iterable[str] = ()) -> tuple[Path, Path]:
        """Client certificate (CN=user, O=group...) signed by the cluster CA."""
        return self.ca.client_cert(user, groups)

    def kubeconfig_for(self, user: str, groups: Iterable[str] = (), name: str | None = None) -> Path:
        """Write a kubeconfig authenticating as (user, groups); returns its path."""
        cert, key = self.mint_client_cert(user, groups)
        path = self.workdir / f"{name or cert.stem}.kubeconfig"
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            "clusters:\n- name: e2e\n  cluster:\n"
            f"    server: {self.url}\n    certificate-authority: {self.ca_file}\n"
            "users:\n- name: user\n  user:\n"
            f"    client-certificate: {cert}\n    client-key: {key}\n"
            "contexts:\n- name: e2e\n  context: {cluster: e2e, user: user}\n"
            "current-context: e2e\n"
        )
        path.chmod(0o600)
        return path

    def client_for(self, user: str, groups: Iterable[str] = ()) -> k8s_client.ApiClient:
        """An ApiClient authenticating as `user` in `groups` (cached per pair)."""
        groups_t = tuple(groups)
        api = self._clients.get((user, groups_t))
        if api is None:
            cert, key = self.mint_client_cert(user, groups_t)
            cfg = k8s_client.Configuration()
            cfg.host = self.url
            cfg.ssl_ca_cert = str(self.ca_file)
            cfg.cert_file = str(cert)
            cfg.key_file = str(key)
            cfg.verify_ssl = True
            api = k8s_client.ApiClient(cfg)
            self._clients[(user, groups_t)] = api
        return api

    @property
    def api_client(self) -> k8s_client.ApiClient:
        """Admin ApiClient (system:masters)."""
        return self.client_for("e2e-admin", ["system:masters"])

    @property
    def dynamic(self) -> k8s_dynamic.DynamicClient:
        if self._dynamic is None:
            self._dynamic = k8s_dynamic.DynamicClient(self.api_client)
        return self._dynamic

    # ---- helpers for tests ------------------------------------------------

    def apply(self, manifest: dict[str, Any], field_manager: str = "gpu-tenancy-e2e",
              force: bool = True, api_client: k8s_client.ApiClient | None = None,
              dry_run: bool = False) -> Any:
        """Server-side apply one object (as admin unless api_client given)."""
        dyn = self.dynamic if api_client is None else k8s_dynamic.DynamicClient(api_client)
        res = dyn.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        return dyn.server_side_apply(
            res, body=manifest, field_manager=field_manager, force_conflicts=force,
            namespace=manifest.get("metadata", {}).get("namespace"),
            dry_run="All" if dry_run else None,
        )

    def apply_objects(self, objects: Iterable[dict[str, Any]], field_manager: str = "gpu-tenancy",
                      force: bool = False, dry_run: bool = False,
                      ) -> list[tuple[dict[str, Any], Any]]:
        """Server-side apply objects in order (as admin); never raises ApiException.

        Returns ``[(object, result)]`` where result is the applied object (a dict)
        or the ApiException the server answered with, so a test can report every
        rejected object at once.
        """
        out: list[tuple[dict[str, Any], Any]] = []
        for obj in objects:
            try:
                out.append((obj, self.apply(obj, field_manager=field_manager, force=force,
                                            dry_run=dry_run).to_dict()))
            except ApiException as exc:
                out.append((obj, exc))
        return out

    def get_object(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The live object named by `manifest` (apiVersion, kind, metadata.name/namespace)."""
        res = self.dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        meta = manifest["metadata"]
        return self.dynamic.get(res, name=meta["name"], namespace=meta.get("namespace")).to_dict()

    def create_node(self, name: str, labels: dict[str, str] | None = None,
                    taints: list[dict[str, str]] | None = None,
                    field_manager: str = "kubelet") -> Any:
        """Create a Node as a registering kubelet would (an Update under `field_manager`).

        No kubelet runs it: it has no status and no pod is ever scheduled on it.
        """
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "labels": dict(labels or {})}}
        if taints:
            body["spec"] = {"taints": taints}
        return k8s_client.CoreV1Api(self.api_client).create_node(body, field_manager=field_manager)

    def quota_used(self, namespace: str) -> dict[str, dict[str, str]]:
        """`status.used` of every ResourceQuota in `namespace`, by quota name (once computed)."""
        return {q.metadata.name: dict(q.status.used) for q in self.wait_quotas(namespace)}

    def delete_pods(self, namespace: str, names: Iterable[str], quota_used_before: dict | None = None) -> None:
        """Delete pods at once (no kubelet confirms their end) and wait until they are gone.

        With `quota_used_before` (from `quota_used` before they were created), also wait until the
        quota controller has released their usage: it does so asynchronously, and a tenant whose
        GPU quota is 1 would otherwise be refused its next pod for usage that is already gone.
        """
        core = k8s_client.CoreV1Api(self.api_client)
        names = list(names)
        for name in names:
            try:
                core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        remaining = lambda: {p.metadata.name for p in core.list_namespaced_pod(namespace).items} & set(names)
        self.wait_for(lambda: not remaining(), timeout=60, interval=0.5, what=f"pods {names} of {namespace} deleted")
        if quota_used_before is not None:
            before = pod_usage(quota_used_before)
            try:
                self.wait_for(lambda: pod_usage(self.quota_used(namespace)) == before, timeout=60, interval=0.5,
                              what=f"quota of {namespace} released after deleting {names}")
            except TimeoutError as exc:
                now, quota_used_before = pod_usage(self.quota_used(namespace)), before
                changed = {(q, k): (quota_used_before.get(q, {}).get(k), v)
                           for q, used in now.items() for k, v in used.items()
                           if quota_used_before.get(q, {}).get(k) != v}
                controller = next(p for p in self._procs if p.name == "kube-controller-manager")
                problems = [line for line in controller.log_tail(400).splitlines() if line[:1] in "EWF"]
                raise TimeoutError(
                    f"{exc}; (before, now) by (quota, resource): {changed}; "
                    f"kube-controller-manager exit code {controller.popen.poll()} (None: running), "
                    f"its last errors and warnings:\n" + "\n".join(problems[-15:])) from None

    @staticmethod
    def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2,
                 what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        last_exc: Exception | None = None
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except ApiException as exc:  # not found yet, etc.
                last_exc = exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}"
                                   + (f" (last error: {last_exc})" if last_exc else ""))
            time.sleep(interval)

    def create_namespace(self, name: str | None = None, labels: dict[str, str] | None = None) -> str:
        """Apply a Namespace and wait until its default ServiceAccount exists."""
        name = name or f"e2e-{uuid.uuid4().hex[:8]}"
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        core = k8s_client.CoreV1Api(self.api_client)
        self.wait_for(lambda: core.read_namespaced_service_account("default", name),
                      what=f"ServiceAccount {name}/default")
        return name

    def delete_namespace(self, name: str) -> None:
        try:
            k8s_client.CoreV1Api(self.api_client).delete_namespace(name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    # ---- the product's objects ---------------------------------------------

    def apply_rendered(self, objects: Iterable[dict[str, Any]], dry_run: bool = False,
                       ) -> list[tuple[dict[str, Any], Any]]:
        """Apply rendered objects as the Pulumi program does: field manager `gpu-tenancy`, no
        force, except node patches: label patches carry their field manager and force in
        annotations, taint patches name none and go unforced under TAINT_PATCH_MANAGER, as the
        provider's own per-resource manager. Never raises ApiException (see `apply_objects`)."""
        from components.manifests.meta import is_taint_patch

        results: list[tuple[dict[str, Any], Any]] = []
        for obj in objects:
            annotations = obj["metadata"].get("annotations", {})
            if is_taint_patch(obj):
                results += self.apply_objects([obj], field_manager=TAINT_PATCH_MANAGER, dry_run=dry_run)
            elif obj["kind"] == "Node" and "pulumi.com/patchFieldManager" in annotations:
                results += self.apply_objects(
                    [obj], field_manager=annotations["pulumi.com/patchFieldManager"],
                    force=annotations.get("pulumi.com/patchForce") == "true", dry_run=dry_run)
            else:
                results += self.apply_objects([obj], field_manager=FIELD_MANAGER, dry_run=dry_run)
        return results

    def wait_quotas(self, namespace: str, timeout: float = 30.0) -> list[Any]:
        """The quotas of `namespace` once the quota controller has filled their status.hard/used
        (before that, quota admission rejects with "status unknown" or ignores the quota)."""
        core = k8s_client.CoreV1Api(self.api_client)

        def computed() -> tuple[list[Any]] | None:
            quotas = core.list_namespaced_resource_quota(namespace).items
            for q in quotas:
                hard, status = set(q.spec.hard or {}), q.status
                if status is None or set(status.hard or {}) != hard or not hard <= set(status.used or {}):
                    return None
            return (quotas,)   # a 1-tuple: a namespace without quotas is computed too

        return self.wait_for(computed, timeout=timeout, what=f"quota status in {namespace}")[0]

    def wait_namespaces_ready(self, objects: Iterable[dict[str, Any]]) -> None:
        """Until every Namespace among `objects` has its default ServiceAccount and computed quotas."""
        core = k8s_client.CoreV1Api(self.api_client)
        for ns in [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"]:
            self.wait_for(lambda n=ns: core.read_namespaced_service_account("default", n),
                          what=f"ServiceAccount {ns}/default")
            self.wait_quotas(ns)

    # ---- lifecycle -------------------------------------------------------

    def _start(self, name: str, args: list[str]) -> Process:
        proc = Process(name, [str(self.bin_dir / name), *args, *self.flags.get(name, ())], self.log_dir)
        self._procs.append(proc)
        return proc

    def _fail(self, message: str) -> None:
        tails = "\n".join(
            f"----- {p.name} (exit {p.popen.poll()}) {p.log_path} -----\n{p.log_tail()}"
            for p in self._procs
        )
        raise ControlPlaneError(f"{message}\n{tails}")

    def start(self, timeout: float = 90.0) -> None:
        d = self.workdir
        serving_crt, serving_key = self.ca.serving_cert()
        sa_key, sa_pub = _service_account_keypair(self.cert_dir)
        etcd_client, etcd_peer = free_port(), free_port()

        self._start("etcd", [
            "--name=e2e",
            f"--data-dir={d / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
            f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
            f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
            f"--initial-cluster=e2e=http://127.0.0.1:{etcd_peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ])

        self._start("kube-apiserver", [
            f"--etcd-servers=http://127.0.0.1:{etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            f"--cert-dir={d / 'apiserver-certs'}",
            f"--tls-cert-file={serving_crt}",
            f"--tls-private-key-file={serving_key}",
            f"--client-ca-file={self.ca_file}",
            "--authorization-mode=Node,RBAC",
            # Default admission plugins stay on (ResourceQuota, LimitRanger,
            # PodSecurity, ServiceAccount, ValidatingAdmissionPolicy, ...).
            f"--service-account-issuer={self.url}",
            f"--service-account-key-file={sa_pub}",
            f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ])

        kcm_cfg = self.kubeconfig_for("system:kube-controller-manager", ["system:masters"],
                                      name="kube-controller-manager")
        self._wait_ready(timeout)

        self._start("kube-controller-manager", [
            f"--kubeconfig={kcm_cfg}",
            f"--authentication-kubeconfig={kcm_cfg}",
            f"--authorization-kubeconfig={kcm_cfg}",
            f"--controllers={','.join(self.controllers)}",
            f"--service-account-private-key-file={sa_key}",
            f"--root-ca-file={self.ca_file}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            f"--resource-quota-sync-period={self.quota_sync_period}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--profiling=false",
            "--v=1",
        ])
        # The controller manager is up once the serviceaccount controller has
        # created the "default" ServiceAccount in the default namespace.
        core = k8s_client.CoreV1Api(self.api_client)
        deadline = time.monotonic() + timeout
        while True:
            self._check_alive()
            try:
                core.read_namespaced_service_account("default", "default")
                break
            except ApiException as exc:
                if exc.status != 404:
                    raise
            if time.monotonic() > deadline:
                self._fail("kube-controller-manager did not create default/default ServiceAccount")
            time.sleep(0.2)

    def _check_alive(self) -> None:
        for p in self._procs:
            if not p.alive():
                self._fail(f"{p.name} exited early")

    def _admin_ssl_context(self) -> ssl.SSLContext:
        admin_crt, admin_key = self.mint_client_cert("e2e-admin", ["system:masters"])
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(admin_crt), str(admin_key))
        return ctx

    def raw_get(self, path: str, timeout: float = 10.0) -> tuple[int, str]:
        """GET `path` (e.g. "/readyz?verbose") as admin; returns (status, body)."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", context=self._admin_ssl_context(),
                                        timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            self._check_alive()
            try:
                status, body = self.raw_get("/readyz", timeout=5)
                if status == 200 and body.strip() == "ok":
                    return
                last = f"{status} {body[-300:]}"
            except Exception as exc:  # connection refused while starting, ...
                last = str(exc)
            if time.monotonic() > deadline:
                self._fail(f"kube-apiserver not ready after {timeout}s (last: {last})")
            time.sleep(0.25)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by each process of the control plane, by name: what a benchmark
        subtracts to see how much of two shared cores the cluster took meanwhile."""
        return {p.name: p.cpu_seconds() for p in self._procs}

    def stop(self) -> None:
        for api in self._clients.values():
            try:
                api.close()
            except Exception:
                pass
        self._clients.clear()
        self._dynamic = None
        for p in reversed(self._procs):
            p.stop()


# Object counts other than pods: what else the test or a controller creates meanwhile (a RoleBinding,
# an Event-driven Secret) moves them, and deleting pods never gives them back.
_OBJECT_COUNTS = frozenset({"configmaps", "persistentvolumeclaims", "replicationcontrollers", "resourcequotas",
                            "secrets", "services", "services.loadbalancers", "services.nodeports"})


def pod_usage(used: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The part of `quota_used` that pods hold: everything but the counts of other kinds of object.

    >>> pod_usage({"q": {"pods": "1", "count/pods": "1", "count/rolebindings.rbac.authorization.k8s.io": "2", "secrets": "3"}})
    {'q': {'pods': '1', 'count/pods': '1'}}
    """
    return {quota: {key: value for key, value in usage.items()
                    if key not in _OBJECT_COUNTS and (not key.startswith("count/") or key == "count/pods")}
            for quota, usage in used.items()}

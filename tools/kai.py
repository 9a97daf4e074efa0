"""The real KAI Scheduler on a control plane: its CRDs, and its pod-grouper, scheduler and binder.

`tools/build.sh kai` builds KAI's scheduler, binder and pod-grouper from the source snapshot
`tools/versions.env` pins (`KAI_SOURCE`, checked against `KAI_SOURCE_SHA256`, extracted into the
cache, never into the checkout). `KaiScheduler(cp).start()` installs every CRD of KAI's chart
(`deployments/kai-scheduler/crds` of that snapshot) and starts the three processes the operator
would deploy, each with its own kubeconfig, leader election off, every listener on a free loopback
port (tests/e2e/scheduling/kai.py says what each does and what the lanes leave out). The scheduling
and runtime lanes use it, and so does `tenants simulate` for a KAI stack (tools/simulation.py).
"""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path
from typing import Any

from tools.control_plane import REPO_ROOT, VERSIONS, ControlPlane, Process, free_port

KAI_VERSION = VERSIONS["KAI_VERSION"]
KAI_BINARIES = ("kai-scheduler", "kai-binder", "kai-podgrouper")
SCHEDULER_NAME = "kai-scheduler"          # KAI's default `--scheduler-name`, what pods must name
KAI_NAMESPACE = "kai-scheduler"           # where a Helm install runs it (events, leases)
RESERVATION_NAMESPACE = "kai-resource-reservation"   # the binder lists its reservation pods there
GROUP, PODGROUP_VERSION, BINDREQUEST_VERSION = "scheduling.run.ai", "v2alpha2", "v1alpha2"


def _cache_dir() -> Path:
    return Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")


def kai_bin_dir() -> Path:
    """Where tools/build.sh puts KAI's binaries (GPU_TENANCY_KAI_BIN_DIR overrides, as in go-env.sh)."""
    override = os.environ.get("GPU_TENANCY_KAI_BIN_DIR")
    return Path(override) if override else _cache_dir() / "kai" / KAI_VERSION


def kai_source_dir() -> Path:
    """KAI's source tree as tools/build.sh extracted it (one directory per snapshot hash)."""
    return _cache_dir() / "kai" / f"src-{VERSIONS['KAI_SOURCE_SHA256'][:12]}"


def kai_crd_dir() -> Path:
    """The CRDs of KAI's Helm chart in that tree (what `helm install` applies first)."""
    return kai_source_dir() / "deployments" / "kai-scheduler" / "crds"


def kai_unavailable_reason() -> str:
    """Why KAI cannot run here ("" if it can)."""
    missing = [b for b in KAI_BINARIES if not os.access(kai_bin_dir() / b, os.X_OK)]
    if missing:
        return (f"KAI Scheduler: {', '.join(missing)} not built in {kai_bin_dir()}; run `tools/build.sh kai` "
                "(or `make e2e-scheduling`; ~10 min cold, from ../shared/src/kai-scheduler.tar.gz)")
    if not (kai_source_dir() / ".extracted").is_file():
        return f"KAI Scheduler: its CRDs are read from the extracted source {kai_source_dir()}, missing; run `tools/build.sh kai`"
    return ""


def kai_crds() -> list[dict[str, Any]]:
    """Every CustomResourceDefinition of KAI's chart, as the snapshot ships it."""
    import yaml

    crds = []
    for path in sorted(kai_crd_dir().glob("*.yaml")):
        crds += [d for d in yaml.safe_load_all(path.read_text())
                 if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
    return crds


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


class KaiScheduler:
    """KAI's pod-grouper, scheduler and binder on a ControlPlane (stopped with it)."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.bin_dir = kai_bin_dir()

    def _start(self, name: str, args: list[str]) -> None:
        # The scheduler reads its kubeconfig only from $KUBECONFIG (controller-runtime's
        # GetConfigOrDie; its --kubeconfig go flag is not on the scheduler's pflag set), so all three
        # get it that way; `env` execs the binary, so the stop signal reaches it.
        kubeconfig = self.cp.kubeconfig_for(f"system:serviceaccount:{KAI_NAMESPACE}:{name}", ["system:masters"], name=name)
        argv = ["/usr/bin/env", f"KUBECONFIG={kubeconfig}", str(self.bin_dir / name), *args]
        self.cp._procs.append(Process(name, argv, self.cp.log_dir))

    def start(self, timeout: float = 120.0, binder_args: tuple[str, ...] = ()) -> float:
        """Install KAI's CRDs and namespaces, start its three processes (the binder with `binder_args` too),
        wait until they serve. Returns seconds."""
        import time

        from kubernetes import client as k8s_client

        started = time.monotonic()
        cp = self.cp
        ext = k8s_client.ApiextensionsV1Api(cp.api_client)
        names = []
        for crd in kai_crds():
            cp.apply(crd, field_manager="e2e-kai-install")
            names.append(crd["metadata"]["name"])

        def established(name: str) -> bool:
            conds = ext.read_custom_resource_definition(name).status.conditions or []
            return any(c.type == "Established" and c.status == "True" for c in conds)

        for name in names:
            cp.wait_for(lambda n=name: established(n), timeout=60, what=f"CRD {name} Established")
        cp.dynamic.resources.invalidate_cache()
        for namespace in (KAI_NAMESPACE, RESERVATION_NAMESPACE):
            cp.create_namespace(namespace)

        # What each serves once it runs: the pod-grouper a readyz check; the binder and the
        # scheduler none, so their metrics endpoints (up once their managers/informers start).
        probes = {}
        for name in ("kai-podgrouper", "kai-binder"):
            metrics, probe = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
            self._start(name, [f"--metrics-bind-address={metrics}", f"--health-probe-bind-address={probe}",
                               "--leader-elect=false", f"--scheduler-name={SCHEDULER_NAME}",
                               *(binder_args if name == "kai-binder" else ())])
            probes[name] = f"http://{probe}/readyz" if name == "kai-podgrouper" else f"http://{metrics}/metrics"
        metrics = f"127.0.0.1:{free_port()}"
        self._start("kai-scheduler", [
            f"--scheduler-name={SCHEDULER_NAME}", f"--namespace={KAI_NAMESPACE}", "--leader-elect=false",
            f"--listen-address={metrics}", f"--plugin-server-port={free_port()}",
            "--schedule-period=1s", "--v=3",
        ])
        probes["kai-scheduler"] = f"http://{metrics}/metrics"   # served once the scheduler is built

        for name, url in probes.items():
            def ready(u: str = url) -> bool:
                cp._check_alive()
                return _ready(u)

            cp.wait_for(ready, timeout=timeout, interval=0.5, what=f"{name} serving {url}")
        return time.monotonic() - started


# A GPU share (docs/gpu-sharing.md, `kaiFractions`): what KAI's admission webhook leaves on a pod
# asking for a fraction of a GPU (pkg/admission/webhook/v1alpha2/gpusharing), which no lane runs.
GPU_FRACTION = "gpu-fraction"
GPU_PORTION = "GPU_PORTION"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def make_gpu_share(meta: dict[str, Any], spec: dict[str, Any], fraction: float, prefix: str) -> None:
    """Turn a pod's (or a pod template's) `meta` and `spec` into a share of `fraction` of one GPU:
    the `gpu-fraction` annotation and no GPU resource, the ConfigMap-name annotation `prefix` (as the
    webhook makes it, `<pod>-<7 random>-shared-gpu`), the container's NVIDIA_VISIBLE_DEVICES,
    RUNAI_NUM_OF_GPUS and GPU_PORTION read from ConfigMap `<prefix>-0`, `envFrom` of `<prefix>-0-evar`
    and the ConfigMap volume; the binder creates (or, for another pod of the same Job, updates)
    both ConfigMaps and writes the reserved GPU into them. A share tolerates the shared pools'
    taint as a GPU pod does (the placement policy counts it one).

    >>> meta, spec = {}, {"containers": [{"resources": {"requests": {"nvidia.com/gpu": "0"}, "limits": {}}}]}
    >>> make_gpu_share(meta, spec, 0.5, "j-abcdefg-shared-gpu")
    >>> meta["annotations"]["gpu-fraction"], spec["containers"][0]["resources"]["requests"], spec["volumes"][0]["configMap"]
    ('0.5', {}, {'name': 'j-abcdefg-shared-gpu-0'})
    """
    from components.manifests.meta import GPU_TAINT_TOLERATION, KAI_SHARED_GPU_CONFIGMAP_ANNOTATION

    meta["annotations"] = {**meta.get("annotations", {}), GPU_FRACTION: f"{fraction:g}",
                           KAI_SHARED_GPU_CONFIGMAP_ANNOTATION: prefix}
    tolerations = [t for t in spec.get("tolerations", []) if t != GPU_TAINT_TOLERATION]
    spec["tolerations"] = [dict(GPU_TAINT_TOLERATION), *tolerations]
    config_map = f"{prefix}-0"
    container = spec["containers"][0]
    for values in container["resources"].values():
        values.pop("nvidia.com/gpu", None)
    container["env"] = [{"name": key, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": key}}}
                        for key in (VISIBLE_DEVICES, "RUNAI_NUM_OF_GPUS", GPU_PORTION)]
    container["envFrom"] = [{"configMapRef": {"name": f"{config_map}-evar"}}]
    spec["volumes"] = [{"name": f"{config_map}-vol", "configMap": {"name": config_map}}]


def binder_args(applied: Any) -> tuple[str, ...]:
    """The binder's `--plugins` as KAI's operator writes it from the applied stack's KAI `Config`
    (`spec.binder.plugins`; pkg/operator/operands/binder/resources.go), none without one (a stack
    renders `kai-config` only when a class asks for a KAI setting).

    >>> class Applied:
    ...     def of_kind(self, kind): return [{"metadata": {"name": "kai-config"}, "spec": {"binder": {"plugins": {"hamicore": {"enabled": True}}}}}]
    >>> binder_args(Applied())
    ('--plugins={"hamicore": {"enabled": true}}',)
    """
    import json

    from components.manifests.kai_config import NAME

    config = next((o for o in applied.of_kind("Config") if o["metadata"]["name"] == NAME), None)
    plugins = (((config or {}).get("spec") or {}).get("binder") or {}).get("plugins")
    return (f"--plugins={json.dumps(plugins, sort_keys=True)}",) if plugins else ()

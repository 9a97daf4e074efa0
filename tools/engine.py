"""The real Pulumi engine on a real control plane: the CLI and the Kubernetes provider built by
tools/build.sh, the program (`__main__.py`, unchanged) run inline by the Automation API.

Used by the `make e2e-pulumi` lane (tests/e2e/pulumi_engine/) and by `make up` (tools/up.py).

* `LocalCluster`: etcd + kube-apiserver + kube-controller-manager (tools/control_plane.py's
  ControlPlane, with the garbage collector the provider's foreground deletes need), the stack's
  GPU Nodes as a kubelet would register them, the vendored Kueue/KAI CRDs, the GPU Operator's
  namespace, and a kubeconfig whose context is the stack's `kubeContext`.
* `Engine`: one stack of a project directory on a local file backend, with `up`/`preview`
  results reduced to what tests assert on (the engine's change summary and one step per URN).
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from components.review.moves.state_moves import tenant_urns
from tools.applied_stack import install_crds, register_nodes
from tools.control_plane import BIN_DIR, TEST_QUOTA_SYNC_PERIOD, ControlPlane
from tools.lanes import tool_versions

REPO_ROOT = Path(__file__).resolve().parents[1]
PROJECT_PARTS = ("Pulumi.yaml", "__main__.py", "stacks", "tenants")
VERSIONS = tool_versions()


def _cache_dir() -> Path:
    return Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")


def pulumi_bin_dirs() -> dict[str, Path]:
    """Where tools/build.sh puts the CLI and the provider (same overrides as tools/go-env.sh)."""
    cache = _cache_dir()
    return {
        "pulumi": Path(os.environ.get("GPU_TENANCY_PULUMI_BIN_DIR") or cache / "pulumi" / VERSIONS["PULUMI_VERSION"]),
        "pulumi-resource-kubernetes": Path(
            os.environ.get("GPU_TENANCY_PULUMI_K8S_BIN_DIR")
            or cache / "pulumi-kubernetes" / VERSIONS["PULUMI_KUBERNETES_VERSION"]
        ),
    }


def missing_pulumi_tools() -> list[str]:
    return [name for name, d in pulumi_bin_dirs().items() if not os.access(d / name, os.X_OK)]


def copy_project(dest: Path, source: Path = REPO_ROOT) -> Path:
    """A writable copy of the Pulumi project (program, stack files, tenant files)."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in PROJECT_PARTS:
        src = source / part
        if src.is_dir():
            shutil.copytree(src, dest / part, dirs_exist_ok=True)
        else:
            shutil.copy2(src, dest / part)
    return dest


# ---------------------------------------------------------------------------
# The cluster
# ---------------------------------------------------------------------------


class LocalCluster:
    """A control plane prepared the way a real cluster is before the first `pulumi up`.

    Throw-away in a fresh `workdir`; started again on a kept one (`make up`), it resumes with its
    etcd data, CA and port, and is not prepared twice."""

    def __init__(self, workdir: Path, project: Path, stack: str, *,
                 quota_sync_period: str = TEST_QUOTA_SYNC_PERIOD) -> None:
        self.workdir = workdir
        self.project = project
        self.stack = stack
        self.cp = ControlPlane(BIN_DIR, workdir / "control-plane", quota_sync_period=quota_sync_period)
        self.kubeconfig: Path = workdir / "kubeconfig"
        self.context = ""
        self.resumed = False

    def start(self) -> "LocalCluster":
        from kubernetes import client

        from components.load import load_environment

        environment = load_environment(self.project, self.stack)
        self.resumed = (self.cp.workdir / "etcd").is_dir()
        self.cp.start()
        self.context = environment.platform.kube_context or "default"
        if self.resumed:   # its CRDs, namespaces and Nodes are in etcd already; a node the stack gained is not
            core = client.CoreV1Api(self.cp.api_client)
            register_nodes(self.cp, environment, {n.metadata.name for n in core.list_node().items})
            self.write_kubeconfig(self.kubeconfig)
            return self
        install_crds(self.cp)
        core = client.CoreV1Api(self.cp.api_client)
        # Namespaces the platform's own components own before the first `pulumi up`: the GPU
        # Operator's (MIG / time-slicing ConfigMaps) and kube-prometheus-stack's (rules, dashboards).
        platform_namespaces = ["gpu-operator"]
        if environment.platform.monitoring is not None:
            platform_namespaces.append(environment.platform.monitoring.namespace)
        for ns in platform_namespaces:
            core.create_namespace({"metadata": {"name": ns}})
        register_nodes(self.cp, environment)
        self.write_kubeconfig(self.kubeconfig)
        return self

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig whose (current) context is the stack's `kubeContext`, as admin."""
        cert, key = self.cp.mint_client_cert("pulumi-admin", ["system:masters"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: local\n  cluster:\n    server: {self.cp.url}\n"
            f"    certificate-authority: {self.cp.ca_file}\n"
            f"users:\n- name: admin\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n"
            f"contexts:\n- name: {self.context}\n  context: {{cluster: local, user: admin}}\n"
            f"current-context: {self.context}\n"
        )
        path.chmod(0o600)
        return path

    @property
    def api_client(self) -> Any:
        return self.cp.api_client

    def stop(self) -> None:
        self.cp.stop()


# ---------------------------------------------------------------------------
# The engine
# ---------------------------------------------------------------------------


@dataclass
class Step:
    op: str
    urn: str
    type: str
    diffs: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


@dataclass
class Outcome:
    """What one `up`/`preview` did, from the engine's own events and summary."""

    kind: str
    summary: dict[str, int]            # the engine's change summary: op -> count
    steps: list[Step]                  # one resource_pre event per step
    diagnostics: list[tuple[str, str, str]]  # (severity, urn, message)
    stdout: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    # ("start", step) at each resource_pre event, ("done", step) at each res_outputs, as the engine sent them.
    timeline: list[tuple[str, Step]] = field(default_factory=list)

    @property
    def done(self) -> list[Step]:
        """The steps in completion order (res_outputs events)."""
        return [step for kind, step in self.timeline if kind == "done"]

    def ops(self, *ops: str) -> list[Step]:
        return [s for s in self.steps if s.op in ops]

    def names(self, *ops: str) -> set[str]:
        return {s.name for s in self.ops(*ops)}

    @property
    def changes(self) -> dict[str, int]:
        """Steps that change something: not `same`, and not `read` (the program's StackReference to
        its own last outputs, read on every run)."""
        return {op: n for op, n in self.summary.items() if op not in ("same", "read") and n}

    def messages(self, severity: str | None = None) -> list[str]:
        return [m for sev, _, m in self.diagnostics if severity is None or sev == severity]


_PROGRAM_LOCK = threading.Lock()

# Every engine operation of this process, in order: (operation, stack, the engine's change counts,
# or None when it failed as expected). The lane prints each scenario's share of it.
OPERATIONS: list[tuple[str, str, dict[str, int] | None]] = []


def program_for(project: Path):
    """The inline program: the project's `__main__.py`, unchanged, as `pulumi up` would run it."""
    main = project / "__main__.py"

    def program() -> None:
        runpy.run_path(str(main), run_name="__main__")

    return program


class Engine:
    """One stack of `project` on a local file backend in `state_dir`, talking to `kubeconfig`."""

    def __init__(self, project: Path, stack: str, state_dir: Path, kubeconfig: Path,
                 env: dict[str, str] | None = None, *, project_name: str = "gpu-tenancy",
                 program: Callable[[], None] | None = None, checkpoints: bool = False) -> None:
        """`checkpoints`: write the state after every step, as production's backends do (`make up`
        and the fault lane); off, the state is written once at the end (`PULUMI_SKIP_CHECKPOINTS`),
        which the other scenarios of the lane use for speed but which cannot show what a crash leaves."""
        from pulumi import automation as auto

        self.project = project
        self.stack_name = stack
        self.state_dir = state_dir
        (state_dir / "backend").mkdir(parents=True, exist_ok=True)
        (state_dir / "home").mkdir(parents=True, exist_ok=True)
        dirs = pulumi_bin_dirs()
        self.env = {
            "PULUMI_BACKEND_URL": f"file://{state_dir / 'backend'}",
            "PULUMI_HOME": str(state_dir / "home"),
            "PULUMI_CONFIG_PASSPHRASE": "",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            **({} if checkpoints else {"PULUMI_SKIP_CHECKPOINTS": "true"}),
            "KUBECONFIG": str(kubeconfig),
            "PATH": os.pathsep.join(
                [str(dirs["pulumi"]), str(dirs["pulumi-resource-kubernetes"]), os.environ.get("PATH", "")]
            ),
            **(env or {}),
        }
        # The Automation API looks `pulumi` up on this process's PATH.
        os.environ["PATH"] = self.env["PATH"]
        self._auto = auto
        self.stack = auto.create_or_select_stack(
            stack_name=stack,
            project_name=project_name,
            program=program or program_for(project),
            opts=auto.LocalWorkspaceOptions(work_dir=str(project), env_vars=self.env),
        )

    def set_env(self, **env: str) -> None:
        """Change environment variables of later operations (e.g. KUBECONFIG)."""
        self.env.update(env)
        self.stack.workspace.env_vars.update(env)

    def _collect(self) -> tuple[list[Step], list[tuple[str, str, str]], Any]:
        steps: list[Step] = []
        diags: list[tuple[str, str, str]] = []
        self._timeline: list[tuple[str, Step]] = []

        def step_of(meta: Any) -> Step:
            op = meta.op.value if hasattr(meta.op, "value") else str(meta.op)
            return Step(op, meta.urn, meta.type, list(meta.diffs or []))

        def on_event(event: Any) -> None:
            if event.resource_pre_event is not None:
                steps.append(step_of(event.resource_pre_event.metadata))
                self._timeline.append(("start", steps[-1]))
            if event.res_outputs_event is not None:
                self._timeline.append(("done", step_of(event.res_outputs_event.metadata)))
            diag = event.diagnostic_event
            if diag is not None:
                diags.append((diag.severity, diag.urn or "", diag.message))

        return steps, diags, on_event

    def _env_for_program(self) -> Any:
        """The inline program runs in this process: give it the same KUBECONFIG etc. as the CLI."""
        saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        return saved

    @staticmethod
    def _restore(saved: dict[str, str | None]) -> None:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def up(self, **kwargs: Any) -> Outcome:
        steps, diags, on_event = self._collect()
        with _PROGRAM_LOCK:
            saved = self._env_for_program()
            try:
                result = self.stack.up(on_event=on_event, color="never", **kwargs)
            finally:
                self._restore(saved)
        summary = dict(result.summary.resource_changes or {})
        OPERATIONS.append(("up", self.stack_name, summary))
        outputs = {k: v.value for k, v in (result.outputs or {}).items()}
        return Outcome("up", summary, steps, diags, result.stdout, outputs, list(self._timeline))

    def preview(self, **kwargs: Any) -> Outcome:
        steps, diags, on_event = self._collect()
        with _PROGRAM_LOCK:
            saved = self._env_for_program()
            try:
                result = self.stack.preview(on_event=on_event, color="never", **kwargs)
            finally:
                self._restore(saved)
        summary = {(k.value if hasattr(k, "value") else str(k)): v for k, v in (result.change_summary or {}).items()}
        OPERATIONS.append(("preview", self.stack_name, summary))
        return Outcome("preview", summary, steps, diags, result.stdout)

    def failing(self, operation: str = "preview", **kwargs: Any) -> tuple[Exception, list[Step], list]:
        """Run an operation that must fail; returns (error, steps seen, diagnostics)."""
        steps, diags, on_event = self._collect()
        with _PROGRAM_LOCK:
            saved = self._env_for_program()
            try:
                getattr(self.stack, operation)(on_event=on_event, color="never", **kwargs)
            except self._auto.CommandError as err:
                OPERATIONS.append((operation, self.stack_name, None))
                return err, steps, diags
            finally:
                self._restore(saved)
        raise AssertionError(f"`pulumi {operation}` succeeded but was expected to fail")

    def lock_holders(self) -> list[dict[str, Any]]:
        """The locks on this stack in the file backend (`lock_holders`)."""
        return lock_holders(self.state_dir, self.stack_name)

    def recover(self) -> list[str]:
        """Undo what a killed `pulumi up` left in this stack's state, before the next operation:
        a lock whose process is gone (`pulumi cancel`; a live holder is an error: wait for it),
        then the pending operations (export, cleared, import; components/review/moves/state_moves.py
        says why that is safe). A checkpoint it left cut off is repaired before the `Engine` is
        made (`recover_checkpoint`). Returns one line per repair, empty when there was nothing to do.

        >>> Engine(project, "prod", state, kubeconfig).recover()   # doctest: +SKIP
        ['the stack was locked by pulumi pid 16996, which is gone: lock removed (pulumi cancel)']
        """
        from components.review.moves.state_moves import pending_operations, without_pending

        done = []
        holders = self.lock_holders()
        refuse_live_holders(self.stack_name, holders)
        if holders:
            self.stack.cancel()
            done.append(f"the stack was locked by pulumi pid {', '.join(str(h.get('pid')) for h in holders)}, "
                        "which is gone: lock removed (pulumi cancel)")
        state = self.stack.export_stack()
        document = {"version": state.version, "deployment": state.deployment}
        pending = pending_operations(document)
        if pending:
            self.stack.import_stack(self._auto.Deployment(version=state.version, deployment=without_pending(document)["deployment"]))
            ops = ", ".join(f"{op} {urn.rsplit('::', 1)[-1]}" for op, urn in pending)
            done.append(f"{len(pending)} operation(s) the killed run left pending cleared ({ops}); "
                        "the refresh reads what they did")
        return done

    def export(self) -> list[dict[str, Any]]:
        """The resources of `pulumi stack export`."""
        return list(self.stack.export_stack().deployment.get("resources") or [])

    def urns(self) -> set[str]:
        return {r["urn"] for r in self.export()}

    def tenant_urns(self) -> dict[str, str]:
        """The URN of each `gpu-tenancy:index:Tenant` component in this stack's state, by tenant name.

        >>> engine.tenant_urns()   # doctest: +SKIP
        {'eval': 'urn:pulumi:prod.b::gpu-tenancy::gpu-tenancy:index:Fleet$gpu-tenancy:index:Tenant::eval'}
        """
        return tenant_urns(self.export())

    def state_move(self, dest: str, urns: Iterable[str]) -> str:
        """`pulumi state move --source <this stack> --dest <dest> --yes <urns>`: the built CLI, with
        this engine's backend, home and passphrase, run in the project directory (where the CLI
        creates the destination's secrets manager if it has none). The destination stack must
        exist (an `Engine` for it creates it). Returns the CLI's output.

        >>> Engine(project, "prod", state, kubeconfig).state_move("prod.a", [urn])   # doctest: +SKIP
        'Planning to move the following resources from organization/gpu-tenancy/prod to ...'
        """
        # The Automation API has `pulumi state move` only as the raw CLI wrapper (no Stack method).
        result = self.stack.workspace.cli_api.state_move(
            *urns, source=self.stack_name, dest=dest, color="never",
            cwd=str(self.project), additional_env=self.env,
        )
        return result.stdout


def lock_holders(state_dir: Path, stack: str) -> list[dict[str, Any]]:
    """The locks on `stack` in the file backend of `state_dir` (`{"pid", "hostname", ...}` each, as
    the CLI writes them while an operation runs; a killed CLI leaves its lock behind).

    >>> lock_holders(Path("/nonexistent"), "prod")
    []
    """
    locks = state_dir / "backend" / ".pulumi" / "locks"
    return [json.loads(path.read_text()) for path in sorted(locks.glob(f"*/*/{stack}/*.json"))]


def refuse_live_holders(stack: str, holders: list[dict[str, Any]]) -> None:
    """Raise when a `pulumi` process that is still running holds the stack's lock (another host's
    counts as running: it cannot be checked from here)."""
    live = [h for h in holders if h.get("hostname") != socket.gethostname() or _alive(int(h.get("pid", 0)))]
    if live:
        raise RuntimeError(f"stack {stack} is locked by a running pulumi ("
                           + ", ".join(f"pid {h.get('pid')} on {h.get('hostname')}" for h in live)
                           + f"): wait for it to end; if it is gone, `pulumi cancel --stack {stack}`")


def recover_checkpoint(state_dir: Path, stack: str) -> list[str]:
    """Before an `Engine` is made for `stack` (selecting a stack whose checkpoint is cut off fails
    with `failed to load checkpoint: EOF`): put back the file backend's newest readable copy of a
    checkpoint a killed CLI left cut off (tools/file_backend.py; `CheckpointLost` when none reads),
    unless a running `pulumi` holds the stack's lock. One line per repair.

    >>> recover_checkpoint(Path("/nonexistent"), "prod")
    []
    """
    from tools.file_backend import repair_checkpoint

    refuse_live_holders(stack, lock_holders(state_dir, stack))   # no live CLI writes the checkpoint now
    return repair_checkpoint(state_dir / "backend", stack)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


def names_of(urns: Iterable[str]) -> set[str]:
    return {u.rsplit("::", 1)[-1] for u in urns}


# ---------------------------------------------------------------------------
# The offline side: what the builders render and what `tenants diff` says, by Pulumi name
# ---------------------------------------------------------------------------


def rendered_by_name(project: Path, stack: str) -> dict[str, dict[str, Any]]:
    """Every object (and Helm release) the program registers, by the resource name the shell gives it."""
    from components.review.diff import release_objects
    from components.manifests.build import PLATFORM, environment_objects
    from components.resources.kubernetes import logical_name
    from components.load import load_environment

    environment = load_environment(project, stack)
    out: dict[str, dict[str, Any]] = {}
    for owner, objects in environment_objects(environment).items():
        prefix = f"{environment.name}-platform" if owner == PLATFORM else owner
        for obj in objects:
            out[logical_name(prefix, obj)] = obj
    for owner, releases in release_objects(environment).items():
        for release in releases:
            out[f"{owner}-vcluster"] = release
    return out


def kubernetes_resources(resources: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`stack export` resources managed by the Kubernetes provider (not providers, not components, not
    the reads of inventory Nodes, `external` in the state: the engine never creates or deletes them)."""
    return {
        r["urn"].rsplit("::", 1)[-1]: r
        for r in resources
        if r["type"].startswith("kubernetes:") and r.get("custom") and not r.get("external")
    }


def offline_changes(base: Path, head: Path, stack: str) -> dict[str, dict[str, str]]:
    """`tenants diff` of one stack between two project copies, as {"create"|"update"|"delete": {name: kind}}.

    Objects are named as the program names its resources (tenant or `<env>-platform` prefix), a
    renamed tenant's objects by their new name (Pulumi adopts the old ones through aliases).
    """
    from components.review.diff import Side, compare_stack
    from components.resources.kubernetes import logical_name
    from components.load import load_environment

    before, after = load_environment(base, stack), load_environment(head, stack)
    document = compare_stack(stack, Side(before), Side(after))
    ops = {"added": "create", "changed": "update", "removed": "delete"}
    out: dict[str, dict[str, str]] = {"create": {}, "update": {}, "delete": {}}

    def name_of(prefix: str, change: dict[str, Any]) -> str:
        if change["kind"] == "HelmRelease":
            return f"{prefix}-vcluster"
        meta = {"name": change["name"], **({"namespace": change["namespace"]} if change["namespace"] else {})}
        return logical_name(prefix, {"kind": change["kind"], "metadata": meta})

    for detail in document["tenantDetails"]:
        for change in detail["objects"]:
            # A removed tenant's objects are named after it; a renamed one's after its new name.
            out[ops[change["change"]]][name_of(detail["tenant"], change)] = change["kind"]
    for change in document["platformObjects"]:
        out[ops[change["change"]]][name_of(f"{stack}-platform", change)] = change["kind"]
    for node in document["nodes"]:   # a node's label patch and taint patch (`#taints` ids) are their own resources
        for patch in node["patches"]:
            name = name_of(f"{stack}-platform", {"kind": "Node", "namespace": None, "name": node["node"]})
            out[ops[patch["change"]]][f"{name}-taints" if patch["id"].endswith("#taints") else name] = "Node"
    return out


def engine_changes(outcome: Outcome) -> dict[str, set[str]]:
    """The engine's steps on Kubernetes resources, grouped like `offline_changes`."""
    groups = {"create": {"create"}, "update": {"update"}, "delete": {"delete"},
              "replace": {"replace", "create-replacement", "delete-replaced"}}
    return {
        key: {s.name for s in outcome.steps if s.op in ops and s.type.startswith("kubernetes:")}
        for key, ops in groups.items()
    }


def write_local_vcluster_chart(project: Path, version: str = "0.36.1", relative: str = "charts/vcluster") -> str:
    """A minimal vcluster chart in the project (as an air-gapped mirror would hold one): the real
    chart's values.schema.json (components/data/vcluster), so Helm checks the values we generate
    exactly as the real chart would, and one ConfigMap as its only template (no workload that a
    control plane without kubelets could never make ready). Returns its path relative to `project`."""
    chart = project / relative
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: vcluster\nversion: {version}\nappVersion: {version}\n"
        "description: test stand-in for the vcluster chart (real values schema, no workloads)\n"
    )
    shutil.copy2(REPO_ROOT / "components" / "data" / "vcluster" / "values.schema.json", chart / "values.schema.json")
    (chart / "values.yaml").write_text("{}\n")
    (chart / "templates" / "values.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-values\n"
        "  namespace: {{ .Release.Namespace }}\ndata:\n  values.yaml: |\n{{ toYaml .Values | indent 4 }}\n"
    )
    return relative


def with_local_vcluster_chart(dest: Path, chart: str = "charts/vcluster", source: Path = REPO_ROOT) -> Path:
    """A `make up FROM=` directory: the example's stack and tenant files, a local vcluster chart
    (`write_local_vcluster_chart`) and dev's inventory pointing its vClusters at `chart` (a path
    that need not exist, to try a wrong one)."""
    for part in ("stacks", "tenants"):
        shutil.copytree(source / part, dest / part)
    write_local_vcluster_chart(dest)
    dev = dest / "stacks" / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("    labelDomain: gpu.acme.dev\n",
                                           f"    labelDomain: gpu.acme.dev\n    vcluster:\n      chart: {chart}\n", 1))
    return dest


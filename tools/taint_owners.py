"""One owner of each GPU node's taint list after a lost state (issue 40 item 3).

A node's taint patch has no fixed field manager: the Kubernetes provider gives it one of its own,
`pulumi-kubernetes-<random>`, kept in the stack's state (`__fieldManager`; docs/gpu-sharing.md
says why it cannot name one). When the state is lost (a re-created stack, a backend restored from
an old backup), the next `up` creates the taint patch again under a new manager, and its unforced
apply of the same list shares `spec.taints` with the manager of the lost state instead of
conflicting. The node then has two owners of its taint list, and the first change of a pool's taint
afterwards (a dedicated pool given to another tenant, or made shared) is refused as a conflict with
the orphaned one.

`release_orphaned_taint_owners` ends that: for each taint patch in the stack's state, every other
`pulumi-kubernetes-*` manager that owns the node's taint list and nothing else, while the state's own
manager co-owns it (so both applied the same list), is released by an empty server-side apply under
its name: the list stays, owned by the state's manager alone. A manager owning anything besides
the list, or a list the state's manager does not own, is only reported. `make up`'s worker runs it
before and after each `up`, the deploy workflow after the environment's `up` (`python -m tools.taint_owners
--stack ENV --kubeconfig FILE EXPORT`, with a `pulumi stack export` of the stack; `--check` lists
without releasing).

The footprint is the taint patch's, not a proof: another Pulumi program patching the same nodes'
taints would look the same, and it is not something to run next to this one (docs/gpu-sharing.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from components.manifests.meta import is_taint_patch

NODE_PATCH = "kubernetes:core/v1:NodePatch"
FIELD_MANAGER_KEY = "__fieldManager"     # where the provider keeps a resource's field manager in the state
PROVIDER_MANAGERS = "pulumi-kubernetes-"  # the provider's random managers
TAINTS_ONLY = {"f:spec": {"f:taints": {}}}


def taint_patch_managers(resources: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The field manager of each taint patch in a stack's state (`stack export` resources), by node.

    >>> taint_patch_managers([{"type": NODE_PATCH, "inputs": {"apiVersion": "v1", "kind": "Node",
    ...     "metadata": {"name": "n1"}, "spec": {"taints": []}, "__fieldManager": "pulumi-kubernetes-1a"}}])
    {'n1': 'pulumi-kubernetes-1a'}
    """
    managers = {}
    for resource in resources:
        inputs, outputs = resource.get("inputs") or {}, resource.get("outputs") or {}
        if resource.get("type") != NODE_PATCH or not is_taint_patch({"kind": "Node", **inputs, "metadata": inputs.get("metadata") or {}}):
            continue
        manager = inputs.get(FIELD_MANAGER_KEY) or outputs.get(FIELD_MANAGER_KEY)
        if manager:
            managers[inputs["metadata"]["name"]] = manager
    return managers


def taint_owners(managed_fields: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The managers that own a node's `spec.taints` by server-side apply, with the fields each owns.

    >>> taint_owners([{"manager": "pulumi-kubernetes-1a", "operation": "Apply", "fieldsV1": TAINTS_ONLY},
    ...               {"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}])
    {'pulumi-kubernetes-1a': {'f:spec': {'f:taints': {}}}}
    """
    return {entry["manager"]: entry.get("fieldsV1") or {} for entry in managed_fields
            if entry.get("operation") == "Apply" and not entry.get("subresource")
            and "f:taints" in ((entry.get("fieldsV1") or {}).get("f:spec") or {})}


def orphans(owners: Mapping[str, Any], ours: str) -> tuple[list[str], list[str]]:
    """(managers to release, managers only to report) among a node's taint owners, given the
    manager of the stack's taint patch.

    >>> orphans({"pulumi-kubernetes-1a": TAINTS_ONLY, "pulumi-kubernetes-2b": TAINTS_ONLY}, "pulumi-kubernetes-2b")
    (['pulumi-kubernetes-1a'], [])
    >>> orphans({"pulumi-kubernetes-1a": TAINTS_ONLY}, "pulumi-kubernetes-2b")   # ours does not own the list
    ([], ['pulumi-kubernetes-1a'])
    """
    others = sorted(m for m in owners if m != ours and m.startswith(PROVIDER_MANAGERS))
    if ours not in owners:
        return [], others
    return [m for m in others if owners[m] == TAINTS_ONLY], [m for m in others if owners[m] != TAINTS_ONLY]


def release_orphaned_taint_owners(api_client: Any, resources: Iterable[Mapping[str, Any]], *, check: bool = False) -> list[str]:
    """Release the orphaned owners of the taint lists of the stack's nodes (module docstring);
    one line per node where one was found. `check`: say what would be released, change nothing.

    On a live cluster (the fault lane, tests/e2e/pulumi_engine/test_faults.py, runs it so),
    `release_orphaned_taint_owners(api_client, engine.export())` returns lines such as
    "node gpu-h100-06: released the taint list's owner pulumi-kubernetes-3f2a... of a lost state (...)".
    """
    from kubernetes import client

    core, lines = client.CoreV1Api(api_client), []
    for node, ours in sorted(taint_patch_managers(resources).items()):
        live = core.read_node(node)
        entries = [api_client.sanitize_for_serialization(e) for e in live.metadata.managed_fields or []]
        release, report = orphans(taint_owners(entries), ours)
        for manager in release if not check else []:
            core.patch_node(node, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
                            field_manager=manager, _content_type="application/apply-patch+yaml")
        if release:
            lines.append(f"node {node}: {'would release' if check else 'released'} the taint list's owner "
                         f"{', '.join(release)} of a lost state (the list stays, owned by the stack's {ours} alone)")
        if report:
            lines.append(f"node {node}: the taint list is also owned by {', '.join(report)}, not released "
                         f"(it owns more than the list, or the stack's {ours} does not own it): "
                         f"`kubectl get node {node} --show-managed-fields -o yaml`")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path, help="the stack's `pulumi stack export` (JSON)")
    parser.add_argument("--kubeconfig", required=True, help="the cluster the stack deploys to")
    parser.add_argument("--context", default=None, help="its context (default: the stack's `kubeContext`, else the current one)")
    parser.add_argument("--stack", default=None, help="the environment whose stack file names the `kubeContext`")
    parser.add_argument("--check", action="store_true", help="list the orphaned owners, release none")
    args = parser.parse_args(argv)
    from kubernetes import config

    context = args.context
    if context is None and args.stack:
        from components.load import load_environment

        context = load_environment(Path.cwd(), args.stack).platform.kube_context
    resources = (json.loads(args.export.read_text()).get("deployment") or {}).get("resources") or []
    api_client = config.new_client_from_config(args.kubeconfig, context=context)
    lines = release_orphaned_taint_owners(api_client, resources, check=args.check)
    print("\n".join(lines) or "every node's taint list has one owner of this stack")
    return 1 if args.check and lines else 0


if __name__ == "__main__":
    sys.exit(main())

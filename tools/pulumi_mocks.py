"""Run the real Pulumi program (or a component) under Pulumi's own mock runtime and record what it registers."""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pulumi
import yaml


REPO = Path(__file__).resolve().parents[1]


@dataclass
class Registration:
    type: str
    name: str
    inputs: dict[str, Any]
    urn: str = ""
    parent: str = ""
    read: bool = False   # a `.get` (ReadResource): the engine reads it, never creates, updates or deletes it
    options: dict[str, Any] = field(default_factory=dict)


class RecordingMocks(pulumi.runtime.Mocks):
    """Mocks that echo inputs as outputs and remember every registration with its options."""

    def __init__(self, stack_outputs: dict[str, Any] | None = None) -> None:
        self.registrations: list[Registration] = []
        self.stack_outputs = stack_outputs or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.registrations.append(Registration(args.typ, args.name, dict(args.inputs), urn=getattr(args, "urn", "") or ""))
        if args.typ == "pulumi:pulumi:StackReference":  # the program reading its own stack's last outputs
            return args.name, {"name": args.name, "outputs": self.stack_outputs, "secretOutputNames": []}
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class RecordingMonitor(pulumi.runtime.mocks.MockMonitor):
    """Also records the resource options the engine would receive (parent, protect, retainOnDelete...)."""

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.custom or request.type.startswith("gpu-tenancy:"):
            options = {
                "parent": request.parent,
                "protect": request.protect,
                "retainOnDelete": request.retainOnDelete if request.HasField("retainOnDelete") else None,
                "deletedWith": request.deletedWith,
                "aliases": [a for a in request.aliases] if hasattr(request, "aliases") else [],
                "provider": request.provider,
                "dependencies": sorted(request.dependencies),
                "replaceOnChanges": list(request.replaceOnChanges),
                "deleteBeforeReplace": request.deleteBeforeReplace,
            }
            self.options[(request.type, request.name)] = options
            self.urns[(request.type, request.name)] = response.urn
        return response

    def ReadResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().ReadResource(request)
        self.options[(request.type, request.name)] = {
            "parent": request.parent, "provider": request.provider, "dependencies": sorted(request.dependencies)}
        self.urns[(request.type, request.name)] = response.urn
        self.reads.add((request.type, request.name))
        return response

    def __init__(self, mocks):
        super().__init__(mocks)
        self.options: dict[tuple, dict] = {}
        self.urns: dict[tuple, str] = {}
        self.reads: set[tuple] = set()


def _run(
    stack: str, config: dict[str, Any], body: Callable[[], Any], project: str = "gpu-tenancy",
    stack_outputs: dict[str, Any] | None = None,
) -> tuple[list[Registration], RecordingMonitor]:
    mocks = RecordingMocks(stack_outputs)
    monitor = RecordingMonitor(mocks)
    # set_mocks keeps a root Stack resource made by an earlier run (of another project or stack),
    # which would parent this program's resources: start each run from a fresh root.
    pulumi.runtime.settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config({k: json.dumps(v) if not isinstance(v, str) else v for k, v in config.items()})

    @pulumi.runtime.test
    def program():
        body()
        return pulumi.Output.from_input(True)

    program()
    for registration in mocks.registrations:
        key = (registration.type, registration.name)
        registration.options = monitor.options.get(key, {})
        registration.urn = monitor.urns.get(key, registration.urn)
        registration.parent = registration.options.get("parent", "")
        registration.read = key in monitor.reads
    return mocks.registrations, monitor


def stack_config(root: Path, stack: str) -> dict[str, Any]:
    """The stack file's config, as Pulumi reads it; a stack without a file (a shard) has none."""
    path = root / "stacks" / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text()) if path.exists() else None
    return (data or {}).get("config") or {}


def run_program(
    stack: str, root: Path = REPO, stack_outputs: dict[str, Any] | None = None
) -> tuple[list[Registration], RecordingMonitor]:
    """Execute `__main__.py` of `root` for `stack` under mocks; return every registration.
    `stack_outputs`: what the stack exported at its last deployment (the program reads them)."""
    return _run(stack, stack_config(root, stack), lambda: runpy.run_path(str(root / "__main__.py"), run_name="__main__"),
                stack_outputs=stack_outputs)


def run_body(stack: str, config: dict[str, Any], body: Callable[[], Any], project: str = "gpu-tenancy"):
    """Run arbitrary component code (or another program, with its `project`) under mocks."""
    return _run(stack, config, body, project)


def normalise(value: Any) -> Any:
    """Compare objects the way the API server would: numbers as canonical text, no empty maps."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in sorted(value.items()) if v not in (None, {}, [])}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return value

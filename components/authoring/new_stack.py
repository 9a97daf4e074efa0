"""`tenants init`: a minimal stack file for a described cluster, with no tenants.

The cluster is described by flags or by a short inventory file: GPU classes (a model from the
catalogue below fills in the GPU Feature Discovery product label and the GPU memory) and node
pools. The inventory file holds the same fields as the stack's `gpu-tenancy:platform` object
(docs/file-format.md), `product` and `memory` of a catalogue model being optional.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from ..load import environment_from_documents
from ..spec.base import API_VERSION
from ..spec.problems import InvalidInput, Problem
from ..spec.stack import CONFIG_KEY
from ..spec.yaml_source import SourceDocument

# GPU model -> (nvidia.com/gpu.product label as GPU Feature Discovery sets it, memory per GPU).
# MIG-capable models use the names of the MIG geometry table (components/data/nvidia/mig-profiles.yaml).
# Check the label on your nodes: kubectl get nodes -L nvidia.com/gpu.product
GPU_MODELS: dict[str, tuple[str, str]] = {
    "A100-40GB": ("NVIDIA-A100-SXM4-40GB", "40Gi"),
    "A100-80GB": ("NVIDIA-A100-SXM4-80GB", "80Gi"),
    "A30-24GB": ("NVIDIA-A30", "24Gi"),
    "A10G": ("NVIDIA-A10G", "24Gi"),
    "B200-180GB": ("NVIDIA-B200", "180Gi"),
    "H100-80GB": ("NVIDIA-H100-80GB-HBM3", "80Gi"),
    "H100-NVL-94GB": ("NVIDIA-H100-NVL", "94Gi"),
    "H200-141GB": ("NVIDIA-H200", "141Gi"),
    "L4": ("NVIDIA-L4", "24Gi"),
    "L40S": ("NVIDIA-L40S", "48Gi"),
    "T4": ("Tesla-T4", "16Gi"),
}


def fill_from_catalogue(platform: dict[str, Any]) -> dict[str, Any]:
    """A copy of `platform` whose GPU classes of a catalogue model have `product` and `memory`.

    >>> fill_from_catalogue({"gpuClasses": {"l4": {"model": "L4"}}})["gpuClasses"]["l4"]["product"]
    'NVIDIA-L4'
    """
    platform = copy.deepcopy(platform)
    classes = platform.get("gpuClasses")
    if isinstance(classes, dict):
        for spec in classes.values():
            if isinstance(spec, dict) and spec.get("model") in GPU_MODELS:
                product, memory = GPU_MODELS[spec["model"]]
                filled = {"model": spec["model"], "product": spec.get("product", product), "memory": spec.get("memory", memory)}
                rest = {key: value for key, value in spec.items() if key not in filled}
                spec.clear()
                spec.update({**filled, **rest})
    return platform


def in_current_format(platform: dict[str, Any]) -> dict[str, Any]:
    """`platform` naming the current stack file format (an inventory file need not say it).

    >>> in_current_format({"labelDomain": "gpu.example.com"})["apiVersion"]
    'gpu-tenancy.dev/v1alpha2'
    """
    return {"apiVersion": API_VERSION, **platform}


def stack_document(platform: dict[str, Any], file: str, positions: dict | None = None) -> SourceDocument:
    """The stack file's document for `platform`; `positions` of an inventory file's paths (relative
    to the platform object) keep problems located in that file.

    >>> stack_document({"labelDomain": "gpu.example.com"}, "stacks/Pulumi.lab.yaml").data
    {'config': {'gpu-tenancy:platform': {'labelDomain': 'gpu.example.com'}}}
    """
    prefix = ("config", CONFIG_KEY)
    located = {prefix + tuple(path): position for path, position in (positions or {}).items()}
    return SourceDocument(file, {"config": {CONFIG_KEY: platform}}, located)


def check_stack(env: str, doc: SourceDocument) -> list[Problem]:
    """Every problem (warnings too) of a stack with no tenants.

    >>> platform = {"apiVersion": "gpu-tenancy.dev/v1alpha2", "labelDomain": "gpu.example.com"}
    >>> check_stack("lab", stack_document(platform, "stacks/Pulumi.lab.yaml"))
    []
    >>> [str(p) for p in check_stack("lab", stack_document({"apiVersion": platform["apiVersion"]}, "stacks/Pulumi.lab.yaml"))]
    ['stacks/Pulumi.lab.yaml: config.gpu-tenancy:platform.labelDomain: required field is missing; add `labelDomain:` (docs/file-format.md says what it holds)']
    """
    try:
        environment = environment_from_documents(env, doc, [], [], known_envs=[env])
    except InvalidInput as err:
        return err.problems
    return environment.warnings


_ORDER = ("apiVersion", "environment", "kubeContext", "labelDomain", "platformAdminGroup", "platformNamespaces", "gpuClasses",
          "nodePools", "migLayouts", "tenants")


_HEADER = (
    "# Stack {env}: the cluster inventory of one environment, written by `tenants init`.\n"
    "# Every field: docs/file-format.md (Platform). `tenants: all` deploys every tenants/*.yaml;\n"
    "# a list, e.g. [team-a], deploys only those.\n"
)


def stack_text(env: str, platform: dict[str, Any]) -> str:
    """The stack file: the platform object under `config`, the usual keys first, with a header.

    >>> print(stack_text("lab", {"tenants": "all", "labelDomain": "gpu.example.com"}), end="")
    # Stack lab: the cluster inventory of one environment, written by `tenants init`.
    # Every field: docs/file-format.md (Platform). `tenants: all` deploys every tenants/*.yaml;
    # a list, e.g. [team-a], deploys only those.
    config:
      gpu-tenancy:platform:
        labelDomain: gpu.example.com
        tenants: all
    """
    ordered = {key: platform[key] for key in _ORDER if key in platform}
    ordered.update({key: value for key, value in platform.items() if key not in ordered})
    body = yaml.safe_dump({"config": {CONFIG_KEY: ordered}}, sort_keys=False, default_flow_style=False, width=100)
    return _HEADER.format(env=env) + body


def stack_text_from_inventory(env: str, platform: dict[str, Any], inventory: str) -> str:
    """The stack file for `platform` (the inventory file's text `inventory`, filled in by the flags
    and the catalogue) that keeps the inventory as it is written: its comments, key order and flow
    style; what the inventory leaves out is added next to what it says.

    >>> inventory = "labelDomain: gpu.example.com  # the domain of our labels\\n# our GPUs\\ngpuClasses:\\n  l4: {model: L4}\\n"
    >>> platform = in_current_format(fill_from_catalogue(yaml.safe_load(inventory)))
    >>> print(stack_text_from_inventory("lab", {**platform, "tenants": "all"}, inventory), end="")
    # Stack lab: ...
    ...
    config:
      gpu-tenancy:platform:
        apiVersion: gpu-tenancy.dev/v1alpha2
        labelDomain: gpu.example.com  # the domain of our labels
        # our GPUs
        gpuClasses:
          l4: {model: L4, product: NVIDIA-L4, memory: 24Gi}
        tenants: all
    """
    from io import StringIO

    from ruamel.yaml import YAML

    rt = YAML()
    rt.width = 4096  # never re-wrap a long line
    rt.indent(mapping=2, sequence=4, offset=2)
    tree = rt.load(inventory)
    _merge_into(tree, platform)
    out = StringIO()
    rt.dump(tree, out)
    # The platform object sits two levels down: indenting every line keeps its comments and block
    # scalars as they were relative to their keys.
    body = "".join(f"    {line}" if line.strip() else line for line in out.getvalue().splitlines(keepends=True))
    return _HEADER.format(env=env) + f"config:\n  {CONFIG_KEY}:\n" + body


def _merge_into(tree, wanted: dict[str, Any]) -> None:
    """Add to the round-trip mapping `tree` what `wanted` has and it lacks (the flags and the catalogue
    only add; a key given twice is refused before): a missing key goes after the keys that come
    before it in `wanted`; a nested mapping is merged the same way, so its comments stay."""
    for index, (key, value) in enumerate(wanted.items()):
        if key in tree and isinstance(tree[key], dict) and isinstance(value, dict):
            _merge_into(tree[key], value)
        elif key not in tree:
            before = sum(1 for k in list(wanted)[:index] if k in tree)
            tree.insert(before, key, value)

"""Write components/data/kai-scheduler/kai.scheduler_configs.extract.yaml from KAI's own CRD.

KAI's `Config` CRD is 843 KB (every operand's pod template); the tool writes two of its fields
(components/manifests/kai_config.py). The extract keeps the CRD's names and its schema of exactly
those fields, the rest of `spec` kept unknown (`x-kubernetes-preserve-unknown-fields`), so that
the unit tests validate what we generate against KAI's own types and the API server lanes accept
it without the whole CRD.

    python -m tools.kai_config_crd [KAI source directory]   # default: the snapshot tools/build.sh unpacked
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from .control_plane import REPO_ROOT, VERSIONS

OUT = REPO_ROOT / "components" / "data" / "kai-scheduler" / "kai.scheduler_configs.extract.yaml"
CRD = Path("deployments") / "kai-scheduler" / "crds" / "kai.scheduler_configs.yaml"
KEPT = {"admission": ("gpuSharing",), "binder": ("plugins",)}


def extract(crd: dict) -> dict:
    """The CRD with its spec schema cut down to KEPT (other spec fields preserved unvalidated)."""
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    kept = {}
    for operand, fields in KEPT.items():
        schema = spec["properties"][operand]
        kept[operand] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                         "properties": {f: schema["properties"][f] for f in fields}}
    version = {**version, "schema": {"openAPIV3Schema": {
        "type": "object",
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                       "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": kept},
                       "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }}}
    return {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": {"name": crd["metadata"]["name"]},
            "spec": {**crd["spec"], "versions": [version]}}


def main(argv: list[str]) -> int:
    cache = Path(os.environ.get("GPU_TENANCY_CACHE_DIR") or REPO_ROOT / ".cache")
    source = Path(argv[0]) if argv else cache / "kai" / f"src-{VERSIONS['KAI_SOURCE_SHA256'][:12]}"
    crd = yaml.safe_load((source / CRD).read_text())
    header = (f"# Extract of KAI Scheduler's {CRD} (components/data/kai-scheduler/SOURCES.md),\n"
              "# written by `python -m tools.kai_config_crd`; do not edit.\n")
    OUT.write_text(header + yaml.safe_dump(extract(crd), sort_keys=True))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

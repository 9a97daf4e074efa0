"""components/resources/kubernetes.py: the Pulumi names of objects."""

from __future__ import annotations

from components.manifests.gpu_nodes import label_patch, taint_patch
from components.resources.kubernetes import logical_name
from components.spec.stack import TAINT_PATCH_SUFFIX


def test_the_validators_taint_patch_suffix_is_the_logical_names():
    """validate/platform.py refuses a node named like another node's taint patch by this suffix."""
    assert logical_name("p", taint_patch("n1", [])) == logical_name("p", label_patch("n1" + TAINT_PATCH_SUFFIX, {}))

"""Every core object validates strictly (unknown fields fail) against each supported Kubernetes version."""

from __future__ import annotations

import copy

import pytest
from packaging.version import Version

from .kube_schemas import MIN_KUBERNETES, KubeSchemas

VERSIONS = KubeSchemas().versions
ENVIRONMENTS = ("dev", "prod", "lab")


def test_supported_versions_start_at_1_30_and_include_newer_ones():
    assert VERSIONS[0].startswith(f"{MIN_KUBERNETES}.")
    assert any(Version(v) > Version("1.31") for v in VERSIONS)
    assert VERSIONS == sorted(VERSIONS, key=Version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("environment", ENVIRONMENTS)
def test_every_object_validates_strictly(rendered, kube_schemas, environment, version):
    problems = []
    count = 0
    for owner, objects in rendered[environment].items():
        for obj in objects:
            count += 1
            for error in kube_schemas.errors(obj, version):
                meta = obj["metadata"]
                problems.append(f"{owner}: {obj['kind']} {meta.get('namespace', '')}/{meta['name']}: {error}")
    assert count > 20
    assert problems == []


@pytest.mark.parametrize(
    "kind, mutate",
    [
        ("ResourceQuota", lambda o: o["spec"].__setitem__("hardd", {})),
        ("NetworkPolicy", lambda o: o["spec"]["podSelector"].__setitem__("matchLabel", {})),
        ("Role", lambda o: o["rules"][0].__setitem__("verbs", "get")),
        ("Namespace", lambda o: o["metadata"].__setitem__("labelz", {})),
    ],
)
def test_the_validation_is_strict_enough_to_catch_mistakes(rendered, kube_schemas, kind, mutate):
    sample = next(o for o in rendered["prod"]["eval"] if o["kind"] == kind)
    broken = copy.deepcopy(sample)
    mutate(broken)
    assert kube_schemas.errors(sample, VERSIONS[-1]) == []
    assert kube_schemas.errors(broken, VERSIONS[-1]) != []

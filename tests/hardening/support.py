"""Helpers of the hardening tests: Hypothesis profiles, strict object validation, problem checks."""

from __future__ import annotations

import json
import os
from typing import Any, Iterable

from hypothesis import HealthCheck, settings

from components.spec.problems import Problem
from tests.manifests.kube_schemas import KubeSchemas
from tests.manifests.test_queues_crds import CRD_FILES, crd_errors

# --- Hypothesis -------------------------------------------------------------------------------------
# No deadline: these are correctness properties, never timing assertions. `ci` (selected when CI is
# set, as in .ci/run) runs 2,050 examples across the property tests; `dev` is a quicker local pass.
# HYPOTHESIS_PROFILE=ci makes a local run do the CI amount.
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=100, derandomize=True, database=None, print_blob=True, **_COMMON)
settings.register_profile("dev", max_examples=100, **_COMMON)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")

# Examples per property test, per profile (the CI total must stay >= 2,000).
EXAMPLES = {
    "ci": {"valid": 500, "mutated": 900, "cli": 200, "yaml": 450, "diff": 400},
    "dev": {"valid": 120, "mutated": 200, "cli": 50, "yaml": 150, "diff": 100},
}[PROFILE]


# --- strict validation of generated objects ---------------------------------------------------------

KUBERNETES_VERSION = "1.30"


class StrictValidator:
    """Every generated object against Kubernetes 1.30's strict OpenAPI schema (kubernetes-validate),
    or, for Kueue and KAI objects, against the CRD schema shipped with the package.

    Results are cached by the object's canonical JSON: generated projects share most objects.
    """

    def __init__(self) -> None:
        self.schemas = KubeSchemas()
        self.version = next(v for v in self.schemas.versions if v.startswith(KUBERNETES_VERSION + "."))
        self._cache: dict[str, list[str]] = {}

    def errors(self, obj: dict) -> list[str]:
        key = json.dumps(obj, sort_keys=True)
        if key not in self._cache:
            if (obj["apiVersion"], obj["kind"]) in CRD_FILES:
                self._cache[key] = crd_errors(obj)
            else:
                self._cache[key] = self.schemas.errors(obj, self.version)
        return self._cache[key]


_VALIDATOR: StrictValidator | None = None


def strict_validator() -> StrictValidator:
    global _VALIDATOR
    if _VALIDATOR is None:
        _VALIDATOR = StrictValidator()
    return _VALIDATOR


# --- problems ---------------------------------------------------------------------------------------


def unlocated(problems: Iterable[Problem], files: Iterable[str]) -> list[str]:
    """Problems that do not point into one of `files` at a line >= 1 (empty when all do)."""
    names = set(files)
    return [str(p) for p in problems if p.file not in names or p.line < 1 or not p.message]


def canonical(value: Any) -> Any:
    """JSON round trip: what a YAML reader of the rendered files gets back (tuples become lists)."""
    return json.loads(json.dumps(value))

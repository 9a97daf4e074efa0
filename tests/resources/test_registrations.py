"""Existing stacks see no diff unless a change means it: URNs, inputs and options of every
registration of every example stack match the golden files (see registrations.py to regenerate)."""

from __future__ import annotations

import json

import pytest

from components.load import stack_names
from tools.pulumi_mocks import REPO
from tests.resources.registrations import GOLDEN, registrations_by_urn


@pytest.mark.parametrize("stack", stack_names(REPO))
def test_registrations_match_the_golden_file(stack):
    golden = json.loads((GOLDEN / f"{stack}.json").read_text())
    current = registrations_by_urn(stack)
    assert sorted(set(golden) - set(current)) == [], "URNs gone (each is a delete on a deployed stack)"
    assert sorted(set(current) - set(golden)) == [], "new URNs (regenerate the golden files if intended)"
    changed = {urn: (golden[urn], current[urn]) for urn in golden if golden[urn] != current[urn]}
    assert changed == {}, "inputs or options changed (an update on deployed stacks)"

"""`pulumi stack export` documents for tests of plans made from Pulumi's state."""

from __future__ import annotations

from components.review.moves.stack_changes import TENANT_TYPE, tenant_urn


def export(stack: str, tenants: dict[str, str] | list[str], project: str = "proj") -> dict:
    """An export holding these Tenant components (name -> URN, or names under the Fleet) and the
    stack resource itself.

    >>> export("lab", ["a"])["deployment"]["resources"][1]["type"]
    'gpu-tenancy:index:Tenant'
    """
    urns = tenants if isinstance(tenants, dict) else {t: tenant_urn(stack, project, t) for t in tenants}
    resources = [{"urn": f"urn:pulumi:{stack}::{project}::pulumi:pulumi:Stack::{project}-{stack}", "type": "pulumi:pulumi:Stack"}]
    resources += [{"urn": urn, "type": TENANT_TYPE} for urn in urns.values()]
    return {"version": 3, "deployment": {"manifest": {}, "resources": resources}}

"""A guard rail's per-tenant value, declared once: a field of the tenant's `TenantGrant`.

An admission policy of the environment reads what differs per tenant from the TenantGrant its
binding hands it as `params` (tenant_grant.py says why). Each such value is one `GrantField`,
declared next to the rules that read it (`GRANT_FIELDS` of guard_policy.py and placement_policy.py,
`TENANT_NAME` here for the one both read): its field name, its OpenAPI schema, how it is computed from
(tenant, view) (a `GrantSource`, which computes what several fields share once per grant), and
the CEL accessor the rules use (`field.cel`). tenant_grant.py builds the CRD's
schema and each tenant's grant from those declarations, so the three cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, TypeVar

from ..fleet.facts import TenantView
from ..spec.tenant import Tenant

PARAMS = "params.spec"   # what a policy whose binding has a paramRef reads the TenantGrant's spec as
T = TypeVar("T")


@dataclass(frozen=True)
class GrantSource:
    """One tenant and its view while its grant is built; `once` computes what several fields share
    (the tenant's placement, its hosts) a single time for this grant."""

    tenant: Tenant
    view: TenantView
    _computed: dict[Callable[..., Any], Any] = field(default_factory=dict, compare=False, repr=False)

    def once(self, compute: Callable[[Tenant, TenantView], T]) -> T:
        """`compute(tenant, view)`, computed on the first call only.

        >>> calls = []
        >>> def names(t, v):
        ...     calls.append(t.name)
        ...     return [t.name]
        >>> source = GrantSource(tenant, view)
        >>> source.once(names), source.once(names), calls
        (['eval'], ['eval'], ['eval'])
        """
        if compute not in self._computed:
            self._computed[compute] = compute(self.tenant, self.view)
        return self._computed[compute]


@dataclass(frozen=True)
class GrantField:
    """One field of `TenantGrant.spec`: its name, OpenAPI schema and value for one tenant."""

    name: str
    schema: dict[str, Any]
    value: Callable[[GrantSource], Any]

    @property
    def cel(self) -> str:
        """The CEL expression a policy reads the field by.

        >>> TENANT_NAME.cel
        'params.spec.tenant'
        """
        return f"{PARAMS}.{self.name}"


def strings(description: str) -> dict[str, Any]:
    """The OpenAPI schema of a list of strings.

    >>> strings("Node pools.")
    {'type': 'array', 'description': 'Node pools.', 'items': {'type': 'string'}}
    """
    return {"type": "array", "description": description, "items": {"type": "string"}}


def by_name(fields: Iterable[GrantField]) -> dict[str, GrantField]:
    """The fields by name; a name declared twice is an error (two rules would read one value).

    >>> list(by_name([TENANT_NAME]))
    ['tenant']
    """
    result: dict[str, GrantField] = {}
    for declared in fields:
        if declared.name in result:
            raise ValueError(f"TenantGrant field '{declared.name}' is declared twice")
        result[declared.name] = declared
    return result


TENANT_NAME = GrantField(
    "tenant", {"type": "string", "description": "The tenant's name (the TenantGrant's name too)."}, lambda source: source.tenant.name
)

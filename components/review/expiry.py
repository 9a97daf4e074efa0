"""Tenants that expire soon, or that have expired, as warnings on every PR (`tenants diff`).

A tenant's `expires` suspends it on the first deploy after that date, whatever that deploy is for
(docs/offboarding.md). Both sides of a diff are loaded on the same day, so an expired tenant is
suspended on both and its own diff shows nothing; yet the next deploy of the stack (any merged PR)
is the one that suspends it. So every diff names these tenants, whether the PR touches their files
or not: from `NOTICE_DAYS` days before the date (`expires-soon`), and once it is past (`expired`).

Pure: the date is the head environment's `as_of`, the day its tenants' `expires` was judged by
(`load_environment(today=...)`, `GPU_TENANCY_TODAY`, else today in UTC), so the warnings always
agree with what the loaded stack suspends.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..fleet.environment import Environment

# From this many days before `expires` every diff warns; `tenants validate` warns from 30.
NOTICE_DAYS = 14

_SUSPENDED = ("the `suspended` quota, pods: 0, in its namespaces: running pods keep running, no new pod is "
              "admitted, nothing is deleted")


def expiry_warnings(stack: str, environment: Environment | None) -> list[dict[str, Any]]:
    """`expired` for each tenant this stack suspends because its `expires` is past, `expires-soon`
    (date, days left) for each active one expiring within `NOTICE_DAYS` days; by tenant name.

    >>> from datetime import date
    >>> from components.load import environment_from_data
    >>> trial = {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": "trial",
    ...          "displayName": "Trial", "costCenter": "cc-1", "expires": "2027-03-31"}
    >>> stack = {"labelDomain": "gpu.example.com"}
    >>> soon = environment_from_data("dev", stack, {"trial": trial}, today=date(2027, 3, 21))
    >>> [(w["kind"], w["message"][:59]) for w in expiry_warnings("dev", soon)]
    [('expires-soon', 'tenant trial expires on 2027-03-31 (10 day(s) left): the fi')]
    >>> past = environment_from_data("dev", stack, {"trial": trial}, today=date(2027, 4, 1))
    >>> [(w["kind"], w["message"][:60]) for w in expiry_warnings("dev", past)]
    [('expired', 'tenant trial expired on 2027-03-31: this deploy suspends tri')]
    >>> expiry_warnings("dev", environment_from_data("dev", stack, {"trial": trial}, today=date(2027, 3, 16)))
    []
    """
    if environment is None or environment.as_of is None:
        return []
    today = environment.as_of
    warnings = []
    for loaded in environment.tenants:
        spec = loaded.spec
        if spec.expires is None:
            continue
        if spec.name in environment.expired:
            message = (f"tenant {spec.name} expired on {spec.expires}: this deploy suspends {spec.name} ({_SUSPENDED}), "
                       f"whatever else it changes; already so if stack {stack} was deployed since "
                       f"{spec.expires + timedelta(days=1)}. Extend `expires` to keep it active, or decommission it "
                       f"(docs/offboarding.md)")
            warnings.append({"stack": stack, "tenant": spec.name, "kind": "expired", "message": message})
        elif spec.is_active and 0 <= (spec.expires - today).days <= NOTICE_DAYS:
            left = (spec.expires - today).days
            message = (f"tenant {spec.name} expires on {spec.expires} ({left} day(s) left): the first deploy of stack "
                       f"{stack} after that date suspends it ({_SUSPENDED}), whatever that deploy is for; extend "
                       f"`expires` if the team still needs it")
            warnings.append({"stack": stack, "tenant": spec.name, "kind": "expires-soon", "message": message})
    return warnings

"""Say in `pulumi preview` what happens to a tenant that leaves a stack.

The engine prints the step it plans for every resource of a tenant whose file was removed (or
that moved to another shard stack): `delete`. It cannot say that `retainOnDelete` and
`deletedWith` turn those deletes into "forget, keep on the cluster". The program reads what its
own stack deployed last time (a StackReference to itself: the `tenants` output) and warns, in the
preview and the update, in plain words. A tenant that left under a rename (listed in a current
tenant's `previousNames`) gets the rename warning of `tenants diff` instead: its objects are
adopted, except those named after the old name, which are deleted.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import pulumi

from ..manifests.registration import kept_on_removal


def departure_messages(previous: Optional[Mapping[str, Any]], current: Mapping[str, Any], stack: str,
                       renames: Optional[Mapping[str, str]] = None) -> list[str]:
    """One message per tenant the stack deployed last time and no longer registers; `renames` maps
    a previous name of a tenant this stack registers to its rename message (`Fleet.renames`).

    >>> departure_messages({"a": {"namespaces": ["a"], "lifecycle": "active"}}, {}, "prod")[0][:42]
    'tenant a is no longer deployed by stack pr'
    """
    messages = []
    for tenant in sorted(set(previous or {}) - set(current)):
        if tenant in (renames or {}):
            messages.append(renames[tenant])
            continue
        before = (previous or {})[tenant] or {}
        namespaces = ", ".join(before.get("namespaces") or []) or "?"
        # The same table the plan registers by (manifests/registration.py): the warning cannot disagree.
        if not kept_on_removal(before.get("lifecycle")):
            messages.append(
                f"tenant {tenant} (decommissioned) is no longer deployed by stack {stack}: this update DELETES its "
                f"namespaces ({namespaces}) with everything in them, then its policies, role bindings and queues"
            )
            continue
        messages.append(
            f"tenant {tenant} is no longer deployed by stack {stack}: its objects are listed as deletes, but nothing "
            f"of it is deleted from the cluster. Its namespaces ({namespaces}) with everything in them, its "
            f"placement policy, role bindings and queues stay as they are, no longer managed. If it moved to "
            f"another stack, run the `pulumi state move` that `tenants diff` lists instead; to delete it, "
            f"decommission it first (docs/offboarding.md)"
        )
    return messages


def warn_about_departures(current: Mapping[str, Any], renames: Optional[Mapping[str, str]] = None) -> pulumi.StackReference:
    """Read this stack's last `tenants` output and warn about each tenant that is gone from `current`.

    >>> [r.type for r in pulumi_mocks(lambda: warn_about_departures({"eval": {}}, {"evals": "renamed"}))]
    ['pulumi:pulumi:StackReference']
    """
    stack = pulumi.get_stack()
    # Fully qualified, as every backend accepts it (a DIY backend's organization is "organization").
    name = "/".join(part for part in (pulumi.get_organization(), pulumi.get_project(), stack) if part)
    previous = pulumi.StackReference(name)
    previous.get_output("tenants").apply(
        lambda before: [pulumi.log.warn(message) for message in departure_messages(before, current, stack, renames)]
    )
    return previous

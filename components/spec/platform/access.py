"""What tenant members may see and bind, stack-wide (`Platform.tenantAccess`)."""

from __future__ import annotations

import re
from typing import Annotated, Optional

from pydantic import Field, field_validator

from ..base import Model


SystemName = Annotated[str, Field(pattern=r"^system:.+$", description="a name of the system: prefix, written in full")]


class SystemSubjects(Model):
    """`system:` users and groups tenant files may name in `access` (exact names).

    Kubernetes gives `system:` names to its own identities (every authenticated client, every
    request without credentials, cluster-admin's group, each ServiceAccount of each namespace), so a
    tenant role bound to one reaches far beyond the team. Validate refuses them in tenant files,
    except the tenant's own ServiceAccounts (`system:serviceaccount:<one of its namespaces>:<name>`)
    and the names listed here. The guard policy still never lets an owner bind a `system:` name.
    """

    users: list[SystemName] = Field(
        [], description="user names tenant files may name, e.g. [system:serviceaccount:ci:runner] (another namespace's ServiceAccount the platform vouches for)"
    )
    groups: list[SystemName] = Field(
        [], description="group names tenant files may name, e.g. [system:serviceaccounts:ci]"
    )


class TenantAccessSettings(Model):
    """Stack-wide limits on what tenant members can see and grant."""

    node_read: bool = Field(
        False,
        description="let every tenant member read Nodes (labels, taints, capacity, addresses, image lists of "
        "every node, other tenants' included); off: they read PriorityClasses, StorageClasses, RuntimeClasses only",
    )
    bindable_users: Optional[str] = Field(
        None, description="regular expression (RE2) of user names owners may bind besides the tenant's own, e.g. ^[a-z.]+@acme\\.dev$"
    )
    bindable_groups: Optional[str] = Field(
        None, description="regular expression (RE2) of group names owners may bind besides the tenant's own"
    )
    system_subjects: SystemSubjects = Field(
        SystemSubjects(),
        description="system: users and groups tenant files may name in access (exact names); any other system: name, "
        "and any ServiceAccount of a namespace not the tenant's, is refused by validate",
    )

    @field_validator("bindable_users", "bindable_groups")
    @classmethod
    def _regex(cls, value: Optional[str]) -> Optional[str]:
        if value is None:
            return value
        try:
            re.compile(value)
        except re.error as err:
            raise ValueError(f"'{value}' is not a regular expression ({err})") from None
        if not value.startswith("^") or not value.endswith("$"):
            raise ValueError(f"'{value}' must be anchored (^...$), or it matches names that merely contain it")
        return value

"""What tenant members may see and bind, stack-wide (`Platform.tenantAccess`)."""

from __future__ import annotations

import re
from typing import Annotated, Optional

from pydantic import Field, field_validator, model_validator

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


class ApiFairness(Model):
    """API Priority and Fairness for tenants' writes (`Platform.apiFairness`; manifests/api_fairness.py).

    Without it, a tenant's writes share the API server's `global-default` (people) and
    `workload-low` (ServiceAccounts) priority levels with every other client, fair-queued by user:
    one tenant's churn (a CronJob storm, a CI account creating thousands of objects) takes turns as
    one more user there, and a tenant with many users or ServiceAccounts takes more turns. With it,
    every namespaced write the platform does not own goes to a priority level of its own, queued per
    namespace (shuffle sharding), so a tenant flooding its namespaces waits in its own queues while
    the others' writes and the platform's own clients (its namespaces' ServiceAccounts, the platform
    admin group) keep their levels.
    """

    enabled: bool = Field(True, description="render the FlowSchemas and the tenants' PriorityLevelConfiguration")
    concurrency_shares: Annotated[int, Field(ge=1, le=1000, strict=True)] = Field(
        20, description="nominalConcurrencyShares of the tenants' level (the built-in global-default has 20, workload-low 100)"
    )
    lendable_percent: Annotated[int, Field(ge=0, le=100, strict=True)] = Field(
        50, description="percent of the level's seats other levels may borrow while tenants leave them idle"
    )
    queues: Annotated[int, Field(ge=1, le=512, strict=True)] = Field(
        64, description="queues of the level; each namespace is dealt handSize of them (shuffle sharding)"
    )
    hand_size: Annotated[int, Field(ge=1, le=32, strict=True)] = Field(
        6, description="queues each namespace's requests may go to (the API server requires handSize <= queues)"
    )
    queue_length_limit: Annotated[int, Field(ge=1, le=1000, strict=True)] = Field(
        50, description="requests one queue holds before the API server answers 429 to the namespace that filled it"
    )
    platform_groups: list[Annotated[str, Field(min_length=1)]] = Field(
        [], description="groups besides platformAdminGroup whose writes keep the platform's level (a deploy pipeline's group)"
    )
    platform_users: list[Annotated[str, Field(min_length=1)]] = Field(
        [], description="users whose writes keep the platform's level, e.g. the Pulumi deploy identity"
    )

    @model_validator(mode="after")
    def _hand_fits(self) -> "ApiFairness":
        if self.hand_size > self.queues:
            raise ValueError(f"handSize {self.hand_size} is more than queues {self.queues}; the API server refuses it: "
                             f"lower handSize or raise queues")
        return self

"""An environment as loaded: the platform inventory of one stack file and the tenants it deploys.

>>> dev.name, [t.name for t in dev.tenants]
('dev', ['eval', 'inference', 'llm-finetune'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from ..spec.problems import Problem
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from ..spec.yaml_source import SourceDocument
from .facts import FleetFacts, TenantView


@dataclass(frozen=True)
class LoadedTenant:
    """A tenant as it applies to one environment (overrides merged), with its source for locating errors."""

    spec: Tenant
    doc: SourceDocument

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class Environment:
    """Everything one Pulumi stack deploys: the platform inventory and the tenants enabled in it.

    `as_of`: the date the tenants' `expires` was judged by (None: not judged, e.g. built by hand);
    `expired`: the enabled tenants written `active` that this environment suspends because that date
    is past their `expires` (their spec already says `suspended`). Frozen: to change the platform or
    the tenants, make another environment (`dataclasses.replace`); its facts are its own.

    >>> from components.spec.stack import Platform
    >>> Environment("dev", Platform(labelDomain="gpu.example.com"), None, []).facts.environment_label
    'dev'
    """

    name: str
    platform: Platform
    platform_doc: SourceDocument
    tenants: list[LoadedTenant]
    disabled_tenants: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    as_of: date | None = None
    expired: list[str] = field(default_factory=list)
    # Made here unless given; `dataclasses.replace` hands the old ones on, kept only when they are
    # made of this platform and these very tenant specs (a replaced tenant list gets facts anew).
    facts: FleetFacts | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        label = self.platform.environment or self.name
        if not _made_of(self.facts, label, self.platform, self.tenants):
            members = tuple((t.name, t.spec) for t in self.tenants)
            object.__setattr__(self, "facts", FleetFacts(label, self.platform, members))

    @property
    def specs(self) -> list[Tenant]:
        return [t.spec for t in self.tenants]

    def view(self, tenant: Tenant) -> TenantView:
        """What the builders of `tenant` read of this environment's fleet (`FleetFacts.view`).

        >>> from components.spec.stack import Platform
        >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
        >>> Environment("dev", Platform(labelDomain="gpu.example.com"), None, []).view(t).environment_label
        'dev'
        """
        return self.facts.view(tenant)


def _made_of(facts: FleetFacts | None, label: str, platform: Platform, tenants: list[LoadedTenant]) -> bool:
    """Whether `facts` are those of this label, platform and tenants (the same objects, in order).

    >>> from components.spec.stack import Platform
    >>> platform = Platform(labelDomain="gpu.example.com")
    >>> _made_of(FleetFacts("dev", platform, ()), "dev", platform, []), _made_of(None, "dev", platform, [])
    (True, False)
    """
    if facts is None or facts.environment_label != label or facts.platform is not platform:
        return False
    if len(facts.members) != len(tenants):
        return False
    return all(spec is loaded.spec and name == loaded.name for (name, spec), loaded in zip(facts.members, tenants))

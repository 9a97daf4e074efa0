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


@dataclass
class LoadedTenant:
    """A tenant as it applies to one environment (overrides merged), with its source for locating errors."""

    spec: Tenant
    doc: SourceDocument

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class Environment:
    """Everything one Pulumi stack deploys: the platform inventory and the tenants enabled in it.

    `as_of`: the date the tenants' `expires` was judged by (None: not judged, e.g. built by hand);
    `expired`: the enabled tenants written `active` that this environment suspends because that date
    is past their `expires` (their spec already says `suspended`).
    """

    name: str
    platform: Platform
    platform_doc: SourceDocument
    tenants: list[LoadedTenant]
    disabled_tenants: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    as_of: date | None = None
    expired: list[str] = field(default_factory=list)
    _facts: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def specs(self) -> list[Tenant]:
        return [t.spec for t in self.tenants]

    @property
    def facts(self) -> FleetFacts:
        """The fleet facts of this environment, made once; anew when `tenants` or `platform` is replaced.

        >>> from components.spec.stack import Platform
        >>> Environment("dev", Platform(labelDomain="gpu.example.com"), None, []).facts.environment_label
        'dev'
        """
        # Tests and previews swap the tenant list (or a copied platform) of a loaded environment.
        made_from = (id(self.tenants), len(self.tenants), id(self.platform))
        if self._facts is None or self._facts[0] != made_from:
            label = self.platform.environment or self.name
            members = tuple((t.name, t.spec) for t in self.tenants)
            self._facts = (made_from, FleetFacts(label, self.platform, members))
        return self._facts[1]

    def view(self, tenant: Tenant) -> TenantView:
        """What the builders of `tenant` read of this environment's fleet (`FleetFacts.view`).

        >>> from components.spec.stack import Platform
        >>> t = Tenant(apiVersion="gpu-tenancy.dev/v1alpha2", kind="Tenant", name="a", displayName="A", costCenter="cc-1")
        >>> Environment("dev", Platform(labelDomain="gpu.example.com"), None, []).view(t).environment_label
        'dev'
        """
        return self.facts.view(tenant)

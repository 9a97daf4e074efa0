"""An environment as loaded: the platform inventory of one stack file and the tenants it deploys.

>>> environment.name, [t.name for t in environment.tenants]   # doctest: +SKIP
('dev', ['eval', 'inference', 'llm-finetune'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..spec.problems import Problem
from ..spec.stack import Platform
from ..spec.tenant import Tenant
from ..spec.yaml_source import SourceDocument


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
    """Everything one Pulumi stack deploys: the platform inventory and the tenants enabled in it."""

    name: str
    platform: Platform
    platform_doc: SourceDocument
    tenants: list[LoadedTenant]
    disabled_tenants: list[str] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    # Facts derived from the whole fleet that every tenant's builders need (computed once).
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def specs(self) -> list[Tenant]:
        return [t.spec for t in self.tenants]

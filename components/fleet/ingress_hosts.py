"""Who owns an Ingress host in one environment, and which claims of tenant files overlap.

ingress-nginx merges every Ingress of one host into one server, so a tenant that may serve another
tenant's host takes over that tenant's traffic. The guard admits an Ingress host the tenant's
TenantGrant lists (`manifests/tenant_grant.py` `ingress_hosts`), so each host must be in one
tenant's grant only. The owners:

* `<tenant>.<ingressDomain>` and every name below it: that tenant (its name decides, whether or not
  a tenant of that name exists yet); the ingress domain itself: the platform;
* a name outside the ingress domain: the tenant the stack grants its domain
  (`ingressHosts.tenantDomains`; the most specific grant wins); with no grants in the stack, the one
  tenant that claims it.

A claim is an entry of `network.ingressHosts`: a host (`api.example.com`) or a wildcard
(`*.example.com`: every name strictly below example.com, at any depth, as the guard's
`endsWith("." + domain)` admits). Names are compared as written: the spec admits one spelling of a
name only (lower case, no trailing dot, IDNA; `spec/tenant.py` `Hostname`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from ..spec.stack import Platform

WILDCARD = "*."


@dataclass(frozen=True)
class HostClaim:
    """One entry of a tenant's `network.ingressHosts`."""

    tenant: str
    index: int
    name: str  # the host, or the domain of a wildcard
    wildcard: bool  # every name strictly below `name`

    @property
    def written(self) -> str:
        return f"{WILDCARD}{self.name}" if self.wildcard else self.name


def claims_of(tenant: str, entries: Iterable[str]) -> list[HostClaim]:
    """The claims of one tenant's `network.ingressHosts`.

    >>> [c.written for c in claims_of("a", ["x.example.org", "*.b.example.org"])]
    ['x.example.org', '*.b.example.org']
    """
    return [
        HostClaim(tenant, index, entry.removeprefix(WILDCARD), entry.startswith(WILDCARD))
        for index, entry in enumerate(entries)
    ]


def below(name: str, domain: str) -> bool:
    """Whether `name` is strictly below `domain` (a label boundary, not a suffix: `xapps.com` is not below `apps.com`).

    >>> below("a.apps.example.com", "apps.example.com"), below("xapps.example.com", "apps.example.com"), below("apps.example.com", "apps.example.com")
    (True, False, False)
    """
    return name.endswith("." + domain)


def at_or_below(name: str, domain: str) -> bool:
    """Whether `name` is `domain` or below it.

    >>> at_or_below("apps.example.com", "apps.example.com"), at_or_below("example.com", "apps.example.com")
    (True, False)
    """
    return name == domain or below(name, domain)


def overlap(a: HostClaim, b: HostClaim) -> bool:
    """Whether two claims share a name an Ingress could serve: the same host, a host below a
    wildcard, or one wildcard at or below the other (a wildcard does not cover its domain itself).

    >>> x, y = claims_of("a", ["*.example.org", "shop.example.org"]), claims_of("b", ["example.org", "*.shop.example.org"])
    >>> overlap(x[0], y[1]), overlap(x[1], y[0]), overlap(x[0], y[0]), overlap(x[1], y[1])
    (True, False, False, False)
    """
    if a.wildcard and b.wildcard:
        return at_or_below(a.name, b.name) or at_or_below(b.name, a.name)
    if a.wildcard or b.wildcard:
        wild, exact = (a, b) if a.wildcard else (b, a)
        return below(exact.name, wild.name)
    return a.name == b.name


def _domain_owner(name: str, platform: Platform) -> Optional[tuple[str, str]]:
    """(tenant, granted domain) of the most specific stack grant at or above `name`, or None."""
    grants = platform.ingress_hosts.tenant_domains if platform.ingress_hosts else {}
    covering = [(len(domain), domain, tenant) for tenant, domains in grants.items() for domain in domains if at_or_below(name, domain)]
    if not covering:
        return None
    _, domain, tenant = max(covering)
    return tenant, domain


def foreign_claim(claim: HostClaim, platform: Platform, tenants: Mapping[str, str]) -> Optional[str]:
    """Why a claim is not the claiming tenant's to make (naming who owns the name and what to do),
    or None when every name it covers is the tenant's, or has no owner yet (no grants in the stack:
    the overlap of claims decides, `overlapping_claims`).

    >>> from components.spec.stack import Platform
    >>> p = Platform(labelDomain="gpu.example.com", ingressDomain="apps.example.com",
    ...              ingressHosts={"tenantDomains": {"a": ["a.example.org"], "b": ["example.org"]}})
    >>> own = claims_of("a", ["a.apps.example.com", "*.a.apps.example.com", "x.a.example.org", "*.a.example.org"])
    >>> [foreign_claim(c, p, {"a": "a", "b": "b"}) for c in own]
    [None, None, None, None]
    >>> for c in claims_of("a", ["b.apps.example.com", "*.apps.example.com", "apps.example.com", "www.example.org", "*.example.org", "x.example.net"]):
    ...     print(foreign_claim(c, p, {"a": "a", "b": "b"}))  # doctest: +ELLIPSIS
    'b.apps.example.com' belongs to tenant 'b': every name at or below b.apps.example.com is that tenant's (its name, under the stack's ingressDomain)...
    '*.apps.example.com' covers every tenant's hosts: each <tenant>.apps.example.com (the stack's ingressDomain) and the names below it belong to that tenant; ...
    'apps.example.com' is the stack's ingressDomain itself, which belongs to the platform; ...
    'www.example.org' belongs to tenant 'b': the stack grants it example.org (ingressHosts.tenantDomains.b); ...
    '*.example.org' covers names of tenant 'b': the stack grants it example.org (ingressHosts.tenantDomains.b); ...
    'x.example.net' is not granted to tenant 'a': a host outside the stack's ingressDomain (apps.example.com) must be under a domain the stack grants the tenant (ingressHosts.tenantDomains.a, now: a.example.org); ...
    """
    domain = platform.ingress_domain
    own_hint = f"the tenant's own names are {claim.tenant}.{domain} and the names below it (*.{claim.tenant}.{domain})" if domain else ""
    if domain and claim.wildcard and at_or_below(domain, claim.name):
        return (f"'{claim.written}' covers every tenant's hosts: each <tenant>.{domain} (the stack's ingressDomain) and the "
                f"names below it belong to that tenant; {own_hint}")
    if domain and claim.name == domain:
        return f"'{claim.written}' is the stack's ingressDomain itself, which belongs to the platform; {own_hint}"
    if domain and below(claim.name, domain):
        label = claim.name[: -len(domain) - 1].rsplit(".", 1)[-1]
        owner = tenants.get(label, label)
        if owner == claim.tenant:
            return None
        whose = ("its name" if owner == label else f"its previous name '{label}'") if label in tenants else (
            f"no tenant '{label}' exists yet: each <name>.{domain} is kept for the tenant of that name")
        return (f"'{claim.written}' belongs to tenant '{owner}': every name at or below {label}.{domain} is that tenant's "
                f"({whose}, under the stack's ingressDomain); {own_hint}")
    if platform.ingress_hosts is None:
        return None
    return _granted_claim(claim, platform)


def _granted_claim(claim: HostClaim, platform: Platform) -> Optional[str]:
    """A claim outside the ingress domain against the stack's grants (`ingressHosts.tenantDomains`)."""
    grants = platform.ingress_hosts.tenant_domains if platform.ingress_hosts else {}
    owner = _domain_owner(claim.name, platform)
    if owner is None:
        granted = ", ".join(grants.get(claim.tenant, [])) or "none"
        outside = f" ({platform.ingress_domain})" if platform.ingress_domain else ""
        return (f"'{claim.written}' is not granted to tenant '{claim.tenant}': a host outside the stack's ingressDomain{outside} "
                f"must be under a domain the stack grants the tenant (ingressHosts.tenantDomains.{claim.tenant}, now: {granted}); "
                "ask the platform team to grant it")
    if owner[0] != claim.tenant:
        verb = "covers names of" if claim.wildcard else "belongs to"
        return (f"'{claim.written}' {verb} tenant '{owner[0]}': the stack grants it {owner[1]} (ingressHosts.tenantDomains.{owner[0]}); "
                "a name has one tenant: remove it here, or have the platform team move the grant in the stack")
    inside = sorted((domain, tenant) for tenant, domains in grants.items() for domain in domains
                    if claim.wildcard and tenant != claim.tenant and below(domain, claim.name))
    if inside:
        domain, tenant = inside[0]
        return (f"'{claim.written}' covers names of tenant '{tenant}': the stack grants it {domain} "
                f"(ingressHosts.tenantDomains.{tenant}); claim the names below {claim.name} one by one, or a narrower wildcard")
    return None


def overlapping_claims(all_claims: Iterable[HostClaim]) -> dict[HostClaim, list[HostClaim]]:
    """For each claim, the other tenants' claims it overlaps (`overlap`), found through the names
    above each claim so that a fleet of thousands is not compared pair by pair.

    >>> found = overlapping_claims(claims_of("a", ["shop.example.org", "*.x.example.org"]) + claims_of("b", ["*.example.org"]))
    >>> sorted((c.tenant, c.written, [o.written for o in others]) for c, others in found.items())
    [('a', '*.x.example.org', ['*.example.org']), ('a', 'shop.example.org', ['*.example.org']), ('b', '*.example.org', ['shop.example.org', '*.x.example.org'])]
    """
    listed = list(all_claims)
    by_name: dict[tuple[str, bool], list[tuple[int, HostClaim]]] = {}
    for position, claim in enumerate(listed):
        by_name.setdefault((claim.name, claim.wildcard), []).append((position, claim))
    found: dict[HostClaim, list[HostClaim]] = {}

    def meet(a: HostClaim, b: HostClaim) -> None:
        if a.tenant != b.tenant and overlap(a, b):
            found.setdefault(a, []).append(b)
            found.setdefault(b, []).append(a)

    for position, claim in enumerate(listed):
        labels = claim.name.split(".")
        # The same name (each pair once), then every wildcard above it (each pair from its deeper claim).
        for other_position, other in by_name.get((claim.name, claim.wildcard), []):
            if other_position > position:
                meet(claim, other)
        for start in range(1, len(labels)):
            for _, other in by_name.get((".".join(labels[start:]), True), []):
                meet(claim, other)
    return found

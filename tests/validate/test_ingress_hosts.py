"""Who may claim an Ingress host (issue 34): `<tenant>.<ingressDomain>` and below are the tenant's,
names outside the ingress domain are the tenant's the stack grants them to, and no two tenants
claim overlapping names. Each refusal names the owner; each neighbour is accepted."""

from __future__ import annotations

import pytest

from components import InvalidInput, environment_from_data
from components.manifests.tenant_grant import tenant_grant

DOMAIN = "apps.example.com"


def _tenant(name: str, hosts: list[str], **fields) -> dict:
    return {"apiVersion": "gpu-tenancy.dev/v1alpha2", "kind": "Tenant", "name": name, "displayName": name.title(),
            "costCenter": "cc-1", "network": {"ingressHosts": hosts}, **fields}


def _platform(grants: dict[str, list[str]] | None = None, **fields) -> dict:
    platform = {"labelDomain": "gpu.example.com", "ingressDomain": DOMAIN, **fields}
    if grants is not None:
        platform["ingressHosts"] = {"tenantDomains": grants}
    return platform


def _problems(platform: dict, hosts: dict[str, list[str]]) -> list[tuple[str, str, str, str]]:
    """(file, field, severity, message) of every problem and warning, the tenants' hosts as given."""
    tenants = {name: _tenant(name, entries) for name, entries in hosts.items()}
    try:
        environment = environment_from_data("prod", platform, tenants)
    except InvalidInput as err:
        found = err.problems
    else:
        found = environment.warnings
    return [(p.file.removeprefix("data:"), p.field, p.severity, p.message) for p in found]


def _errors(platform: dict, hosts: dict[str, list[str]]) -> dict[tuple[str, str], str]:
    return {(file, field): message for file, field, severity, message in _problems(platform, hosts) if severity == "error"}


def test_the_legitimate_neighbours_are_accepted_and_granted():
    """Own host, own subdomains and wildcard, a granted external domain with its names and wildcard,
    and a name below another tenant's grant that the stack gives this tenant (the more specific grant)."""
    platform = _platform({"a": ["shop.example.org"], "b": ["example.org"]})
    hosts = {
        "a": ["a.apps.example.com", "api.a.apps.example.com", "*.a.apps.example.com", "*.eu.a.apps.example.com",
              "shop.example.org", "v2.shop.example.org", "*.shop.example.org"],
        "b": ["www.example.org", "*.docs.example.org", "example.org"],
    }
    assert _problems(platform, hosts) == []
    environment = environment_from_data("prod", platform, {n: _tenant(n, h) for n, h in hosts.items()})
    a = next(t for t in environment.tenants if t.name == "a")
    spec = tenant_grant(a.spec, environment.view(a.spec))["spec"]
    assert spec["ingressHosts"] == ["a.apps.example.com", "api.a.apps.example.com", "shop.example.org", "v2.shop.example.org"]
    assert spec["ingressDomains"] == ["a.apps.example.com", "eu.a.apps.example.com", "shop.example.org"]


def test_another_tenants_name_under_the_ingress_domain_is_refused_naming_the_owner():
    errors = _errors(_platform({}), {
        "a": ["b.apps.example.com", "x.b.apps.example.com", "*.b.apps.example.com", "future.apps.example.com",
              "ab.apps.example.com", "a.apps.example.com"],
        "b": [],
    })
    owner = "belongs to tenant 'b': every name at or below b.apps.example.com is that tenant's"
    for index in range(3):
        assert owner in errors[("tenants/a", f"network.ingressHosts[{index}]")]
    assert "the tenant's own names are a.apps.example.com and the names below it (*.a.apps.example.com)" in errors[("tenants/a", "network.ingressHosts[0]")]
    assert "no tenant 'future' exists yet" in errors[("tenants/a", "network.ingressHosts[3]")]
    # A label boundary, not a suffix: ab.apps.example.com is tenant ab's, not a's.
    assert "belongs to tenant 'ab'" in errors[("tenants/a", "network.ingressHosts[4]")]
    assert ("tenants/a", "network.ingressHosts[5]") not in errors
    assert not any(file == "tenants/b" for file, _ in errors)


def test_a_renamed_tenant_keeps_its_previous_name_under_the_ingress_domain():
    tenants = {"new": _tenant("new", ["old.apps.example.com", "*.old.apps.example.com"], previousNames=["old"]),
               "a": _tenant("a", ["api.old.apps.example.com"])}
    environment_or_error = None
    try:
        environment_from_data("prod", _platform({}), tenants)
    except InvalidInput as err:
        environment_or_error = {(p.file, p.field): p.message for p in err.problems if p.severity == "error"}
    assert environment_or_error == {("data:tenants/a", "network.ingressHosts[0]"): (
        "'api.old.apps.example.com' belongs to tenant 'new': every name at or below old.apps.example.com is that tenant's "
        "(its previous name 'old', under the stack's ingressDomain); the tenant's own names are a.apps.example.com and "
        "the names below it (*.a.apps.example.com)")}


@pytest.mark.parametrize("wildcard", ["*.apps.example.com", "*.example.com"])
def test_a_wildcard_at_or_above_the_ingress_domain_is_refused(wildcard):
    errors = _errors(_platform({"a": ["example.com"]}), {"a": [wildcard], "b": []})
    assert errors[("tenants/a", "network.ingressHosts[0]")].startswith(
        f"'{wildcard}' covers every tenant's hosts: each <tenant>.{DOMAIN} (the stack's ingressDomain)")


def test_the_ingress_domain_itself_is_the_platforms():
    errors = _errors(_platform({}), {"a": [DOMAIN]})
    assert errors[("tenants/a", "network.ingressHosts[0]")].startswith(f"'{DOMAIN}' is the stack's ingressDomain itself, which belongs to the platform")


def test_names_the_stack_grants_another_tenant_are_refused_naming_it():
    platform = _platform({"a": ["shop.example.org"], "b": ["example.org"]})
    errors = _errors(platform, {"a": ["www.example.org", "*.example.org"], "b": ["shop.example.org", "x.shop.example.org", "*.example.org"]})
    assert errors == {
        ("tenants/a", "network.ingressHosts[0]"): "'www.example.org' belongs to tenant 'b': the stack grants it example.org "
        "(ingressHosts.tenantDomains.b); a name has one tenant: remove it here, or have the platform team move the grant in the stack",
        ("tenants/a", "network.ingressHosts[1]"): "'*.example.org' covers names of tenant 'b': the stack grants it example.org "
        "(ingressHosts.tenantDomains.b); a name has one tenant: remove it here, or have the platform team move the grant in the stack",
        ("tenants/b", "network.ingressHosts[0]"): "'shop.example.org' belongs to tenant 'a': the stack grants it shop.example.org "
        "(ingressHosts.tenantDomains.a); a name has one tenant: remove it here, or have the platform team move the grant in the stack",
        ("tenants/b", "network.ingressHosts[1]"): "'x.shop.example.org' belongs to tenant 'a': the stack grants it shop.example.org "
        "(ingressHosts.tenantDomains.a); a name has one tenant: remove it here, or have the platform team move the grant in the stack",
        ("tenants/b", "network.ingressHosts[2]"): "'*.example.org' covers names of tenant 'a': the stack grants it shop.example.org "
        "(ingressHosts.tenantDomains.a); claim the names below example.org one by one, or a narrower wildcard",
    }


def test_a_host_outside_every_grant_is_refused_once_the_stack_grants():
    errors = _errors(_platform({"a": ["example.org"]}), {"a": ["notexample.org"], "c": ["x.example.net"]})
    assert errors[("tenants/a", "network.ingressHosts[0]")].startswith(
        "'notexample.org' is not granted to tenant 'a': a host outside the stack's ingressDomain (apps.example.com) must be "
        "under a domain the stack grants the tenant (ingressHosts.tenantDomains.a, now: example.org)")
    assert "(ingressHosts.tenantDomains.c, now: none)" in errors[("tenants/c", "network.ingressHosts[0]")]


def test_without_grants_overlapping_claims_are_refused_on_both_files():
    """A stack without ingressHosts decides no owner outside its ingress domain: the same host or
    overlapping wildcards of two tenants are refused on each, naming the other; a host one tenant
    alone claims is a warning (any tenant could have claimed it first)."""
    problems = _problems(_platform(), {
        "a": ["api.example.org", "*.x.example.org", "notexample.org"],
        "b": ["*.example.org"],
        "c": ["api.example.org"],
        "d": ["example.org", "solo.example.net"],
    })
    errors = {(file, field): message for file, field, severity, message in problems if severity == "error"}
    assert errors[("tenants/a", "network.ingressHosts[0]")].startswith(
        "'api.example.org' overlaps the Ingress hosts of tenant 'b' (data:tenants/b: '*.example.org'), 'c' (data:tenants/c: 'api.example.org'); "
        "a host has one tenant")
    assert "tenant 'b' (data:tenants/b: '*.example.org')" in errors[("tenants/a", "network.ingressHosts[1]")]
    assert errors[("tenants/b", "network.ingressHosts[0]")].startswith(
        "'*.example.org' overlaps the Ingress hosts of tenant 'a' (data:tenants/a: 'api.example.org'), 'a' (data:tenants/a: '*.x.example.org'), "
        "'c' (data:tenants/c: 'api.example.org')")
    assert "tenant 'a' (data:tenants/a: 'api.example.org')" in errors[("tenants/c", "network.ingressHosts[0]")]
    # A wildcard does not cover its own domain, and notexample.org is not below example.org.
    assert set(errors) == {("tenants/a", "network.ingressHosts[0]"), ("tenants/a", "network.ingressHosts[1]"),
                           ("tenants/b", "network.ingressHosts[0]"), ("tenants/c", "network.ingressHosts[0]")}
    warnings = {(file, field) for file, field, severity, _ in problems if severity == "warning"}
    assert {("tenants/a", "network.ingressHosts[2]"), ("tenants/d", "network.ingressHosts[0]"), ("tenants/d", "network.ingressHosts[1]")} <= warnings


@pytest.mark.parametrize(("written", "fix"), [
    ("B.apps.example.com", "write 'b.apps.example.com', in lower case"),
    ("b.apps.example.com.", "write 'b.apps.example.com', without the trailing dot"),
    ("b.apps.example.com\n", "write 'b.apps.example.com', without the spaces or line break around it"),
    (" b.apps.example.com", "write 'b.apps.example.com', without the spaces or line break around it"),
    ("*.Apps.Example.com.", "write '*.apps.example.com', without the trailing dot (Kubernetes refuses a host ending in '.'), in lower case"),
    ("bücher.example.org", "write 'xn--bcher-kva.example.org', in its IDNA form (xn--...)"),
    ("b.аpps.example.com", "write 'b.xn--pps-5cd.example.com', in its IDNA form (xn--...), which is what clients send for a non-ASCII name (check the letters: a look-alike is another name)"),
    ("a.*.example.com", "'*' only as the whole first label"),
    ("*.*.example.com", "'*' only as the whole first label"),
    ("*example.com", "'*' only as the whole first label"),
    ("10.0.0.1", "never an IP address"),
    ("localhost", "at least two labels"),
])
def test_other_spellings_of_a_host_are_refused_with_the_one_spelling(written, fix):
    errors = _errors(_platform({}), {"a": [written], "b": []})
    assert fix in errors[("tenants/a", "network.ingressHosts[0]")]


def test_the_idna_form_of_a_name_is_compared_as_written():
    """The punycode of a look-alike of b's host is another DNS name: under the ingress domain it is
    refused as any other tenant's name would be; a's own xn-- subdomain is a's."""
    errors = _errors(_platform({}), {"a": ["xn--b-ekn.apps.example.com", "xn--bcher-kva.a.apps.example.com"], "b": []})
    assert list(errors) == [("tenants/a", "network.ingressHosts[0]")]
    assert "belongs to tenant 'xn--b-ekn'" in errors[("tenants/a", "network.ingressHosts[0]")]


def test_the_stack_grants_each_domain_to_one_tenant_outside_the_ingress_domain():
    errors = _errors(_platform({"a": ["x.example.org"], "b": ["x.example.org", "a.apps.example.com"], "ghost": ["example.net"]}),
                     {"a": [], "b": []})
    where = "platform of stack prod"
    assert errors[(where, "config.gpu-tenancy:platform.ingressHosts.tenantDomains.a[0]")].startswith(
        "'x.example.org' is also granted to tenant 'b'; a domain has one tenant")
    assert errors[(where, "config.gpu-tenancy:platform.ingressHosts.tenantDomains.b[0]")].startswith("'x.example.org' is also granted to tenant 'a'")
    assert errors[(where, "config.gpu-tenancy:platform.ingressHosts.tenantDomains.b[1]")].startswith(
        "'a.apps.example.com' is under the stack's ingressDomain (apps.example.com)")
    assert (where, "config.gpu-tenancy:platform.ingressHosts.tenantDomains.ghost") not in errors
    warnings = {(file, field): message for file, field, severity, message in _problems(_platform({"ghost": ["example.net"]}), {})
                if severity == "warning"}
    assert warnings[(where, "config.gpu-tenancy:platform.ingressHosts.tenantDomains.ghost")].startswith("no tenant file defines 'ghost'")


def test_a_grant_is_a_domain_not_a_wildcard():
    errors = _errors(_platform({"a": ["*.example.org"]}), {"a": []})
    assert errors[("platform of stack prod", "config.gpu-tenancy:platform.ingressHosts.tenantDomains.a[0]")] == (
        "'*.example.org' is a wildcard; grant the domain 'example.org': a grant is a domain and every name below it")


def test_without_an_ingress_domain_only_grants_and_overlaps_decide():
    platform = {"labelDomain": "gpu.example.com", "ingressHosts": {"tenantDomains": {"a": ["example.org"]}}}
    errors = _errors(platform, {"a": ["a.example.org", "*.example.org"], "b": ["b.example.org"]})
    assert list(errors) == [("tenants/b", "network.ingressHosts[0]")]
    assert errors[("tenants/b", "network.ingressHosts[0]")].startswith(
        "'b.example.org' belongs to tenant 'a': the stack grants it example.org (ingressHosts.tenantDomains.a)")

"""How each object is registered with Pulumi: retain, protect, deleted-with, depends-on and order, as plain data.

The product's first promise is that removing a tenant's file (or the tenant from a stack) deletes
nothing: its Namespaces are retained (protected where the stack asks) and everything else is
deleted with a Namespace, so while that Namespace is only retained the engine skips their deletes
too. Only a confirmed `lifecycle: decommissioned` lifts that, and then orders the delete so that no
pod ever runs without its policies. The rules are the tables below (`LIFECYCLES`, `PLACES`,
`ROLES`, `PLATFORM_PLACES`), each row with the reason it exists; `tenant_plan` and `platform_plan`
only apply them, and the Pulumi components (components/resources) loop over the plan, mapping each
entry to its typed resource. Nothing here imports Pulumi, so the rules are unit- and
property-tested (tests/manifests/test_registration.py) without an engine.

Objects are named by `object_key` (kind, namespace, name); a component's resource is
`<component>-<key>`. Names outside the plan are groups (`Group`): what one component provides and
another waits for (a tenant's grants wait for the platform's TenantGrant CRD and guard policy, a
node's taints for every tenant's placement binding and grant).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Optional, Sequence

from ..spec.stack import TAINT_PATCH_SUFFIX
from ..spec.tenant import Tenant
from .gpu_nodes import is_node_patch
from .meta import KubeObject, is_taint_patch
from .placement_policy import binding_name
from .tenant_grant import grant_prerequisite, is_tenant_grant, reads_grant

# Where a tenant's object sits: its Namespaces; objects in them; objects outside them (cluster-scoped,
# or the monitoring rule in the platform's namespace); its Helm release (the vCluster).
Place = Literal["namespace", "inside", "outside", "release"]
# What one component provides and another waits for; the shell resolves them to resources.
Group = Literal["admission", "taint gates"]
# The key of the Helm release of a tenant (its resource is `<tenant>-vcluster`).
RELEASE_KEY = "vcluster"


@dataclass(frozen=True)
class Planned:
    """One registration: the object (or Helm release) and its options, naming other entries by key.

    `None` means the option is not set (the engine's default); `waits_for` and `provides` name
    groups outside the plan; `aliased`: the tenant's previous names alias it; `deferred`: registered
    only once the other components are (`GpuPlatform.add_taints`).
    """

    key: str
    subject: Mapping[str, Any]
    place: str
    retain_on_delete: Optional[bool] = None
    protect: Optional[bool] = None
    deleted_with: Optional[str] = None
    depends_on: tuple[str, ...] = ()
    waits_for: tuple[Group, ...] = ()
    provides: tuple[Group, ...] = ()
    aliased: bool = True
    deferred: bool = False
    why: str = ""


@dataclass(frozen=True)
class Lifecycle:
    """What a lifecycle means for the tenant's removal."""

    kept: bool
    why: str


LIFECYCLES: Mapping[str, Lifecycle] = {
    "active": Lifecycle(True, "removing the file must never delete a team's data or stop its workloads"),
    "suspended": Lifecycle(True, "suspended stops new pods only; the data and running workloads stay"),
    "decommissioned": Lifecycle(False, "the one explicit, confirmed way (decommission.confirm) to make a tenant deletable"),
}


def kept_on_removal(lifecycle: Optional[str]) -> bool:
    """Whether removing a tenant of this lifecycle keeps it on the cluster; an unknown one is kept.

    >>> kept_on_removal("suspended"), kept_on_removal("decommissioned"), kept_on_removal(None)
    (True, False, True)
    """
    return LIFECYCLES.get(lifecycle or "", LIFECYCLES["active"]).kept


@dataclass(frozen=True)
class PlaceRule:
    """The options of every object of one place, for a kept (`kept=True`) or deletable tenant
    (`None`: either). `protect="stack"`: the stack's `protectNamespaces`. `deleted_with` and
    `depends_on` name "own namespace", "primary namespace" (the tenant's first that exists) or
    "outside" (every object outside its namespaces)."""

    place: Place
    kept: Optional[bool]
    phase: int
    retain_on_delete: Optional[bool]
    protect: Optional[bool | Literal["stack"]]
    deleted_with: Optional[Literal["own namespace", "primary namespace"]]
    depends_on: tuple[Literal["own namespace", "outside"], ...]
    aliased: bool
    why: str


PLACES: tuple[PlaceRule, ...] = (
    # place, kept, phase, retain_on_delete, protect, deleted_with, depends_on, aliased, why
    PlaceRule("namespace", True, 0, True, "stack", None, (), True,
              "a Namespace holds the data: on removal the engine drops it from its state, never deletes it "
              "(protect also refuses the drop where the stack asks)"),
    PlaceRule("outside", True, 1, None, None, "primary namespace", (), True,
              "while the primary Namespace is only retained the engine skips their delete too, so running pods "
              "keep their admission checks and queue; not retain_on_delete, which would also keep an object that "
              "merely stops being generated and break a replacement in place"),
    PlaceRule("outside", False, 0, None, None, None, (), True,
              "decommissioned: registered before the Namespaces, so deleted after them"),
    PlaceRule("namespace", False, 1, False, False, None, ("outside",), True,
              "decommissioned: deletable, and after the tenant's policies, so the engine deletes the Namespaces "
              "(and their pods) first and waits: no pod ever runs without its policies"),
    PlaceRule("inside", None, 2, None, None, "own namespace", ("own namespace",), True,
              "goes with its Namespace: kept while it is retained, deleted with it otherwise"),
    PlaceRule("release", None, 3, None, None, "own namespace", ("own namespace",), False,
              "the vCluster goes with its Namespace, like the objects inside it (no aliases of its own, as deployed: "
              "its name starts with the tenant's, whose alias the SDK passes on to it)"),
)


def place_rule(place: Place, kept: bool) -> PlaceRule:
    """The row of `PLACES` for an object of `place` in a kept or deletable tenant.

    >>> place_rule("namespace", True).retain_on_delete, place_rule("namespace", False).depends_on
    (True, ('outside',))
    """
    return next(rule for rule in PLACES if rule.place == place and rule.kept in (None, kept))


@dataclass(frozen=True)
class Role:
    """What an object's admission role adds: its rank among its place's objects (stable), whether it
    comes after the tenant's TenantGrants, after all of the tenant's guards (its admission policies,
    their bindings and its grants), the groups it waits for and provides."""

    name: str
    matches: Callable[[KubeObject, str], bool]
    rank: int
    after_grants: bool
    waits_for: tuple[Group, ...]
    provides: tuple[Group, ...]
    why: str
    after_guards: bool = False


# What guards a tenant's namespaces at admission: its policies, their bindings, its grants.
GUARD_KINDS = frozenset({"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "TenantGrant"})


ROLES: tuple[Role, ...] = (   # the first that matches (object, tenant name)
    Role("grant", lambda obj, _: is_tenant_grant(obj), 0, False, ("admission",), ("taint gates",),
         "needs the platform's TenantGrant CRD and guard policy; a taint lands only once it says who may tolerate it"),
    Role("placement binding", lambda obj, tenant: reads_grant(obj) and obj["metadata"]["name"] == binding_name(tenant),
         2, True, ("admission",), ("taint gates",),
         "a binding after the grant it reads and the policy it binds; a taint only once the binding decides who tolerates it"),
    Role("binding", lambda obj, _: reads_grant(obj), 2, True, ("admission",), (),
         "a binding pointing at a policy or grant not there yet leaves the namespaces unguarded or refusing everything"),
    Role("access", lambda obj, _: obj.get("kind") == "RoleBinding", 3, False, (), (),
         "members get access only once every guard of the tenant is accepted: a refused policy or binding "
         "(too large, a name taken) stops the access, never the guard (#40)", after_guards=True),
    Role("release", lambda obj, _: False, 1, False, (), (),
         "the vCluster's ServiceAccount acts in the tenant's namespaces: only once their guards are accepted",
         after_guards=True),
    Role("other", lambda obj, _: True, 1, False, (), (), "no admission role"),
)


def _role_named(name: str) -> Role:
    return next(role for role in ROLES if role.name == name)


def role_of(obj: KubeObject, tenant: str) -> Role:
    """The first row of `ROLES` that matches `obj` of the tenant named `tenant`.

    >>> from components.manifests.tenant_grant import tenant_grant
    >>> role_of(tenant_grant(tenant, view), tenant.name).name
    'grant'
    """
    return next(role for role in ROLES if role.matches(obj, tenant))


def object_key(obj: Mapping[str, Any]) -> str:
    """An object's name in a plan: kind, namespace and name (a Node's taint patch ends in `-taints`).

    >>> object_key({"kind": "Role", "metadata": {"name": "tenant-owner", "namespace": "team-a"}})
    'role-team-a-tenant-owner'
    """
    meta = obj["metadata"]
    parts = [obj["kind"].lower(), meta.get("namespace"), meta["name"]]
    return "-".join(p for p in parts if p) + (TAINT_PATCH_SUFFIX if is_taint_patch(obj) else "")


def _place(obj: Mapping[str, Any], own: set[str]) -> Place:
    if obj.get("kind") == "Namespace":
        return "namespace"
    return "inside" if obj["metadata"].get("namespace") in own else "outside"


def tenant_plan(
    tenant: Tenant, objects: Sequence[KubeObject], releases: Sequence[Mapping[str, Any]] = (), *, protect_namespaces: bool
) -> tuple[Planned, ...]:
    """Every object (then Helm release) of `tenant` with its registration options, in registration order.

    >>> [(p.key, p.retain_on_delete, p.deleted_with) for p in tenant_plan(tenant, [
    ...     {"kind": "Namespace", "metadata": {"name": "eval"}},
    ...     {"kind": "Role", "metadata": {"name": "owner", "namespace": "eval"}}], protect_namespaces=True)]
    [('namespace-eval', True, None), ('role-eval-owner', None, 'namespace-eval')]
    """
    kept = kept_on_removal(tenant.lifecycle)
    own = {o["metadata"]["name"] for o in objects if o.get("kind") == "Namespace"}
    entries = [_Entry(o, _place(o, own), object_key(o), role_of(o, tenant.name)) for o in objects]
    entries += [_Entry(r, "release", RELEASE_KEY, _role_named("release")) for r in releases]
    entries.sort(key=lambda e: (place_rule(e.place, kept).phase, e.role.rank))   # stable: input order within
    namespaces = {e.subject["metadata"]["name"]: e.key for e in entries if e.place == "namespace"}
    # The primary Namespace: the tenant's first, else the first planned (the objects dropped by a test).
    fallback = next(iter(namespaces.values()), None)
    primary = namespaces.get(tenant.all_namespaces[0], fallback) if tenant.all_namespaces else fallback
    named = {"primary namespace": tuple(filter(None, [primary])), "outside": tuple(e.key for e in entries if e.place == "outside")}
    grants = tuple(e.key for e in entries if e.role.name == "grant")
    named["guards"] = tuple(e.key for e in entries if e.subject.get("kind") in GUARD_KINDS)
    return tuple(_planned(e, place_rule(e.place, kept), protect_namespaces, namespaces, named, grants) for e in entries)


@dataclass(frozen=True)
class _Entry:
    subject: Mapping[str, Any]
    place: Place
    key: str
    role: Role

    def namespace(self) -> str:
        return (self.subject.get("namespace") if self.place == "release" else self.subject["metadata"].get("namespace")) or ""


def _planned(entry: _Entry, rule: PlaceRule, protect_namespaces: bool, namespaces: Mapping[str, str],
             named: Mapping[str, tuple[str, ...]], grants: tuple[str, ...]) -> Planned:
    refer = {**named, "own namespace": tuple(k for k in [namespaces.get(entry.namespace())] if k)}
    depends_on = (tuple(k for name in rule.depends_on for k in refer[name]) + (grants if entry.role.after_grants else ())
                  + (refer["guards"] if entry.role.after_guards else ()))
    return Planned(
        key=entry.key, subject=entry.subject, place=entry.place,
        retain_on_delete=rule.retain_on_delete,
        protect=protect_namespaces if rule.protect == "stack" else rule.protect,
        deleted_with=next(iter(refer[rule.deleted_with]), None) if rule.deleted_with else None,
        depends_on=depends_on, waits_for=entry.role.waits_for, provides=entry.role.provides,
        aliased=rule.aliased, why=f"{rule.why}; {entry.role.why}",
    )


@dataclass(frozen=True)
class PlatformRule:
    """When the platform registers an object of one place and what it depends on ("platform": every
    object of the first phase; "own node's taints": the taint patch of the same node)."""

    place: Literal["platform", "node taints", "node labels"]
    phase: int
    depends_on: tuple[Literal["platform", "own node's taints"], ...]
    waits_for: tuple[Group, ...]
    deferred: bool
    why: str


PLATFORM_PLACES: tuple[PlatformRule, ...] = (
    PlatformRule("platform", 0, (), (), False, "belongs to no single tenant; needs nothing of the tenants"),
    PlatformRule("node taints", 1, ("platform",), ("taint gates",), True,
                 "a taint lands only once the rest of the platform (the Kueue flavors carry the tolerations) and "
                 "every tenant's placement binding and grant (who may tolerate it) are in place"),
    PlatformRule("node labels", 2, ("own node's taints",), (), True,
                 "a stack deployed when one patch carried both owns the taints under one manager; applied after "
                 "the taint patch, which co-owns them, the label patch letting go of them never drops a taint"),
)

# Platform objects other components wait for: (predicate, groups provided, why).
PLATFORM_ROLES: tuple[tuple[Callable[[KubeObject], bool], tuple[Group, ...], str], ...] = (
    (grant_prerequisite, ("admission",), "the TenantGrant CRD and the policies reading TenantGrants come before any grant or binding"),
)


def platform_plan(objects: Sequence[KubeObject]) -> tuple[Planned, ...]:
    """The platform's objects with their registration options, in registration order: a tainted
    node's patches last (both of them: `PLATFORM_PLACES`).

    >>> from components.manifests.gpu_nodes import label_patch, taint_patch
    >>> [(p.key, p.depends_on, p.waits_for) for p in platform_plan([taint_patch("n1", []), label_patch("n1", {})])]
    [('node-n1-taints', (), ('taint gates',)), ('node-n1', ('node-n1-taints',), ())]
    """
    taints = {o["metadata"]["name"]: object_key(o) for o in objects if is_taint_patch(o)}
    ranked = sorted(((_platform_rule(o, taints), o) for o in objects), key=lambda pair: pair[0].phase)   # stable
    first = tuple(object_key(o) for rule, o in ranked if rule.phase == 0)
    refer: dict[str, Callable[[KubeObject], tuple[str, ...]]] = {
        "platform": lambda _: first, "own node's taints": lambda obj: (taints[obj["metadata"]["name"]],)}
    return tuple(
        Planned(
            key=object_key(o), subject=o, place=rule.place,
            depends_on=tuple(k for name in rule.depends_on for k in refer[name](o)),
            waits_for=rule.waits_for, deferred=rule.deferred, why=rule.why,
            provides=tuple(group for matches, groups, _ in PLATFORM_ROLES if matches(o) for group in groups),
        )
        for rule, o in ranked
    )


def _platform_rule(obj: KubeObject, tainted: Mapping[str, str]) -> PlatformRule:
    rules = {rule.place: rule for rule in PLATFORM_PLACES}
    if not (is_node_patch(obj) and obj["metadata"]["name"] in tainted):
        return rules["platform"]
    return rules["node taints" if is_taint_patch(obj) else "node labels"]

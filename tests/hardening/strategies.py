"""Hypothesis strategies: whole projects (a stack inventory and tenant files), valid and mutated.

`projects()` draws a stack (GPU classes of every sharing kind, static and autoscaled pools, a
scheduler) and 1-4 tenants that use it: quotas that may or may not fit the capacity, grants
between tenants, dedicated pools, lifecycles, overrides. Most draws validate; capacity overflows,
reference mix-ups and the like make the rest fail, which is fine: the properties hold either way.
`mutations()` then breaks a project the way people do: wrong types, unknown keys, bad quantities,
random unicode, deleted required fields, swapped references, damaged YAML text.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml
from hypothesis import strategies as st

ENV = "lab"
CONFIG_KEY = "gpu-tenancy:platform"
API_VERSION = "gpu-tenancy.dev/v1alpha2"

TENANT_NAMES = ["alpha", "beta", "gamma-ml", "delta", "eps-1", "zeta"]
GROUPS = ["leads", "eng", "everyone", "sre", "ml-research"]
CIDRS = ["10.20.0.0/16", "192.168.0.0/24", "0.0.0.0/0", "2001:db8::/32", "172.16.0.0/12"]
PRIORITY_CLASSES = ["online-inference", "training", "interactive", "batch"]

# Text a person might put in free-text fields: any printable or control character except lone
# surrogates (which UTF-8 cannot encode, so no file can hold them).
free_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=40)
label_values = st.from_regex(r"\A[a-z0-9]([a-z0-9._-]{0,10}[a-z0-9])?\Z")


def quantities(low: int, high: int, suffixes: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.builds(lambda n, s: f"{n}{s}", st.integers(low, high), st.sampled_from(suffixes))


@dataclass
class Project:
    """Files of a project as data (dumped with PyYAML) or, once damaged, as raw text or bytes."""

    stack: Any
    tenants: dict[str, Any]  # file stem -> data
    raw: dict[str, bytes] = field(default_factory=dict)  # relative path -> bytes that replace the data

    def files(self) -> dict[str, bytes]:
        out = {f"stacks/Pulumi.{ENV}.yaml": dump(self.stack)}
        out.update({f"tenants/{stem}.yaml": dump(data) for stem, data in self.tenants.items()})
        out.update(self.raw)
        return out

    def write(self, root: Path) -> Path:
        for relative, content in self.files().items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        return root


def dump(data: Any) -> bytes:
    return yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False, allow_unicode=True, width=100).encode("utf-8")


# --- the stack -------------------------------------------------------------------------------------

GPU_CLASS_KINDS = {
    "h100": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi"},
    "a100": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi"},
    "l4": {"model": "L4", "product": "NVIDIA-L4", "memory": "24Gi", "sharing": "timeSlicing"},
    "a100-mig": {"model": "A100-80GB", "product": "NVIDIA-A100-SXM4-80GB", "memory": "80Gi", "sharing": "mig"},
    "h100-mig1": {"model": "H100-80GB", "product": "NVIDIA-H100-80GB-HBM3", "memory": "80Gi", "sharing": "mig",
                  "mig": {"strategy": "single"}},
}
MIG_LAYOUTS = ["all-1g.10gb", "all-2g.20gb", "all-3g.40gb", "all-7g.80gb"]


@st.composite
def gpu_class(draw, name: str) -> dict:
    spec = copy.deepcopy(GPU_CLASS_KINDS[name])
    if spec.get("sharing") == "timeSlicing":
        spec["timeSlicing"] = {"replicas": draw(st.integers(2, 8))}
        if draw(st.booleans()):
            spec["timeSlicing"]["renameByDefault"] = True
    if draw(st.integers(0, 3)) == 0:
        spec["overcommit"] = draw(st.sampled_from([1, 1.25, 1.5, 2]))
    return spec


@st.composite
def node_pool(draw, class_name: str, index: int) -> dict:
    pool: dict = {"gpuClass": class_name, "gpusPerNode": draw(st.sampled_from([1, 2, 4, 8]))}
    static = draw(st.integers(0, 3))
    if static:
        pool["nodes"] = [f"{class_name}-{index}-n{i}" for i in range(static)]
    if not static or draw(st.integers(0, 3)) == 0:
        pool["maxNodes"] = draw(st.integers(0, 6))
        pool["nodeSelector"] = {"cloud.example.com/node-group": f"{class_name}-{index}"}
    if GPU_CLASS_KINDS[class_name].get("sharing") == "mig":
        single = class_name == "h100-mig1"
        pool["migLayout"] = "all-1g.10gb" if single else draw(st.sampled_from(MIG_LAYOUTS))
    if draw(st.integers(0, 4)) == 0:
        pool["patchTaints"] = True
    return pool


@st.composite
def stacks(draw) -> dict:
    names = draw(st.lists(st.sampled_from(sorted(GPU_CLASS_KINDS)), min_size=1, max_size=4, unique=True))
    pools = {}
    for name in names:
        for index in range(draw(st.integers(1, 2))):
            pools[f"{name}-p{index}"] = draw(node_pool(name, index))
    platform: dict = {
        "apiVersion": API_VERSION,
        "labelDomain": draw(st.sampled_from(["gpu.example.com", "acme.dev"])),
        "podSecurity": {"level": draw(st.sampled_from(["privileged", "baseline", "restricted"])), "version": "v1.30"},
        "platformNamespaces": {"ingress": ["ingress-nginx"], "monitoring": ["monitoring"]},
        "gpuClasses": {name: draw(gpu_class(name)) for name in names},
        "nodePools": pools,
        "scheduler": draw(st.sampled_from(["none", "kueue", "kai"])),
        "tenants": "all",
    }
    if draw(st.booleans()):
        platform["protectNamespaces"] = True
    if draw(st.booleans()):
        platform["limitRangeDefaults"] = {"defaultRequest": {"cpu": "100m", "memory": "128Mi"},
                                          "default": {"cpu": "1", "memory": "1Gi"}}
    return {"config": {"kubernetes:context": "lab", CONFIG_KEY: platform}}


# --- tenants ---------------------------------------------------------------------------------------


def _platform(stack: dict) -> dict:
    return stack["config"][CONFIG_KEY]


@st.composite
def tenant(draw, name: str, others: list[str], stack: dict, free_pools: list[str]) -> dict:
    platform = _platform(stack)
    classes = sorted(platform["gpuClasses"])
    data: dict = {
        "apiVersion": API_VERSION,
        "kind": "Tenant",
        "name": name,
        "displayName": draw(st.one_of(st.just(name.title()), free_text)),
        "costCenter": draw(label_values),
    }
    if draw(st.booleans()):
        data["description"] = draw(free_text)
    if draw(st.booleans()):
        data["contacts"] = [{"name": draw(free_text), "email": f"{name}@example.com"}]
    extra = draw(st.lists(st.sampled_from(["data", "ci", "serve"]), max_size=2, unique=True))
    namespaces = [f"{name}-{suffix}" for suffix in extra]
    if namespaces:
        data["namespaces"] = namespaces
    access: dict = {"owners": {"groups": [f"{name}-{draw(st.sampled_from(GROUPS))}"]}}
    if draw(st.booleans()):
        access["developers"] = {"groups": draw(st.lists(st.sampled_from(GROUPS), min_size=1, max_size=2, unique=True)),
                                "users": [f"dev@{name}.example.com"]}
    if draw(st.booleans()):
        access["viewers"] = {"groups": ["everyone"]}
    if draw(st.booleans()):
        access["ciServiceAccounts"] = [
            {"name": "deployer", "role": draw(st.sampled_from(["owner", "developer", "viewer"])),
             **({"namespace": draw(st.sampled_from(namespaces))} if namespaces and draw(st.booleans()) else {})}
        ]
    data["access"] = access

    allowed = draw(st.lists(st.sampled_from(classes), max_size=len(classes), unique=True))
    dedicated = []
    if free_pools and draw(st.integers(0, 3)) == 0:
        dedicated = [free_pools.pop(draw(st.integers(0, len(free_pools) - 1)))]
    gpu: dict = {}
    if allowed:
        gpu["classes"] = allowed
    if dedicated:
        gpu["dedicatedPools"] = dedicated
    if gpu:
        data["gpu"] = gpu
    usable = sorted(set(allowed) | {platform["nodePools"][p]["gpuClass"] for p in dedicated})

    quota: dict = {}
    if draw(st.booleans()):
        cpu = draw(st.integers(1, 64))
        quota["cpu"] = {"requests": str(cpu), "limits": str(cpu * draw(st.integers(1, 3)))}
    if draw(st.booleans()):
        memory = draw(st.integers(2, 512))
        quota["memory"] = {"requests": f"{memory}Gi", "limits": f"{memory * 2}Gi"}
    whole = [c for c in usable if GPU_CLASS_KINDS[c].get("sharing") != "mig" or c == "h100-mig1"]
    mig = [c for c in usable if c == "a100-mig"]
    if whole and draw(st.integers(0, 3)):
        counts = {c: draw(st.integers(0, 12)) for c in whole}
        quota["gpu"] = counts[whole[0]] if len(usable) == 1 and draw(st.booleans()) else counts
    if mig and draw(st.booleans()):
        layouts = {platform["nodePools"][p]["migLayout"] for p in platform["nodePools"]
                   if platform["nodePools"][p]["gpuClass"] == "a100-mig"}
        profiles = sorted(layout.removeprefix("all-") for layout in layouts)
        quota["mig"] = {draw(st.sampled_from(profiles)): draw(st.integers(0, 20))}
    if draw(st.booleans()):
        quota["objects"] = {"pods": draw(st.integers(0, 500)), "servicesLoadBalancers": draw(st.integers(0, 2))}
    if draw(st.integers(0, 3)) == 0:
        quota["priorityClasses"] = {draw(st.sampled_from(PRIORITY_CLASSES)): {"pods": draw(st.integers(0, 50))}}
    if draw(st.integers(0, 4)) == 0:
        quota["storage"] = {"requests": draw(quantities(1, 100, ("Gi", "Ti"))),
                            "storageClasses": {"fast": {"persistentVolumeClaims": draw(st.integers(0, 10))}}}
    if quota:
        data["quota"] = quota

    network: dict = {}
    if others and draw(st.booleans()):
        network["ingressFrom"] = {"tenants": draw(st.lists(st.sampled_from(others), min_size=1, max_size=2, unique=True))}
        if draw(st.booleans()):
            network["ingressFrom"]["ports"] = [{"port": draw(st.integers(1, 60000)), "protocol": draw(st.sampled_from(["TCP", "UDP"]))}]
    if draw(st.booleans()):
        network.setdefault("ingressFrom", {})["platform"] = draw(st.lists(st.sampled_from(["ingress", "monitoring"]), min_size=1, unique=True))
    if draw(st.booleans()):
        rule: dict = {"cidr": draw(st.sampled_from(CIDRS))}
        if draw(st.booleans()):
            start = draw(st.integers(1, 60000))
            rule["ports"] = [{"port": start, "endPort": start + draw(st.integers(0, 100))}]
        if draw(st.booleans()):
            rule["description"] = draw(free_text)
        network["egress"] = [rule]
    if network:
        data["network"] = network

    level = platform["podSecurity"]["level"]
    stricter = {"privileged": ["baseline", "restricted"], "baseline": ["restricted"], "restricted": []}[level]
    if stricter and draw(st.booleans()):
        data["podSecurity"] = draw(st.sampled_from(stricter))
    lifecycle = draw(st.sampled_from(["active", "active", "active", "suspended", "decommissioned"]))
    if lifecycle != "active":
        data["lifecycle"] = lifecycle
    if lifecycle == "decommissioned":
        data["decommission"] = {"confirm": name}
    if platform["scheduler"] != "none" and draw(st.booleans()):
        data["queue"] = {"weight": draw(st.integers(0, 5))}
        if platform["scheduler"] == "kueue" and draw(st.booleans()):
            data["queue"]["cohort"] = "shared"
    if draw(st.integers(0, 5)) == 0:
        data["vcluster"] = {"enabled": True}
    if draw(st.booleans()):
        data["environments"] = {ENV: {"quota": {"objects": {"pods": draw(st.integers(0, 100))}}}}
    return data


@st.composite
def projects(draw) -> Project:
    stack = draw(stacks())
    names = draw(st.lists(st.sampled_from(TENANT_NAMES), min_size=1, max_size=4, unique=True))
    free_pools = sorted(_platform(stack)["nodePools"])
    tenants = {}
    for name in names:
        others = [n for n in names if n != name]
        tenants[name] = draw(tenant(name, others, stack, free_pools))
    return Project(stack, tenants)


# --- mutations -------------------------------------------------------------------------------------

JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), free_text,
    st.lists(st.integers(), max_size=2), st.dictionaries(st.sampled_from(["x", "y"]), st.integers(), max_size=2),
)
BAD_QUANTITIES = ["64GB", "1,5", "4 GPUs", "-3", "1e400", ".inf", "1.2.3", "Gi", "", "0x10", "10 Gi", "½", "١٢"]


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside `value` (the root excluded)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append(prefix + (key,))
            found.extend(_paths(item, prefix + (key,)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append(prefix + (index,))
            found.extend(_paths(item, prefix + (index,)))
    return found


def _parent(data: Any, path: tuple) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


@st.composite
def mutate_data(draw, data: Any) -> Any:
    """One structural mistake somewhere in a parsed file."""
    data = copy.deepcopy(data)
    paths = _paths(data)
    if not paths:
        return draw(JUNK)
    path = draw(st.sampled_from(paths))
    parent = _parent(data, path)
    kind = draw(st.sampled_from(["type", "unknown-key", "quantity", "unicode", "delete", "rename-key"]))
    if kind == "type":
        parent[path[-1]] = draw(JUNK)
    elif kind == "unknown-key":
        target = parent if isinstance(parent, dict) else data
        target[draw(st.sampled_from(["qouta", "extra", "Name", "gpus", "nodepools"]))] = draw(JUNK)
    elif kind == "quantity":
        parent[path[-1]] = draw(st.sampled_from(BAD_QUANTITIES))
    elif kind == "unicode":
        parent[path[-1]] = draw(free_text)
    elif kind == "delete":
        del parent[path[-1]]
    elif kind == "rename-key" and isinstance(parent, dict):
        parent[draw(free_text)] = parent.pop(path[-1])
    return data


def _swap_references(project: Project, draw) -> None:
    """Point a reference at the wrong thing: another tenant's name, an unknown class or pool."""
    stem = draw(st.sampled_from(sorted(project.tenants)))
    data = project.tenants[stem]
    choice = draw(st.integers(0, 4))
    other = draw(st.sampled_from(TENANT_NAMES))
    if choice == 0:
        data["name"] = other  # file name no longer matches, or a duplicate name
    elif choice == 1:
        data.setdefault("gpu", {})["classes"] = [draw(st.sampled_from(["h100", "l4", "b200", "a100-mig", "h100-mig1"]))]
    elif choice == 2:
        pools = sorted(_platform(project.stack)["nodePools"]) + ["missing-pool"]
        data.setdefault("gpu", {})["dedicatedPools"] = [draw(st.sampled_from(pools))]
    elif choice == 3:
        data["namespaces"] = [other]  # another tenant's namespace
    else:
        pools = _platform(project.stack)["nodePools"]
        pool = draw(st.sampled_from(sorted(pools)))
        pools[pool]["gpuClass"] = draw(st.sampled_from(["h100", "l4", "a100-mig", "x100"]))


def _a_line_again(text: bytes) -> bytes:
    """The fourth line (or the last, in a shorter file) repeated at the end: usually a key again.

    An earlier damage may have emptied the file already: then there is no line to repeat.
    """
    lines = text.splitlines(keepends=True)
    return text + b"\n" + lines[min(3, len(lines) - 1)] if lines else text


TEXT_DAMAGE: list[Callable[[bytes], bytes]] = [
    lambda b: b.replace(b"  ", b"\t", 1),  # a tab in the indentation
    lambda b: b[: len(b) // 2],  # truncated mid-file
    _a_line_again,
    lambda b: b.replace(b":", b"", 1),  # a missing colon
    lambda b: b"\xff\xfe" + b,  # not UTF-8
    lambda b: b.replace(b"\n", b"\n!!python/object/apply:os.system ['true']\n", 1),
    lambda b: b"a: &x [1]\nb: *x\n" + b,
    lambda b: b"---\n" + b + b"---\n" + b,  # two documents
    lambda b: b"",  # empty
    lambda b: b"[" * 100,
    lambda b: "\ufeff".encode() + b.replace(b"\n", b"\r\n"),  # BOM and CRLF: still valid
]


@st.composite
def mutated_projects(draw) -> Project:
    project = draw(projects())
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["tenant", "tenant", "stack", "refs", "text"]))
        if target == "tenant":
            stem = draw(st.sampled_from(sorted(project.tenants)))
            project.tenants[stem] = draw(mutate_data(project.tenants[stem]))
        elif target == "stack":
            platform = _platform(project.stack)
            project.stack["config"][CONFIG_KEY] = draw(mutate_data(platform))
        elif target == "refs":
            if isinstance(project.stack, dict) and all(isinstance(t, dict) for t in project.tenants.values()):
                try:
                    _swap_references(project, draw)
                except (KeyError, TypeError, AttributeError):
                    pass  # an earlier mutation already broke the structure this one needs
        else:
            files = project.files()
            relative = draw(st.sampled_from(sorted(files)))
            project.raw[relative] = draw(st.sampled_from(TEXT_DAMAGE))(files[relative])
    return project

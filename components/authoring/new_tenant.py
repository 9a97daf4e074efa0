"""`tenants new`: a commented, valid tenant file for a new team, ready for a pull request.

The file is checked before anything is written: against the file format, and against every stack
of the project (GPU classes, capacity, LimitRange defaults), as `tenants validate` would check it.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..load import environment_from_documents, load_platform, read_tenant_documents, stack_names, validate_tenant
from ..spec.base import API_VERSION, DNS_LABEL_PATTERN
from ..spec.problems import InvalidInput, Problem, errors_only
from ..spec.sharding import assigned_shard, shard_stack_name
from ..spec.stack import CONFIG_KEY
from ..spec.yaml_source import SourceDocument, parse_yaml


def _flow(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def _requests_limits(pair: tuple[str, str] | None, default: str) -> str:
    if pair is None:
        return default
    return f"{{requests: {json.dumps(pair[0])}, limits: {json.dumps(pair[1])}}}"


def _gpu_quota(gpu: int | dict[str, int] | None) -> str:
    if gpu is None:
        return "0                          # whole GPUs; per class, e.g. {h100: 4}, when several classes are allowed"
    if isinstance(gpu, int):
        return f"{gpu}                          # whole GPUs of the one allowed class; per class, e.g. {{h100: 4}}, with several"
    return "{" + ", ".join(f"{name}: {count}" for name, count in gpu.items()) + "}   # whole GPUs per class"


_ADMISSION_COMMENT = {
    "direct": "     # pods skip the queue (online serving): its GPUs are its quota, it borrows nothing",
    "queued": "     # workloads wait in the tenant's queue for GPUs (the default)",
}


# What `tenants new` writes: every field a team edits, with a comment on what it means.
_TEMPLATE = """# yaml-language-server: $schema=../docs/schema/tenant.schema.json
# Tenant file: one per team. Edit it in a pull request; `tenants validate` checks it and the PR
# comment shows what changes on the cluster. Reference: docs/file-format.md
apiVersion: {api_version}
kind: Tenant
name: {name}                      # also the team's namespace; never rename without previousNames
displayName: {title}
costCenter: {cost_center}
contacts:{contact}
lifecycle: active                 # suspended: existing pods keep running, no new pods are admitted{expires_line}
access:
  owners:                         # manage workloads and secrets, bind developers/viewers
    groups: {owners}
  developers:                     # create and change workloads
    groups: {developers}
  viewers:                        # read-only, no secrets
    groups: {viewers}
quota:                            # what may be *declared* (admission); not a runtime limit
  cpu: {cpu}
  memory: {memory}   # container memory, never GPU memory
  gpu: {gpu}{mig_line}
  objects: {{pods: 50, services: 10, servicesLoadBalancers: 0}}
network:                          # default deny; same-namespace traffic and DNS are always allowed
  ingressFrom:
    platform: []                  # e.g. [ingress, monitoring]
    tenants: []                   # tenants whose pods may connect to ours
  egress: []                      # e.g. [{{cidr: 10.20.0.0/16, ports: [{{port: 443}}]}}]
gpu:
  classes: {classes}{pools_line}{queue_block}
environments: {{}}                 # e.g. {{dev: {{quota: {{gpu: 1}}}}}}
"""


def new_tenant_file(
    name: str,
    *,
    owner_groups: list[str],
    developer_groups: list[str] = (),
    viewer_groups: list[str] = (),
    display_name: str | None = None,
    cost_center: str = "unassigned",
    email: str | None = None,
    gpu_classes: list[str] = (),
    gpu: int | dict[str, int] | None = None,
    mig: dict[str, int] | None = None,
    cpu: tuple[str, str] | None = None,
    memory: tuple[str, str] | None = None,
    dedicated_pools: list[str] = (),
    admission: str | None = None,
    expires: str | None = None,
) -> str:
    """Text of `tenants/<name>.yaml`, checked against the file format before it is returned.

    `gpu` is a plain count (one allowed class) or a count per class; classes with a quota are
    allowed (added to `gpu.classes`). `cpu` and `memory` are (requests, limits); `dedicated_pools`
    the node pools reserved for the team, `admission` its `queue.admission`, `expires` its last day.

    >>> "name: team-x" in new_tenant_file("team-x", owner_groups=["team-x-leads"])
    True
    >>> "gpu: {h100: 4}" in new_tenant_file("team-x", owner_groups=["g"], gpu={"h100": 4})
    True
    >>> "expires: 2027-03-31" in new_tenant_file("team-x", owner_groups=["g"], expires="2027-03-31")
    True
    """
    display = f"tenants/{name}.yaml"
    name_problems = []
    if not re.fullmatch(DNS_LABEL_PATTERN, name) or len(name) > 40:
        name_problems = [Problem(display, 0, 0, "name", f"'{name}' is not a valid tenant name: use lower-case letters, digits and '-', at most 40 characters, starting and ending with a letter or digit")]
        name = "tenant"  # a stand-in, so that the other options are checked too and reported at once
    title = display_name or name.replace("-", " ").title()
    contact = f"\n  - email: {json.dumps(email)}" if email else " []"
    classes = list(dict.fromkeys([*gpu_classes, *(gpu if isinstance(gpu, dict) else {})]))
    mig_line = ""
    if mig:
        mig_line = "\n  mig: {" + ", ".join(f"{profile}: {count}" for profile, count in mig.items()) + "}   # MIG slices per profile"
    text = _TEMPLATE.format(
        api_version=API_VERSION, name=name, title=json.dumps(title), cost_center=json.dumps(cost_center), contact=contact,
        owners=_flow(owner_groups), developers=_flow(list(developer_groups)), viewers=_flow(list(viewer_groups)),
        cpu=_requests_limits(cpu, '{requests: "8", limits: "16"}'), memory=_requests_limits(memory, '{requests: 32Gi, limits: 64Gi}'),
        gpu=_gpu_quota(gpu), mig_line=mig_line, classes=_flow(classes),
        expires_line=f"\nexpires: {expires}               # last active day (UTC): after it the tenant is suspended" if expires else "",
        queue_block=f"\nqueue:\n  admission: {json.dumps(admission)}" + _ADMISSION_COMMENT.get(admission, "") if admission else "",
        pools_line=f"\n  dedicatedPools: {_flow(list(dedicated_pools))}   # node pools reserved for this team alone" if dedicated_pools else "",
    )
    try:
        validate_tenant(parse_yaml(text, display))
    except InvalidInput as err:
        raise InvalidInput([*name_problems, *err.problems]) from None
    if name_problems:
        raise InvalidInput(name_problems)
    return text


@dataclass
class StackFit:
    """How a new tenant file fits one stack of the project."""

    stack: str
    file: str
    deploys_all: bool                      # `tenants: all`: the tenant is deployed there at once
    list_line: int = 0                     # line of the `tenants:` list (stacks that list their tenants)
    list_text: str = ""                    # that line as written
    gpu_classes: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # errors the tenant would cause there
    lands_in: str = ""                     # the Pulumi stack that would hold the tenant (a shard's, if sharded)
    shard: Optional[str] = None            # its shard, None when the environment is not sharded

    def landing(self) -> str:
        """Where the tenant lands, in words.

        >>> StackFit("prod", "stacks/Pulumi.prod.yaml", True, lands_in="prod.a", shard="a").landing()
        'lands in stack prod.a (shard a)'
        >>> StackFit("dev", "stacks/Pulumi.dev.yaml", True, lands_in="dev").landing()
        'lands in stack dev (not sharded: one stack holds every tenant)'
        """
        if self.shard is None:
            return f"lands in stack {self.lands_in} (not sharded: one stack holds every tenant)"
        return f"lands in stack {self.lands_in} (shard {self.shard})"


@dataclass
class ProjectFit:
    stacks: list[StackFit]
    broken_stacks: list[Problem]           # stacks that are invalid on their own (nothing to check against)

    @property
    def all_classes(self) -> list[str]:
        return sorted({c for s in self.stacks for c in s.gpu_classes})


def _with_tenant_listed(doc: SourceDocument, name: str) -> SourceDocument:
    data = copy.deepcopy(doc.data)
    listed = data["config"][CONFIG_KEY].get("tenants")
    if isinstance(listed, list) and name not in listed:
        listed.append(name)
    return SourceDocument(doc.file, data, doc.positions, doc.origins)


def check_against_project(root: Path, name: str, text: str) -> ProjectFit:
    """Validate every stack of `root` with the new tenant file `text` added (replacing a file of the
    same name), as if each stack deployed it; return what the new file breaks in each stack.

    Errors a stack has without the new file are not the new file's: they are left out (and a stack
    that cannot be read at all is reported in `broken_stacks`).

    >>> text = new_tenant_file("team-a", owner_groups=["team-a-owners"], gpu={"h100": 1})
    >>> fit = check_against_project(root, "team-a", text)
    >>> fit.stacks[0].stack, [p.message for p in fit.stacks[0].problems][:1]
    ('dev', ["unknown GPU class 'h100' (known: a100-mig, l4)"])
    """
    new_file = f"tenants/{name}.yaml"
    new_doc = parse_yaml(text, new_file)
    existing, _ = read_tenant_documents(root)
    others = [d for d in existing if d.file not in (new_file, f"tenants/{name}.yml")]
    envs = stack_names(root)
    fits, broken = [], []
    for env in envs:
        try:
            platform, doc = load_platform(root, env)
        except InvalidInput as err:
            broken.extend(errors_only(err.problems))
            continue
        listed = platform.tenants
        fit = StackFit(env, doc.file, listed == "all", gpu_classes=sorted(platform.gpu_classes), lands_in=env)
        if platform.sharding is not None:
            fit.shard = assigned_shard(name, platform.sharding)
            fit.lands_in = shard_stack_name(env, fit.shard)
        if listed != "all":
            fit.list_line = doc.position(("config", CONFIG_KEY, "tenants"))[0]
            fit.list_text = (root / doc.file).read_text(encoding="utf-8").splitlines()[fit.list_line - 1].strip() if fit.list_line else ""
        with_new = _with_tenant_listed(doc, name)
        fit.problems = _new_errors(env, doc, with_new, others, new_doc, envs, environment_from_documents)
        fits.append(fit)
    return ProjectFit(fits, broken)


def _errors(env, platform_doc, docs, envs, build) -> list[Problem]:
    try:
        build(env, platform_doc, docs, [], known_envs=envs)
    except InvalidInput as err:
        return errors_only(err.problems)
    return []


def _new_errors(env, doc, with_new, others, new_doc, envs, build) -> list[Problem]:
    before = set(_errors(env, doc, others, envs, build))
    after = _errors(env, with_new, [*others, new_doc], envs, build)
    return [p for p in after if p not in before]

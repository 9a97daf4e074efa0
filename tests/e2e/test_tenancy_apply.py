"""The rendered objects of the example stacks against a real kube-apiserver.

* prod: every object (platform and tenants, custom resources included, their
  CRDs installed from components/data) is accepted by server-side apply with
  field manager `gpu-tenancy`, and a second apply changes nothing;
* every ValidatingAdmissionPolicy type-checks without warnings;
* the other stacks (dev, staging, ...) are accepted by a server-side dry-run
  apply over the prod cluster (same tenants: their objects would update prod's).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]

OTHER_STACKS = sorted(
    p.name[len("Pulumi."):-len(".yaml")]
    for p in (REPO_ROOT / "stacks").glob("Pulumi.*.yaml")
    if p.name != "Pulumi.prod.yaml"
)


def _oid(obj: dict) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']} {meta.get('namespace', '')}/{meta['name']}".replace(" /", " ")


def _rejections(results) -> list[str]:
    out = []
    for obj, result in results:
        if isinstance(result, ApiException):
            try:
                message = json.loads(result.body)["message"]
            except (TypeError, ValueError, KeyError):
                message = str(result)
            out.append(f"{_oid(obj)}: HTTP {result.status}: {message}")
    return out


def test_prod_every_object_accepted(prod_stack, e2e_summary):
    kinds = sorted({o["kind"] for o in prod_stack.all_objects})
    rejected = _rejections(prod_stack.results)
    e2e_summary.append(
        f"prod: {len(prod_stack.results) - len(rejected)}/{len(prod_stack.results)} rendered objects "
        f"accepted by server-side apply ({len(kinds)} kinds; CRDs installed: {len(prod_stack.crds)})"
    )
    assert not rejected, "objects the API server rejected:\n" + "\n".join(rejected)
    # Every object really exists, owned by our field manager (node patches included).
    for obj, live in prod_stack.results:
        managers = {(m["manager"], m["operation"]) for m in live["metadata"]["managedFields"]}
        assert ("gpu-tenancy", "Apply") in managers, _oid(obj)


def test_prod_custom_resources_validated_by_their_crds(apiserver, prod_stack):
    """Custom resources are applied, not skipped, and their CRD schemas really validate them."""
    crd_groups = {crd.split(".", 1)[1] for crd in prod_stack.crds}
    custom = [o for o in prod_stack.all_objects if o["apiVersion"].split("/")[0] in crd_groups]
    assert custom, "prod renders no custom resources (expected Kueue queues: scheduler kueue)"
    # Their CRD schemas are enforced: each kind rejects (422) a copy of a rendered object whose spec
    # is mistyped. (A plain dry-run create: server-side apply answers a type mismatch with a 500.)
    for kind in sorted({o["kind"] for o in custom}):
        sample = next(o for o in custom if o["kind"] == kind)
        res = apiserver.dynamic.resources.get(api_version=sample["apiVersion"], kind=kind)
        bad = {**sample, "metadata": {**sample["metadata"], "name": "e2e-mistyped"}, "spec": "not-an-object"}
        with pytest.raises(ApiException) as err:
            apiserver.dynamic.create(res, body=bad, namespace=sample["metadata"].get("namespace"), dry_run="All")
        assert err.value.status == 422 and "spec" in err.value.body, (kind, err.value.body)


def _entries(obj: dict) -> list[tuple]:
    """managedFields as comparable tuples, in server order, without timestamps."""
    return [(m["manager"], m["operation"], m.get("subresource") or "", json.dumps(m.get("fieldsV1"), sort_keys=True))
            for m in obj["metadata"]["managedFields"]]


def _content(obj: dict) -> str:
    """What an apply could change: everything but status, resourceVersion and managedFields
    timestamps/order (status belongs to controllers, which may write it at any time)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    body = {k: v for k, v in obj.items() if k != "status"}
    ours = sorted(e for e in _entries(obj) if e[0] == "gpu-tenancy")
    return json.dumps({**body, "metadata": meta, "ours": ours}, sort_keys=True)


def test_prod_reapply_changes_nothing(apiserver, prod_stack, e2e_summary):
    """A second apply of the same objects changes nothing: same content, same gpu-tenancy
    managedFields, and (but for two pinned server artifacts, retried) the same resourceVersion.

    The artifacts: a controller may write status between our GET and our apply (quota usage);
    and when another manager wrote a status subresource after our apply (the VAP type checker),
    the server re-sorts managedFields on our next apply and stores that once. Either way the
    content is unchanged and the next attempt must be a complete no-op.
    """
    changed, retried, total = [], [], 0
    for obj, first in prod_stack.results:
        if isinstance(first, ApiException):
            continue
        total += 1
        for attempt in range(3):
            before = apiserver.get_object(obj)
            [(_, after)] = apiserver.apply_rendered([obj])
            assert not isinstance(after, ApiException), f"{_oid(obj)}: re-apply rejected: {after}"
            rv_before, rv_after = before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"]
            if _content(after) != _content(before):
                changed.append(f"{_oid(obj)}: content or our managedFields changed ({rv_before} -> {rv_after})")
                break
            if rv_after == rv_before:
                break
            if attempt == 0:
                retried.append(_oid(obj))
        else:
            changed.append(f"{_oid(obj)}: every apply writes a new resourceVersion")
    e2e_summary.append(f"prod re-apply: {total - len(changed)}/{total} objects unchanged "
                       f"({len(retried)} needed a second look: {', '.join(retried) or '-'})")
    assert not changed, "re-applying changed:\n" + "\n".join(changed)


def test_prod_placement_policies_type_check_clean(apiserver, prod_stack):
    """The server type-checks every CEL expression against the Pod schema: no warnings."""
    adm = client.AdmissionregistrationV1Api(apiserver.api_client)
    vaps = prod_stack.of_kind("ValidatingAdmissionPolicy")
    assert vaps
    for vap in vaps:
        status = adm.read_validating_admission_policy(vap["metadata"]["name"]).status
        warnings = (status.type_checking.expression_warnings or []) if status.type_checking else []
        assert not warnings, "\n".join(f"{vap['metadata']['name']} {w.field_ref}: {w.warning}" for w in warnings)


@pytest.mark.parametrize("stack", OTHER_STACKS)
def test_other_stack_accepted_by_dry_run(apiserver, prod_stack, stack, e2e_summary):
    """The dev/staging objects pass validation too (server-side dry-run over prod's objects)."""
    _, objects = prod_stack.render(stack)
    results = apiserver.apply_rendered([o for objs in objects.values() for o in objs], dry_run=True)
    rejected = _rejections(results)
    e2e_summary.append(f"{stack}: {len(results) - len(rejected)}/{len(results)} rendered objects "
                       "accepted by server-side dry-run apply")
    assert not rejected, f"{stack} objects the API server rejected:\n" + "\n".join(rejected)

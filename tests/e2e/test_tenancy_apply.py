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
    # Their CRD schemas are enforced: each kind rejects a rendered object whose spec is mistyped.
    for kind in sorted({o["kind"] for o in custom}):
        sample = next(o for o in custom if o["kind"] == kind)
        [(_, result)] = apiserver.apply_objects([{**sample, "spec": "not-an-object"}], dry_run=True)
        assert isinstance(result, ApiException) and result.status == 422, (kind, result)


def _entries(obj: dict) -> list[tuple]:
    """managedFields as comparable tuples, in server order, without timestamps."""
    return [(m["manager"], m["operation"], m.get("subresource") or "", json.dumps(m.get("fieldsV1"), sort_keys=True))
            for m in obj["metadata"]["managedFields"]]


def _content(obj: dict) -> str:
    """The object without resourceVersion and managedFields timestamps/order."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return json.dumps({**obj, "metadata": meta, "managedFields": sorted(_entries(obj))}, sort_keys=True)


def test_prod_reapply_changes_nothing(apiserver, prod_stack, e2e_summary):
    """A second apply of the same objects changes nothing: same content, same managedFields.

    One API-server artifact is tolerated and pinned: when another manager wrote a
    status subresource after our apply (the VAP type checker), the server re-sorts
    managedFields on our next apply and stores that (a new resourceVersion, same
    content, same entries). The third apply must then be a complete no-op.
    """
    changed, reordered, total = [], [], 0
    for obj, first in prod_stack.results:
        if isinstance(first, ApiException):
            continue
        total += 1
        before = apiserver.get_object(obj)
        [(_, after)] = apiserver.apply_rendered([obj])
        assert not isinstance(after, ApiException), f"{_oid(obj)}: re-apply rejected: {after}"
        rv_before, rv_after = before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"]
        if _content(after) != _content(before):
            changed.append(f"{_oid(obj)}: content or managedFields changed (resourceVersion {rv_before} -> {rv_after})")
        elif rv_after != rv_before:
            if _entries(after) == _entries(before):
                changed.append(f"{_oid(obj)}: resourceVersion {rv_before} -> {rv_after} with nothing changed")
                continue
            reordered.append(_oid(obj))
            [(_, third)] = apiserver.apply_rendered([obj])
            if third["metadata"]["resourceVersion"] != rv_after:
                changed.append(f"{_oid(obj)}: third apply still writes ({rv_after} -> {third['metadata']['resourceVersion']})")
    e2e_summary.append(f"prod re-apply: {total - len(changed)}/{total} objects unchanged "
                       f"({len(reordered)} with managedFields re-sorted once after a status writer: {', '.join(reordered) or '-'})")
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

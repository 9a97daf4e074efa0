"""The size limits `tenants validate` checks (components/review/object_limits.py), on a real
kube-apiserver: a tenant's image policy whose longest CEL expression is exactly the CEL parser's
limit (100,000 code points) is stored; one registry more and the server refuses it (422, "expression
code point size exceeds limit"), as `up` would be refused, while validate reports it first at the
tenant's registry list."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes.client.rest import ApiException

from components.load import load_environment
from components.manifests.build import tenant_objects
from components.review.object_limits import CEL_EXPRESSION_CODE_POINTS, longest_expression, object_size_problems
from tests.project_edits import example_with_registry_tenant

pytestmark = pytest.mark.e2e



def _image_policy(tmp_path: Path, registries: int):
    root = example_with_registry_tenant(tmp_path / f"project-{registries}", registries)
    environment = load_environment(root, "prod")
    tenant = next(t for t in environment.tenants if t.name == "sizelab")
    policy = next(o for o in tenant_objects(tenant.spec, environment.view(tenant.spec)) if o["kind"] == "ValidatingAdmissionPolicy")
    return environment, policy


def test_an_expression_at_the_cel_limit_is_stored_and_one_code_point_group_more_is_refused(apiserver, tmp_path):
    # Each registry adds the same number of code points: the count at the limit, worked out from two.
    first, second = (longest_expression(_image_policy(tmp_path, n)[1])[0] for n in (1000, 1001))
    most = 1000 + (CEL_EXPRESSION_CODE_POINTS - first) // (second - first)

    environment, at_limit = _image_policy(tmp_path, most)
    assert CEL_EXPRESSION_CODE_POINTS - (second - first) < longest_expression(at_limit)[0] <= CEL_EXPRESSION_CODE_POINTS
    assert object_size_problems(environment) == []
    apiserver.apply(at_limit)
    assert apiserver.get_object(at_limit)["metadata"]["name"] == at_limit["metadata"]["name"]

    environment, over = _image_policy(tmp_path, most + 1)
    assert longest_expression(over)[0] > CEL_EXPRESSION_CODE_POINTS
    [problem] = object_size_problems(environment)
    assert problem.field == "images.registries" and "CEL parser takes at most 100,000" in problem.message
    over["metadata"]["name"] += "-over"
    with pytest.raises(ApiException) as refused:
        apiserver.apply(over)
    assert refused.value.status == 422 and "expression code point size exceeds limit" in str(refused.value.body)

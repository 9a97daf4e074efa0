"""API Priority and Fairness on the real kube-apiserver (components/manifests/api_fairness.py, issue #39 item 5).

The example prod stack is applied with its FlowSchemas and the tenants' priority level. The API
server says how it classified each request in the `X-Kubernetes-PF-FlowSchema-UID` and
`X-Kubernetes-PF-PriorityLevel-UID` response headers (on refusals too: classification comes before
authorization). Asserted: a tenant developer's and CI account's writes go to the tenants' level by the
tenant-writes schema, and so do a neighbour tenant's; their reads stay in `global-default`; Kueue's
ServiceAccount and the platform admin group keep `workload-low` through the platform schema; and a
flood of one tenant's writes is dispatched in the tenants' level (the API server's own
`apiserver_flowcontrol_dispatched_requests_total`), while the neighbour's writes are still admitted.
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from components.manifests.api_fairness import PLATFORM_FLOW, PLATFORM_LEVEL, TENANT_FLOW, TENANT_LEVEL

pytestmark = pytest.mark.e2e

FLOOD = 60


def _names(apiserver) -> dict[str, str]:
    """uid -> name of every FlowSchema and priority level."""
    api = client.FlowcontrolApiserverV1Api(apiserver.api_client)
    items = [*api.list_flow_schema().items, *api.list_priority_level_configuration().items]
    return {o.metadata.uid: o.metadata.name for o in items}


def _developer(stack, tenant: str) -> tuple[str, list[str]]:
    spec = next(t.spec for t in stack.environment.tenants if t.name == tenant)
    return f"dev@{tenant}.example.com", [spec.access.developers.groups[0]]


def _config_map() -> dict:
    return {"metadata": {"name": f"apf-{uuid.uuid4().hex[:8]}"}, "data": {"k": "v"}}


def classified(apiserver, user: str, groups: list[str], namespace: str, write: bool = True) -> tuple[str, str]:
    """(FlowSchema, priority level) the API server put the request of (user, groups) in."""
    core = client.CoreV1Api(apiserver.client_for(user, groups))
    try:
        if write:
            _, _, headers = core.create_namespaced_config_map_with_http_info(namespace, _config_map(), dry_run="All")
        else:
            _, _, headers = core.list_namespaced_config_map_with_http_info(namespace, limit=1)
    except ApiException as exc:   # refused by RBAC: classified all the same
        headers = exc.headers
    names = _names(apiserver)
    return names[headers["X-Kubernetes-PF-FlowSchema-UID"]], names[headers["X-Kubernetes-PF-PriorityLevel-UID"]]


def dispatched(apiserver, flow_schema: str, level: str) -> float:
    """The API server's count of requests dispatched by `flow_schema` into `level` so far."""
    api = apiserver.api_client
    text = api.call_api("GET", f"{api.configuration.host}/metrics").read().decode()
    pattern = re.compile(r'^apiserver_flowcontrol_dispatched_requests_total\{([^}]*)\} ([0-9.e+]+)$', re.M)
    return sum(float(value) for labels, value in pattern.findall(text)
               if f'flow_schema="{flow_schema}"' in labels and f'priority_level="{level}"' in labels)


def test_a_tenant_developers_writes_go_to_the_tenants_level(apiserver, prod_stack):
    user, groups = _developer(prod_stack, "eval")
    assert classified(apiserver, user, groups, "eval") == (TENANT_FLOW, TENANT_LEVEL)


def test_a_tenant_ci_account_and_a_neighbour_go_there_too(apiserver, prod_stack):
    spec = next(t.spec for t in prod_stack.environment.tenants if t.name == "inference")
    account = spec.access.ci_service_accounts[0]
    namespace = account.namespace or "inference"
    sa = f"system:serviceaccount:{namespace}:{account.name}"
    assert classified(apiserver, sa, ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"], namespace) \
        == (TENANT_FLOW, TENANT_LEVEL)
    user, groups = _developer(prod_stack, "llm-finetune")
    assert classified(apiserver, user, groups, "llm-finetune") == (TENANT_FLOW, TENANT_LEVEL)


def test_reads_stay_where_they_were(apiserver, prod_stack):
    user, groups = _developer(prod_stack, "eval")
    assert classified(apiserver, user, groups, "eval", write=False) == ("global-default", "global-default")


def test_the_platforms_clients_keep_their_level(apiserver, prod_stack):
    platform = prod_stack.environment.platform
    kueue = platform.queues.kueue.namespace
    controller = (f"system:serviceaccount:{kueue}:kueue-controller-manager",
                  ["system:serviceaccounts", f"system:serviceaccounts:{kueue}"])
    assert classified(apiserver, *controller, "eval") == (PLATFORM_FLOW, PLATFORM_LEVEL)
    assert classified(apiserver, "admin@platform.example.com", [platform.platform_admin_group], "eval") \
        == (PLATFORM_FLOW, PLATFORM_LEVEL)


def test_one_tenants_flood_is_dispatched_in_the_tenants_level_and_the_neighbour_still_writes(apiserver, prod_stack):
    before = dispatched(apiserver, TENANT_FLOW, TENANT_LEVEL), dispatched(apiserver, PLATFORM_FLOW, PLATFORM_LEVEL)
    user, groups = _developer(prod_stack, "eval")
    core = client.CoreV1Api(apiserver.client_for(user, groups))
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda _: core.create_namespaced_config_map("eval", _config_map(), dry_run="All"), range(FLOOD)))
        neighbour = client.CoreV1Api(apiserver.client_for(*_developer(prod_stack, "inference")))
        neighbour.create_namespaced_config_map("inference", _config_map(), dry_run="All")
    after = dispatched(apiserver, TENANT_FLOW, TENANT_LEVEL), dispatched(apiserver, PLATFORM_FLOW, PLATFORM_LEVEL)
    assert after[0] - before[0] >= FLOOD + 1, (before, after)
    # The metric reads above are the admin's (system:masters: exempt), so nothing here reached the platform's schema.
    assert after[1] == before[1], (before, after)

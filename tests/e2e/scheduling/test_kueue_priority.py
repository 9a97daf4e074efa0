"""A tenant's Job at a PriorityClass it is not granted, on a real Kueue (issue 22, step 5).

Kueue copies the priority of a Job's pod template into the Workload it creates, and admits
Workloads by priority: a Job naming `system-node-critical` would be admitted ahead of every
tenant's, although its pods are refused later by the guard. The guard policy refuses the Workload
itself (created by the Kueue controller, in the tenant's namespace), so the Job never gets one;
a Job at a granted class gets its Workload at that class's priority.
"""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.scheduling.jobs import KUEUE, Jobs, job, wait_or_explain

pytestmark = [pytest.mark.e2e, pytest.mark.scheduling]

LF = "llm-finetune"
REFUSAL = "Kueue Workload priority 2000001000 is above what tenant llm-finetune may use"


@pytest.fixture(scope="module")
def guard_in_effect(kueue_stack):
    """Policies take a moment to reach the admission plugin: until a Workload at system-node-critical's
    priority is refused in llm-finetune (dry-run, as admin: nobody is exempt), Kueue could slip one in."""
    cp = kueue_stack.plane.cp
    res = cp.dynamic.resources.get(api_version="/".join(KUEUE), kind="Workload")
    probe = {"apiVersion": "/".join(KUEUE), "kind": "Workload", "metadata": {"name": "e2e-priority-probe"},
             "spec": {"queueName": "default", "priority": 2000001000, "podSets": [
                 {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "registry.invalid/x:1"}]}}}]}}

    def refused() -> bool:
        try:
            cp.dynamic.create(res, body=probe, namespace=LF, query_params=[("dryRun", "All")])
        except ApiException as exc:
            return exc.status == 403 and REFUSAL in str(exc.body)
        return False

    cp.wait_for(refused, timeout=30, what="the guard policy to refuse Workloads above llm-finetune's priorities")


@pytest.fixture
def jobs(kueue_stack, guard_in_effect):
    j = Jobs(kueue_stack)
    yield j
    j.cleanup()


def submit_as_developer(kueue_stack, jobs, priority_class: str) -> str:
    """Create the Job as a developer of llm-finetune (impersonated), as the attack would."""
    cp = kueue_stack.plane.cp
    group = kueue_stack.tenant(LF).access.developers.groups[0]
    body = job({})
    body["spec"]["template"]["spec"]["priorityClassName"] = priority_class
    jobs.quota_used_before.setdefault(LF, cp.quota_used(LF))   # as Jobs.submit: cleanup waits for the usage to return
    client.BatchV1Api(cp.client_for(f"e2e-developer@{LF}", (group,))).create_namespaced_job(LF, body)
    jobs.created.append((LF, body["metadata"]["name"]))
    return body["metadata"]["name"]


def test_a_job_at_a_class_the_tenant_lacks_never_gets_a_workload(kueue_stack, jobs):
    cp = kueue_stack.plane.cp
    name = submit_as_developer(kueue_stack, jobs, "system-node-critical")   # RBAC and admission accept the Job
    log = cp.log_dir / "kueue.log"

    def refused() -> bool:
        text = log.read_text(errors="replace")
        return any(REFUSAL in line and name in line for line in text.splitlines())

    wait_or_explain(cp, refused, f"Kueue's Workload for {name} to be refused by the guard policy",
                    lambda: f"workload: {jobs.workload(LF, name)}", timeout=60)
    assert jobs.workload(LF, name) is None


def test_a_job_at_a_granted_class_gets_its_workload_at_that_priority(kueue_stack, jobs):
    cp = kueue_stack.plane.cp
    name = submit_as_developer(kueue_stack, jobs, "training")
    wl = cp.wait_for(lambda: jobs.workload(LF, name), timeout=60, what=f"the Workload of {name}")
    assert wl["spec"]["priority"] == kueue_stack.find("PriorityClass", "training")["value"]

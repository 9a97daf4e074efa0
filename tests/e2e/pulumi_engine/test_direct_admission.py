"""A queue-less tenant on the real engine (#41): on a Kueue stack (tests/fixtures/direct-admission),
`chat` (`queue.admission: direct`, online inference) is renamed to `chat-v2` as docs/renaming.md
says, then decommissioned and removed as docs/offboarding.md says, beside `batch`, a queued tenant
in a cohort. One cluster for the module, tests in file order.

Every version of every ClusterQueue and LocalQueue the API server held, from before the first
`pulumi up` to the end, is read back from its watch: none was ever chat's under either name, and
batch's ClusterQueue was created once and never written again. Each preview lists what
`tenants diff` says (created and deleted objects), and neither warns about a queue chat never had.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.object_watch import ObjectWatch
from tests.project_edits import replace_once
from tools.engine import engine_changes, offline_changes

pytestmark = pytest.mark.pulumi

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "direct-admission"
STACK = "serve"
OLD, NEW, NEIGHBOUR = "chat", "chat-v2", "batch"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
QUEUE_KINDS = ("clusterqueues", "localqueues")


@pytest.fixture(scope="module")
def serve(scenario_factory):
    s = scenario_factory(STACK, fixture=FIXTURE)
    custom = client.CustomObjectsApi(s.api)
    s.watches = {}
    for plural in QUEUE_KINDS:   # from before anything is applied: every version the API server holds
        listed = custom.list_cluster_custom_object(*KUEUE, plural)
        s.watches[plural] = ObjectWatch(custom.list_cluster_custom_object, *KUEUE, plural,
                                        resource_version=listed["metadata"]["resourceVersion"])
        s.watches[plural].start()
    yield s
    for watcher in s.watches.values():
        if watcher.is_alive():
            watcher.stop()


def _queues(s, plural: str) -> set[tuple[str, str]]:
    items = client.CustomObjectsApi(s.api).list_cluster_custom_object(*KUEUE, plural)["items"]
    return {(item["metadata"].get("namespace", ""), item["metadata"]["name"]) for item in items}


def _snapshot(s, dest: Path) -> Path:
    for part in ("stacks", "tenants"):
        shutil.copytree(s.project / part, dest / part)
    return dest


def _kueue_steps(outcome) -> list[tuple[str, str]]:
    return [(step.op, step.name) for step in outcome.steps
            if step.type.startswith(f"kubernetes:{KUEUE[0]}") and step.op not in ("same", "read")]


def _preview_says_what_the_diff_says(s, base: Path, renamed: bool = False):
    """The engine's preview against `tenants diff` from `base`: the same objects created and deleted,
    no Kueue queue touched, and no warning naming a ClusterQueue or evicted work. The diff names a
    renamed tenant's deleted objects under its new name, the engine's state under the old one."""
    preview = s.engine.preview()
    offline, engine = offline_changes(base, s.project, STACK), engine_changes(preview)
    assert engine["create"] == set(offline["create"]), engine["create"] ^ set(offline["create"])
    deleted = {OLD + n[len(NEW):] if renamed and n.startswith(f"{NEW}-") else n for n in offline["delete"]}
    assert engine["delete"] == deleted, engine["delete"] ^ deleted
    assert _kueue_steps(preview) == [], _kueue_steps(preview)
    warnings = preview.messages("warning")
    assert not [m for m in warnings if "ClusterQueue" in m or "evict" in m], warnings
    return preview


def test_the_first_up_creates_the_neighbours_queues_only(serve):
    serve.engine.up()
    assert _queues(serve, "clusterqueues") == {("", NEIGHBOUR)}
    assert _queues(serve, "localqueues") == {(NEIGHBOUR, "default")}
    client.CoreV1Api(serve.api).read_namespace(OLD)   # the direct tenant is deployed, without queues


def test_renaming_the_direct_tenant_creates_no_queue(serve, tmp_path):
    """docs/renaming.md step 1: the new file lists the old name and keeps the running namespace."""
    base = _snapshot(serve, tmp_path / "base")
    old = serve.tenant_file(OLD)
    text = old.read_text()
    assert text.count(f"name: {OLD}\n") == 1
    serve.tenant_file(NEW).write_text(text.replace(
        f"name: {OLD}\n", f"name: {NEW}\npreviousNames: [{OLD}]\nnamespaces: [{OLD}]\n"))
    old.unlink()
    preview = _preview_says_what_the_diff_says(serve, base, renamed=True)
    renamed = [m for m in preview.messages("warning") if m.strip().startswith(f"tenant {OLD} is renamed to {NEW}")]
    assert renamed, preview.messages("warning")
    up = serve.engine.up()
    assert _kueue_steps(up) == [] and up.changes, (_kueue_steps(up), up.changes)
    core = client.CoreV1Api(serve.api)
    core.read_namespace(NEW)
    assert core.list_namespaced_resource_quota(OLD).items, "the running namespace keeps its budget"
    assert _queues(serve, "clusterqueues") == {("", NEIGHBOUR)}


def test_decommissioning_the_direct_tenant_creates_no_queue(serve, tmp_path):
    """docs/offboarding.md step 2: nothing to stop, so no stopped ClusterQueue is created."""
    base = _snapshot(serve, tmp_path / "base")
    replace_once(serve.tenant_file(NEW), "kind: Tenant\n",
                 f"kind: Tenant\nlifecycle: decommissioned\ndecommission: {{confirm: {NEW}}}\n")
    _preview_says_what_the_diff_says(serve, base)
    up = serve.engine.up()
    assert _kueue_steps(up) == [] and up.changes, (_kueue_steps(up), up.changes)
    assert _queues(serve, "clusterqueues") == {("", NEIGHBOUR)}


def test_removing_the_decommissioned_tenant_deletes_it_and_no_queue(serve, tmp_path):
    """docs/offboarding.md step 3: its namespaces go; the neighbour's queues stay."""
    base = _snapshot(serve, tmp_path / "base")
    serve.tenant_file(NEW).unlink()
    _preview_says_what_the_diff_says(serve, base)
    up = serve.engine.up()
    assert _kueue_steps(up) == [] and up.ops("delete"), _kueue_steps(up)
    core = client.CoreV1Api(serve.api)

    def gone(namespace: str) -> bool:
        try:
            core.read_namespace(namespace)
        except ApiException as err:
            if err.status == 404:
                return True
            raise
        return False

    serve.cluster.cp.wait_for(lambda: gone(OLD) and gone(NEW), timeout=60, what=f"namespaces {OLD}, {NEW} deleted")
    assert _queues(serve, "clusterqueues") == {("", NEIGHBOUR)}
    assert _queues(serve, "localqueues") == {(NEIGHBOUR, "default")}


def test_no_queue_of_the_direct_tenant_ever_existed_and_the_neighbours_never_changed(serve):
    events = {plural: serve.watches[plural].stop() for plural in QUEUE_KINDS}
    seen = {plural: [(kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) for kind, obj in got]
            for plural, got in events.items()}
    # One creation each, nothing after it: no queue of chat under either name, in any namespace of it,
    # and batch's ClusterQueue and LocalQueue never written again (no update, no replacement).
    assert seen == {"clusterqueues": [("ADDED", "", NEIGHBOUR)], "localqueues": [("ADDED", NEIGHBOUR, "default")]}, seen

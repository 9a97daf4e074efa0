"""bench/pulumi_engine.py's sharded measurement, small, on the real engine: so that `make
bench-pulumi` does not rot between the runs docs/performance.md reports. It asserts what the
benchmark relies on (each shard stack holds its tenants, a one-tenant change previews only its
shard and changes only that tenant's quota objects), never how long anything took."""

from __future__ import annotations

import pytest

from bench.pulumi_engine import changed_tenant, measure_fleet, measure_sharded

pytestmark = pytest.mark.pulumi

COUNT, SHARD_SIZE = 4, 2  # two shards: one previewed, the platform stack and the other one not


def test_a_one_tenant_change_previews_only_its_shard(tmp_path, e2e_summary):
    log: list[str] = []
    result = measure_sharded(tmp_path, COUNT, SHARD_SIZE, log.append)
    e2e_summary.extend(f"bench smoke:{line}" for line in log)

    assert result["stacks"] == ["bench", "bench.s01", "bench.s02"]
    assert sum(result["shard_sizes"]) == COUNT
    ups = {r["stack"]: r for r in result["up"]}
    assert all(set(r["summary"]) == {"create"} for r in ups.values()), {s: r["summary"] for s, r in ups.items()}
    assert ups["bench"]["kubernetes_resources"] > 0
    assert ups["bench"]["tenant_components"] == []
    for stack, tenants in result["shard_tenants"].items():
        assert ups[stack]["tenant_components"] == sorted(tenants), stack

    tenant = changed_tenant(COUNT)
    assert result["changed_tenant"] == tenant
    assert len(result["previewed"]) == 1 and result["not_previewed"] == 2
    (preview,) = result["preview_one"]
    assert preview["stack"] == result["previewed"][0]
    assert preview["changes"] == {"update": 2}, preview["changed_steps"]
    assert sorted(preview["changed_steps"]) == [
        f"update ClusterQueue {tenant}-clusterqueue-{tenant}",
        f"update ResourceQuota {tenant}-resourcequota-{tenant}-tenant-quota",
    ]
    assert preview["tree_peak_mb"] >= preview["self_maxrss_mb"] > 0


def test_the_fleet_table_deploys_every_stack_with_each_worker_count_and_previews_one_shard(tmp_path, e2e_summary):
    log: list[str] = []
    result = measure_fleet(tmp_path, COUNT, SHARD_SIZE, [1, 2], log.append)
    e2e_summary.extend(f"bench fleet smoke:{line}" for line in log)

    assert result["stacks"] == ["bench", "bench.s01", "bench.s02"]
    assert sorted(result["deploys"]) == ["1", "2"]
    for workers, deploy in result["deploys"].items():
        assert deploy["failed"] == [], (workers, deploy["stacks"])
        assert [s["stack"] for s in deploy["stacks"]] == result["stacks"]
        assert all(set(s["summary"]) == {"create"} for s in deploy["stacks"]), workers
        assert deploy["resources"] == sum(s["resources"] for s in deploy["stacks"]) > 0
        assert deploy["wall_seconds"] > 0 and deploy["largest_tree_peak_mb"] > 0
    # each worker count deployed the same fleet on its own control plane
    assert result["deploys"]["1"]["resources"] == result["deploys"]["2"]["resources"]
    # the preview ran after the last deploy, on the one shard the offline diff named
    assert len(result["previewed"]) == 1 and result["not_previewed"] == 2
    assert result["preview_one"][0]["changes"] == {"update": 2}
    # ... once the control plane had settled, with what the control plane and the engine used meanwhile
    assert result["settled"], result["settle_seconds"]
    assert set(result["preview_one"][0]["control_plane_cpu_seconds"]) == {"etcd", "kube-apiserver", "kube-controller-manager"}
    assert result["preview_one"][0]["tree_cpu_seconds"].get("pulumi", 0) > 0, result["preview_one"][0]["tree_cpu_seconds"]
    for deploy in result["deploys"].values():
        assert deploy["control_plane_cpu_seconds"]["kube-apiserver"] > 0

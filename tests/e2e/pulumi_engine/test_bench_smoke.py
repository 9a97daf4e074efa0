"""bench/pulumi_engine.py's sharded measurement, small, on the real engine: so that `make
bench-pulumi` does not rot between the runs docs/performance.md reports. It asserts what the
benchmark relies on (each shard stack holds its tenants, a one-tenant change previews only its
shard and changes only that tenant's quota objects), never how long anything took."""

from __future__ import annotations

import pytest

from bench.pulumi_engine import changed_tenant, measure_sharded

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

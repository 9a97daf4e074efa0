"""The split of quotas over pools as first computed: Edmonds-Karp, every search from every tenant.

`components.fleet.feasibility.max_flow` must keep returning exactly this flow. The flow becomes
each tenant's per-pool quota (Kueue ClusterQueue flavors): a different but equally valid split
would update deployed objects of tenants nobody edited. This is the plain version, quadratic in the
number of tenants, kept as the oracle of the fast one.
"""

from __future__ import annotations

from collections import deque
from typing import Mapping


def reference_max_flow(demand: Mapping[str, int], edges: Mapping[str, list[str]],
                       limit: Mapping[str, int]) -> tuple[dict[str, dict[str, int]], set[str]]:
    """(tenant -> pool -> flow, tenants reachable from the source when no augmenting path is left).

    >>> reference_max_flow({"a": 3, "b": 2}, {"a": ["p"], "b": ["p", "q"]}, {"p": 3, "q": 1})[0]
    {'a': {'p': 3}, 'b': {'q': 1}}
    """
    tenants = sorted(demand)
    flow: dict[str, dict[str, int]] = {t: {} for t in tenants}
    sent = {t: 0 for t in tenants}
    used = {p: 0 for p in limit}
    while True:
        parent: dict = {}
        queue: deque = deque()
        reached: set[str] = set()
        for t in tenants:   # every tenant with demand left is a root, in order
            if sent[t] < demand[t]:
                parent[("t", t)] = None
                reached.add(t)
                queue.append(("t", t))
        end = None
        while queue and end is None:
            kind, node = queue.popleft()
            if kind == "t":
                for p in sorted(edges.get(node, [])):
                    if ("p", p) not in parent:
                        parent[("p", p)] = ("t", node)
                        if used[p] < limit[p]:
                            end = ("p", p)
                            break
                        queue.append(("p", p))
            else:
                for t in tenants:
                    if flow[t].get(node, 0) > 0 and ("t", t) not in parent:
                        parent[("t", t)] = ("p", node)
                        reached.add(t)
                        queue.append(("t", t))
        if end is None:
            return {t: dict(sorted((p, f) for p, f in flow[t].items() if f)) for t in tenants}, reached
        path = []
        while end is not None:
            path.append(end)
            end = parent[end]
        path.reverse()
        start, last = path[0][1], path[-1][1]
        amount = min(demand[start] - sent[start], limit[last] - used[last],
                     *(flow[path[i][1]][path[i - 1][1]] for i in range(2, len(path), 2)))
        sent[start] += amount
        used[last] += amount
        for (kind, a), (_, b) in zip(path, path[1:]):
            if kind == "t":
                flow[a][b] = flow[a].get(b, 0) + amount
            else:
                flow[b][a] -= amount

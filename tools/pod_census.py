"""Counting a namespace's pods at every resource version, and deleting some as they come: the two
halves of a quota race (tests/e2e/test_quota_race.py, bench/quota_race.py).

A watch delivers events in resource-version order, so the pods it has seen ADDED and not DELETED are
exactly those that existed at that version: a peak above a quota's `hard` is an over-admission that
really happened, however briefly.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from kubernetes import watch
from kubernetes.client.rest import ApiException
from urllib3.exceptions import ProtocolError


class PodCensus:
    """Peaks of a namespace's pods, in all (`peak["pods"]`) and per `group(pod)` for the `groups` named.

    >>> from types import SimpleNamespace as ns
    >>> pod = lambda name, klass: ns(metadata=ns(name=name), spec=ns(priority_class_name=klass))
    >>> census = PodCensus.__new__(PodCensus)
    >>> census.live, census.peak, census.groups, census._group = {}, {"pods": 0, "x": 0}, ("x",), (lambda p: p.spec.priority_class_name)
    >>> census.count([{"type": "ADDED", "object": pod("a", "x")}, {"type": "ADDED", "object": pod("b", "y")},
    ...               {"type": "DELETED", "object": pod("a", "x")}]); census.peak
    {'pods': 2, 'x': 1}
    """

    def __init__(self, api: Any, namespace: str, seconds: float, groups: tuple[str, ...] = (),
                 group: Callable[[Any], str] = lambda pod: pod.spec.priority_class_name) -> None:
        self.live: dict[str, str] = {}
        self.peak: dict[str, int] = {"pods": 0, **{g: 0 for g in groups}}
        self.groups, self._group = groups, group
        start = api.list_namespaced_pod(namespace).metadata.resource_version
        self._thread = threading.Thread(target=self._follow, args=(api, namespace, start, seconds), daemon=True)
        self._thread.start()

    def _follow(self, api: Any, namespace: str, start: str, seconds: float) -> None:
        stream = watch.Watch().stream(api.list_namespaced_pod, namespace, resource_version=start,
                                      timeout_seconds=int(seconds))
        try:
            self.count(stream)
        except ProtocolError:   # the server ends the watch when the namespace goes: the count is complete
            pass

    def count(self, events) -> None:
        for event in events:
            name = event["object"].metadata.name
            if event["type"] == "ADDED":
                self.live[name] = self._group(event["object"])
            elif event["type"] == "DELETED":
                self.live.pop(name, None)
            groups = list(self.live.values())
            for key, count in (("pods", len(groups)), *((g, groups.count(g)) for g in self.groups)):
                self.peak[key] = max(self.peak[key], count)

    def join(self) -> None:
        self._thread.join()


def reap(api: Any, namespace: str, selector: str, stop: threading.Event, worker: int, workers: int = 2) -> None:
    """Delete the pods `selector` matches as they appear (this worker's share, one at a time) until
    told to stop, so the quota controller replenishes while admissions charge."""
    while not stop.is_set():
        for item in api.list_namespaced_pod(namespace, label_selector=selector).items[worker::workers][:1]:
            try:
                api.delete_namespaced_pod(item.metadata.name, namespace, grace_period_seconds=0)
            except ApiException:
                pass
        time.sleep(0.05)


"""Every version of the objects one list call returns, read back from the API server's watch while
something else (the engine) changes them: short watches one after the other, each resuming where
the last one ended, so none is lost (tests/e2e/pulumi_engine/test_node_taints.py, the Nodes;
test_direct_admission.py, the Kueue queues).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from kubernetes import watch


class ObjectWatch(threading.Thread):
    """Each event `list_call(*args)` streams from `resource_version` on, until `stop`, as
    (type, the object as the API server sent it)."""

    def __init__(self, list_call: Callable[..., Any], *args: str, resource_version: str) -> None:
        super().__init__(daemon=True)
        self.list_call, self.args, self.resource_version = list_call, args, resource_version
        self.events: list[tuple[str, dict]] = []
        self.error: BaseException | None = None
        self._done = threading.Event()

    def run(self) -> None:
        try:
            while not self._done.is_set():
                for event in watch.Watch().stream(self.list_call, *self.args, resource_version=self.resource_version,
                                                  timeout_seconds=2):
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch of {self.list_call.__name__}{self.args} failed: {event['raw_object']}")
                    self.events.append((event["type"], event["raw_object"]))
                    self.resource_version = event["raw_object"]["metadata"]["resourceVersion"]
        except BaseException as exc:   # reported by stop()
            self.error = exc

    def stop(self) -> list[tuple[str, dict]]:
        self._done.set()
        self.join(timeout=30)
        if self.error is not None:
            raise self.error
        return self.events

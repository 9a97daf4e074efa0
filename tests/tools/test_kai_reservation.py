"""The stand-in for KAI's GPU reservation pod: which GPU it publishes, and that it publishes only for
Running pods, one GPU per reservation pod of a node."""

from __future__ import annotations

from types import SimpleNamespace as ns

from tools.kai_reservation import GPU_INDEX_ANNOTATION, ReservationStandIn, device_uuid, free_device


class FakeCore:
    """The few CoreV1Api calls the stand-in makes, over an in-memory list of pods."""

    def __init__(self, pods, gpus):
        self.items, self.gpus, self.patches = pods, gpus, []

    def list_namespaced_pod(self, namespace):
        return ns(items=self.items)

    def read_node(self, name):
        return ns(status=ns(allocatable={"nvidia.com/gpu": str(self.gpus[name])}))

    def patch_namespaced_pod(self, name, namespace, body):
        self.patches.append((name, body["metadata"]["annotations"][GPU_INDEX_ANNOTATION]))
        pod = next(p for p in self.items if p.metadata.name == name)
        pod.metadata.annotations = {**(pod.metadata.annotations or {}), **body["metadata"]["annotations"]}


def _pod(name, node, phase, device=None):
    return ns(metadata=ns(name=name, annotations={GPU_INDEX_ANNOTATION: device} if device else None),
              spec=ns(node_name=node), status=ns(phase=phase))


def _stand_in(core):
    stand_in = ReservationStandIn.__new__(ReservationStandIn)
    stand_in.core, stand_in.namespace, stand_in.published, stand_in.errors = core, "kai-resource-reservation", {}, []
    return stand_in


def test_each_running_reservation_pod_gets_a_gpu_no_other_holds_on_its_node():
    core = FakeCore([_pod("held", "n1", "Running", device_uuid("n1", 0)), _pod("a", "n1", "Running"),
                     _pod("b", "n1", "Pending"), _pod("c", "n2", "Running")], {"n1": 2, "n2": 1})
    stand_in = _stand_in(core)
    stand_in.publish_once()
    assert core.patches == [("a", device_uuid("n1", 1)), ("c", device_uuid("n2", 0))]   # not the Pending one
    assert stand_in.published == {"a": device_uuid("n1", 1), "c": device_uuid("n2", 0)}
    stand_in.publish_once()   # nothing twice
    assert len(core.patches) == 2


def test_a_node_whose_gpus_are_all_reserved_gets_none_and_says_so():
    core = FakeCore([_pod("held", "n1", "Running", device_uuid("n1", 0)), _pod("late", "n1", "Running")], {"n1": 1})
    stand_in = _stand_in(core)
    stand_in.publish_once()
    assert core.patches == [] and stand_in.errors == ["late on n1: no free GPU"]
    assert free_device("n1", 1, []) == device_uuid("n1", 0)

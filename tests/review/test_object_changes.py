"""Field-level object diffs: paths people can read, named list items matched by identity."""

from __future__ import annotations

from components.review.object_changes import field_changes, object_changes


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_dotted_keys_are_joined_as_written():
    before = {"spec": {"hard": {"requests.nvidia.com/gpu": "40", "pods": "10"}}}
    after = {"spec": {"hard": {"requests.nvidia.com/gpu": "48", "pods": "10"}}}

    assert field_changes(before, after) == [{"path": "spec.hard.requests.nvidia.com/gpu", "from": "40", "to": "48"}]


def test_added_and_removed_keys_read_as_none():
    assert field_changes({"a": 1}, {"b": 2}) == [{"path": "a", "from": 1, "to": None}, {"path": "b", "from": None, "to": 2}]


def test_yaml_inside_a_string_is_compared_structurally():
    before = {"data": {"config.yaml": "version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-devices: {1g.10gb: 7}\n"}}
    after = {"data": {"config.yaml": "version: v1\nmig-configs:\n  x:\n  - devices: all\n    mig-devices: {3g.40gb: 2}\n"}}

    paths = [c["path"] for c in field_changes(before, after)]

    assert paths == ["data.config.yaml.mig-configs.x[0].mig-devices.1g.10gb", "data.config.yaml.mig-configs.x[0].mig-devices.3g.40gb"]


def test_inserting_a_named_item_is_one_change_not_a_cascade():
    subject = lambda name: {"kind": "Group", "name": name, "apiGroup": "rbac.authorization.k8s.io"}  # noqa: E731
    before = {"subjects": [subject("b"), subject("c")]}
    after = {"subjects": [subject("a"), subject("b"), subject("c")]}

    assert field_changes(before, after) == [{"path": "subjects[Group/a]", "from": None, "to": subject("a")}]


def test_same_named_items_of_different_kinds_stay_apart():
    before = {"subjects": [{"kind": "Group", "name": "x"}]}
    after = {"subjects": [{"kind": "Group", "name": "x"}, {"kind": "ServiceAccount", "name": "x", "namespace": "ns"}]}

    assert [c["path"] for c in field_changes(before, after)] == ["subjects[ServiceAccount/ns/x]"]


def test_reordering_named_items_is_reported():
    one, two = {"name": "a"}, {"name": "b"}

    assert field_changes([one, two], [two, one]) == [{"path": " (order)", "from": ["a", "b"], "to": ["b", "a"]}]


def test_unnamed_items_compare_by_index():
    before = {"egress": [{"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}]}
    after = {"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]}

    assert field_changes(before, after) == [{"path": "egress[0].to[0].ipBlock.cidr", "from": "10.20.0.0/16", "to": "10.0.0.0/8"}]


def test_scalar_lists_are_one_value():
    assert field_changes({"verbs": ["get", "list"]}, {"verbs": ["get", "list", "watch"]}) == [
        {"path": "verbs", "from": ["get", "list"], "to": ["get", "list", "watch"]}
    ]


def test_object_changes_by_identity_namespaces_first():
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "a"}, "spec": {}}

    changes = object_changes([namespace("a", x="1"), namespace("gone")], [quota, namespace("a", x="2")])

    assert [(c["kind"], c["name"], c["change"]) for c in changes] == [
        ("Namespace", "a", "changed"),
        ("Namespace", "gone", "removed"),
        ("ResourceQuota", "q", "added"),
    ]
    assert changes[0]["fields"] == [{"path": "metadata.labels.x", "from": "1", "to": "2"}]
    assert changes[2]["namespace"] == "a" and changes[2]["id"] == "v1/ResourceQuota/a/q"


def test_equal_objects_produce_no_change():
    assert object_changes([namespace("a", x="1")], [namespace("a", x="1")]) == []

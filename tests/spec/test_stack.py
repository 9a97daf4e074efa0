"""`Platform` is the root of the stack file and its parts live in spec/platform/ by concept; the
split changes no name a reader or the JSON Schema sees."""

from __future__ import annotations

import inspect

from pydantic import BaseModel

from components.spec import stack
from components.spec.json_schema import stack_schema
from components.spec.platform import access, admission, inventory, network, scheduling


def _models(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """Every model a Platform field holds, by name, found through the field annotations pydantic resolved."""
    for info in model.model_fields.values():
        stack_ = [info.annotation]
        while stack_:
            kind = stack_.pop()
            if inspect.isclass(kind) and issubclass(kind, BaseModel):
                if kind.__name__ not in seen:
                    seen[kind.__name__] = kind
                    _models(kind, seen)
            stack_ += list(getattr(kind, "__args__", ()))
    return seen


def test_every_model_of_the_platform_lives_in_one_concept_module_and_stays_importable_from_stack():
    concept = {m.__name__: m for m in (access, admission, inventory, network, scheduling)}
    models = _models(stack.Platform, {})
    assert {m.__module__ for m in models.values()} >= set(concept)
    for name, model in models.items():
        if model.__module__.startswith("components.spec.platform."):
            assert model.__module__ in concept, name
            assert getattr(stack, name) is model and name in stack.__all__, name
    assert stack.GpuClass is inventory.GpuClass and stack.QueueSettings is scheduling.QueueSettings
    assert {n for n in stack.__all__ if not hasattr(stack, n)} == set()


def test_the_schema_names_each_model_by_its_class_name():
    # `$defs` keys and titles are the class names; a name clash between modules would make pydantic
    # qualify them with the module path, changing every `$ref` of docs/schema/stack.schema.json.
    defs = stack_schema()["$defs"]
    models = _models(stack.Platform, {"Platform": stack.Platform})
    assert {"GpuClass", "NodePool", "QueueSettings", "GuardRails", "ClusterNetwork", "TenantAccessSettings"} <= set(defs)
    assert all(name in models and defs[name].get("title", name) == name for name in defs if name in models)
    assert not [name for name in defs if "__" in name or "." in name]


def test_a_stack_without_priority_classes_gets_the_shipped_four():
    assert stack.Platform(labelDomain="g.dev").priority_classes == scheduling.default_priority_classes()


def test_min_nodes_needs_an_autoscaled_group_and_at_most_its_max():
    import pytest
    from pydantic import ValidationError

    from components.spec.stack import NodePool

    base = {"gpuClass": "l4", "gpusPerNode": 2, "nodeSelector": {"pool": "l4"}}
    assert NodePool.model_validate({**base, "nodes": ["n1"], "maxNodes": 3, "minNodes": 1}).present_node_count == 2
    for bad in ({"nodes": ["n1"], "minNodes": 1}, {"maxNodes": 1, "minNodes": 2}):
        with pytest.raises(ValidationError, match="`minNodes` is the least size of an autoscaled group"):
            NodePool.model_validate({**base, **bad})

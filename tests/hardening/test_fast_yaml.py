"""`render.dump_objects` writes exactly the bytes PyYAML's C dumper would, on any plain data.

The fast writer decides nothing about quoting itself (PyYAML does, once per string) but lays out
blocks, folds long lines and caches the text of repeated lists; these properties compare the two
on generated documents full of the strings YAML treats specially, long lines at every depth,
shared sub-objects and values it must leave to PyYAML, and on every rendered stack. The reference
is PyYAML's C dumper told never to write anchors (render's `_Dumper`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.synthetic import write_project
from components.manifests.build import environment_objects, helm_releases
from components.output import yaml_output
from components.output.yaml_output import dump_objects, dump_objects_pyyaml
from components.load import load_environment, stack_names
from tests.hardening.support import EXAMPLES

REPO = Path(__file__).resolve().parents[2]

SPECIAL = [
    "", " ", "yes", "No", "on", "OFF", "null", "~", "true", "123", "-1", "1.5", "1e3", "0x1F", "0o17", "1_000",
    "2024-01-01", "1:20", ".inf", "-.INF", ".nan", "=", "<<", "-", "- a", "? x", ": y", "a: b", "a #b", "#c",
    "'q'", '"d"', "it's", "!tag", "&a", "*b", "|", ">", "%x", "@x", "`x", "[1]", "{a: 1}", "a,b", "---", "...",
    "tab\there", "line\nbreak", "cr\rhere", "nel\x85", "ls\u2028", "bom\ufeff", "bell\x07", "é ü ß", "日本語",
    "emoji 🎉", "trailing ", " leading", "two  spaces", "x" * 130, "back\\slash",
]
CHARS = list("ab '\":#-?!&*|>%@`,[]{}\\\t\n.") + ["é", "\u2028", "\x85", "\ufeff", "\x07", "日"]

words = st.text(st.sampled_from(list("abcdefgh'\":#-.,")), min_size=1, max_size=14)
long_text = st.lists(words, min_size=5, max_size=40).map(" ".join)
spaced_text = st.lists(st.sampled_from(["a", "bb", "ccc", " ", "  ", "'", "x:y", "#"]), min_size=10, max_size=80).map("".join)
strings = st.one_of(
    st.sampled_from(SPECIAL),
    st.text(st.sampled_from(CHARS), max_size=20),
    long_text,
    spaced_text,
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30),
)
keys = st.one_of(st.sampled_from(SPECIAL[:48]), st.text(st.sampled_from(CHARS), max_size=12), st.from_regex(r"\A[a-zA-Z./-]{1,40}\Z"))
scalars = st.one_of(strings, st.integers(-(2**64), 2**64), st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=40,
)


@st.composite
def documents(draw) -> dict:
    doc = draw(st.dictionaries(keys, values, min_size=1, max_size=6))
    if draw(st.integers(0, 9)) == 0:  # the same dict or list twice: written out twice, no anchor
        shared = draw(st.one_of(st.dictionaries(keys, scalars, min_size=1, max_size=2), st.lists(scalars, min_size=1, max_size=2)))
        doc["first"] = shared
        doc["second"] = {"again": shared}
    if draw(st.integers(0, 19)) == 0:  # values PyYAML writes its own way (or refuses)
        doc["other"] = draw(st.sampled_from([1.5, float("inf"), (1, 2), {1: "int key"}]))
    return doc


def both(objects: list) -> tuple[str, str]:
    try:
        expected = dump_objects_pyyaml(objects)
    except yaml.YAMLError as err:
        with pytest.raises(type(err)):
            dump_objects(objects)
        return "", ""
    return dump_objects(objects), expected


@settings(max_examples=EXAMPLES["yaml"])
@given(st.lists(documents(), min_size=1, max_size=3))
def test_fast_writer_matches_pyyaml_byte_for_byte(objects):
    fast, expected = both(objects)
    assert fast == expected


def test_a_shared_object_is_written_in_full_not_as_an_anchor():
    labels = {"app": "x", "tier": "web"}
    ports = [{"port": 80}, {"port": 443}]
    doc = {"metadata": {"labels": labels}, "spec": {"selector": labels, "ports": ports, "again": ports}}
    text = dump_objects([doc])
    assert "&" not in text and "*" not in text
    assert yaml.safe_load(text) == doc
    assert text == dump_objects_pyyaml([doc])


def test_cached_lists_that_differ_only_in_type_are_written_apart():
    # The list cache is keyed by the list marshalled: True and 1, "1" and 1, a list and a tuple
    # must never share an entry (each is written here right after its look-alike).
    looks_alike = [[1], [True], ["1"], [1.0], [[1]], [(1,)], [{"a": 1}], [{"a": True}], [{"a": "1"}]]
    for value in looks_alike * 2:
        doc = {"kind": "X", "spec": {"items": value}}
        assert dump_objects([doc]) == dump_objects_pyyaml([doc]), value


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 10, 30])
def test_folding_at_every_indent_matches_pyyaml(depth):
    text = "word " * 60 + "it's 'quoted' here: " * 5

    def level(n: int) -> dict:
        inner = {"value": text, "list": [text, {"key": text}]}
        return inner if n == 0 else {"n": level(n - 1), "items": [[level(0)]]}

    fast, expected = both([level(depth)])
    assert fast == expected and "&id" not in expected
    assert max(len(line) for line in expected.splitlines()) < len(text)  # folded


@pytest.mark.parametrize("stack", stack_names(REPO))
def test_every_example_stack_is_written_as_pyyaml_would(stack):
    environment = load_environment(REPO, stack)
    owners = environment_objects(environment)
    owners.update({f"{t.name}.helm": helm_releases(t.spec, environment.view(t.spec)) for t in environment.tenants})
    for owner, objects in owners.items():
        assert dump_objects(objects) == dump_objects_pyyaml(objects), owner


def test_a_synthetic_fleet_is_written_as_pyyaml_would(tmp_path):
    environment = load_environment(write_project(tmp_path, 12), "bench")
    for owner, objects in environment_objects(environment).items():
        assert dump_objects(objects) == dump_objects_pyyaml(objects), owner


ascii_lines = st.one_of(
    st.text(st.sampled_from(list("ab '\":#-?!&*|>%@`,[]{}.~=<01\\")), min_size=1, max_size=12),
    st.sampled_from([s for s in SPECIAL if s and all(" " <= c <= "~" for c in s)]),
    st.lists(st.sampled_from(["true", "No", "1e3", "0x1F", "1:20", "---", "...", "- ", "? ", ": ", " #", "a"]), min_size=1, max_size=4).map("".join),
)


@settings(max_examples=EXAMPLES["yaml"] * 4)
@given(ascii_lines)
def test_the_writer_quotes_a_printable_ascii_line_as_pyyaml_does(text):
    # The writer decides these itself (libyaml's rule); PyYAML writing the string alone is the reference.
    yaml_output._STYLES.pop(text, None)
    style = yaml_output._quick_style(text)
    written = yaml.dump([text], Dumper=yaml_output._Dumper, default_flow_style=False, allow_unicode=True, width=1 << 30)
    assert style is not None and "- " + style[1] + "\n" == written

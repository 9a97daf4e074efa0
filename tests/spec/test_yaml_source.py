"""Safe YAML with positions: what we accept, what we refuse, and where we say the problem is."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from components.spec import yaml_source
from components.spec.problems import InvalidInput
from components.spec.yaml_source import SourceDocument, dotted, parse_yaml, read_text


def problems_of(text: str) -> list[str]:
    with pytest.raises(InvalidInput) as caught:
        parse_yaml(text, "t.yaml")
    return [str(p) for p in caught.value.problems]


def test_every_key_and_item_has_its_line_and_column():
    doc = parse_yaml("quota:\n  cpu: {requests: '8'}\n  mig:\n    - 1g.10gb\n    - 3g.40gb\n", "t.yaml")
    assert doc.data == {"quota": {"cpu": {"requests": "8"}, "mig": ["1g.10gb", "3g.40gb"]}}
    assert doc.position(("quota",)) == (1, 1)
    assert doc.position(("quota", "cpu")) == (2, 3)
    assert doc.position(("quota", "cpu", "requests")) == (2, 9)
    assert doc.position(("quota", "mig", 1)) == (5, 7)


def test_a_path_missing_from_the_file_is_located_at_its_deepest_written_parent():
    doc = parse_yaml("quota:\n  cpu: {}\n", "t.yaml")
    assert doc.position(("quota", "cpu", "limits")) == (2, 3)
    assert doc.position(("access",)) == (1, 1)


def test_problem_prints_file_line_column_field_message():
    doc = parse_yaml("a:\n  b: 1\n", "t.yaml")
    assert str(doc.problem(("a", "b"), "too small")) == "t.yaml:2:3: a.b: too small"
    assert str(doc.problem(("a", "b"), "close", severity="warning")) == "t.yaml:2:3: warning: a.b: close"


def test_override_paths_keep_their_written_name():
    # `quota` was written under environments.dev and merged over the base, whose quota.cpu stays
    doc = SourceDocument(
        "t.yaml",
        {},
        {("quota",): (20, 5), ("quota", "gpu"): (21, 7), ("quota", "cpu"): (8, 3)},
        {("quota",): ("environments", "dev", "quota"), ("quota", "gpu"): ("environments", "dev", "quota", "gpu")},
    )
    assert doc.field_name(("quota", "gpu", "h100")) == "environments.dev.quota.gpu.h100"
    assert doc.field_name(("quota", "mig")) == "environments.dev.quota.mig"
    assert doc.field_name(("quota", "cpu", "requests")) == "quota.cpu.requests"
    assert doc.position(("quota", "cpu", "requests")) == (8, 3)
    assert doc.field_name(("access",)) == "access"


def test_dotted_names():
    assert dotted(("quota", "gpu", "h100")) == "quota.gpu.h100"
    assert dotted(("contacts", 0, "email")) == "contacts[0].email"
    assert dotted(()) == ""


def test_duplicate_key_is_refused_at_the_second_one():
    assert problems_of("name: a\nquota: {}\nname: b\n") == [
        "t.yaml:3:1: name: duplicate key 'name' (first defined on line 1); YAML would silently keep only the last one"
    ]


def test_duplicate_nested_keys_are_all_reported():
    found = problems_of("quota:\n  cpu: 1\n  cpu: 2\ngpu:\n  classes: []\n  classes: [a]\n")
    assert [line.split(": ")[0] for line in found] == ["t.yaml:3:3", "t.yaml:6:3"]
    assert all("duplicate key" in line for line in found)


def test_byte_order_mark_is_ignored():
    doc = parse_yaml("\ufeffname: a\n", "t.yaml")
    assert doc.data == {"name": "a"}
    assert doc.position(("name",)) == (1, 1)


def test_crlf_files_read_like_lf_files(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_bytes(b"name: a\r\nquota:\r\n  gpu: 2\r\n")
    text = read_text(path, "t.yaml")
    assert "\r" not in text
    doc = parse_yaml(text, "t.yaml")
    assert doc.data == {"name": "a", "quota": {"gpu": 2}}
    assert doc.position(("quota", "gpu")) == (3, 3)


def test_bom_and_crlf_together(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_bytes("\ufeffa: 1\r\nb: 2\r\n".encode("utf-8"))
    doc = parse_yaml(read_text(path, "t.yaml"), "t.yaml")
    assert doc.data == {"a": 1, "b": 2}
    assert doc.position(("b",)) == (2, 1)


@pytest.mark.parametrize(
    "text, tag",
    [
        ("a: !!python/object/apply:os.system ['touch pwned']\n", "!!python/object/apply:os.system"),
        ("a: !!python/name:os.system\n", "!!python/name:os.system"),
        ("a: !!python/object:collections.OrderedDict {}\n", "!!python/object:collections.OrderedDict"),
        ("a: !include other.yaml\n", "!include"),
        ("a: !!set {x}\n", "!!set"),
    ],
)
def test_non_standard_tags_are_refused_and_never_constructed(text, tag, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = problems_of(text)
    assert found == [f"t.yaml:1:4: a: unsupported YAML tag {tag}; tenant and stack files are plain data: write the value itself"]
    assert list(tmp_path.iterdir()) == []


def test_standard_tags_are_plain_values():
    doc = parse_yaml("a: !!str 5\nb: !!int '7'\n", "t.yaml")
    assert doc.data == {"a": "5", "b": 7}


@pytest.mark.parametrize("key, reading", [("yes", "a boolean"), ("on", "a boolean"), ("No", "a boolean"), ("null", "null"), ("~", "null")])
def test_keys_that_yaml_reads_as_bool_or_null_must_be_quoted(key, reading):
    assert problems_of(f"quota:\n  {key}: 1\n") == [f"t.yaml:2:3: quota: key '{key}' is read as {reading} by YAML; quote it"]
    assert parse_yaml(f"quota:\n  '{key}': 1\n", "t.yaml").data == {"quota": {key: 1}}


def test_number_keys_become_strings_but_other_keys_are_refused():
    assert parse_yaml("1: a\n", "t.yaml").data == {"1": "a"}
    assert problems_of("1.5: a\n") == ["t.yaml:1:1: keys must be plain strings"]
    assert problems_of("[a]: b\n") == ["t.yaml:1:1: keys must be plain strings"]


def test_decimals_stay_exact_and_dates_stay_text():
    doc = parse_yaml("overcommit: 1.10\nsince: 2024-01-01\ncount: 1_000\n", "t.yaml")
    assert doc.data == {"overcommit": Decimal("1.10"), "since": "2024-01-01", "count": 1000}
    assert isinstance(doc.data["overcommit"], Decimal)


@pytest.mark.parametrize("text", ["0", "7", "2", "10", "0010", "010", "0o17", "0x1F", "0b101", "1_000", "+3", "-3",
                                  "1:30", "-0", "12345678901234567890", "!!int '42'", "!!int '017'"])
def test_integers_read_as_pyyaml_reads_them(text):
    # Plain decimals take a shortcut past PyYAML's int constructor; every other spelling (0-led
    # octals, hex, binary, underscores, signs, sexagesimal, explicit tags) must still read the same.
    expected = yaml.safe_load(f"n: {text}\n")["n"]
    read = parse_yaml(f"n: {text}\n", "t.yaml").data["n"]
    assert (read, type(read)) == (expected, type(expected))


def test_merge_keys_are_refused():
    found = problems_of("base: &b {x: 1}\nitem:\n  <<: *b\n  y: 2\n")
    assert found == ["t.yaml:3:3: item: merge keys (<<) are not supported; write the fields out"]


def test_small_aliases_are_expanded():
    doc = parse_yaml("a: &x [1, 2]\nb: *x\n", "t.yaml")
    assert doc.data == {"a": [1, 2], "b": [1, 2]}


def test_alias_bomb_is_refused_before_it_expands():
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        lines.append(f"l{level}: &l{level} [" + ",".join([f"*l{level - 1}"] * 10) + "]")
    found = problems_of("\n".join(lines) + "\n")
    assert len(found) == 1
    assert f"expands to more than {yaml_source.MAX_NODES} values" in found[0]


def test_deep_nesting_is_refused():
    found = problems_of("a: " + "[" * 100 + "]" * 100 + "\n")
    assert len(found) == 1 and "nesting deeper than 64 levels" in found[0]


@pytest.mark.parametrize(
    "text, where, words",
    [
        ("a: {b: 1\nc: 2\n", "t.yaml:2:", "invalid YAML"),
        ("a: 1\n---\nb: 2\n", "t.yaml:2:1", "expected a single document"),
        ("a:\n\tb: 1\n", "t.yaml:2:1", "YAML does not allow tabs for indentation; use spaces"),
        ("a: 'open\n", "t.yaml:", "invalid YAML"),
    ],
)
def test_syntax_errors_are_located(text, where, words):
    found = problems_of(text)
    assert len(found) == 1
    assert found[0].startswith(where) and words in found[0]


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_empty_documents_are_refused(text):
    assert problems_of(text) == ["t.yaml:1:1: the file is empty; write its content, or delete the file"]


def test_a_bare_document_marker_is_a_null_document():
    # Not empty for YAML; the loaders then say a tenant or stack file must be a mapping.
    assert parse_yaml("---\n", "t.yaml").data is None


def test_non_utf8_bytes_are_located(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_bytes(b"name: a\ndescription: Caf\xe9\n")
    with pytest.raises(InvalidInput) as caught:
        read_text(path, "t.yaml")
    assert str(caught.value) == "t.yaml:2:17: is not UTF-8 (byte 0xe9); save the file as UTF-8"


def test_oversized_files_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_source, "MAX_FILE_BYTES", 64)
    path = tmp_path / "t.yaml"
    path.write_text("a: " + "x" * 100 + "\n")
    with pytest.raises(InvalidInput, match="may be at most 64 bytes"):
        read_text(path, "t.yaml")


def test_directories_and_missing_files_are_refused(tmp_path):
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(InvalidInput, match="is a directory"):
        read_text(tmp_path / "d.yaml", "d.yaml")
    with pytest.raises(InvalidInput, match="cannot read"):
        read_text(tmp_path / "none.yaml", "none.yaml")


def test_symlinks_must_stay_inside_the_directory(tmp_path):
    inside, outside = tmp_path / "tenants", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.yaml").write_text("a: 1\n")
    (inside / "real.yaml").write_text("b: 2\n")
    (inside / "escape.yaml").symlink_to(outside / "secret.yaml")
    (inside / "alias.yaml").symlink_to(inside / "real.yaml")
    with pytest.raises(InvalidInput, match="outside"):
        read_text(inside / "escape.yaml", "tenants/escape.yaml", inside)
    assert read_text(inside / "alias.yaml", "tenants/alias.yaml", inside) == "b: 2\n"


def test_all_problems_of_a_file_are_reported_together():
    found = problems_of("a: 1\na: 2\nyes: 3\nb: !!python/name:os.system\n")
    assert [line.split(": ", 1)[0] for line in found] == ["t.yaml:2:1", "t.yaml:3:1", "t.yaml:4:4"]


def test_source_document_docstring_example():
    doc = parse_yaml("a:\n  b: 1\n", "x.yaml")
    assert isinstance(doc, SourceDocument)
    assert (doc.data, doc.position(("a", "b"))) == ({"a": {"b": 1}}, (2, 3))


def test_parse_does_not_touch_the_filesystem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parse_yaml("a: [1, 2]\n", "t.yaml")
    assert list(Path(tmp_path).iterdir()) == []

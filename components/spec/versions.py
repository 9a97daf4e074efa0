"""Versions of the file formats, and what an older file must change to be read today.

A version moves with every change that makes an old file mean something else or fail. Tenant files
say it in `apiVersion`; stack files in `apiVersion` under `gpu-tenancy:platform` (one written before
stack files carried a version is v1alpha1). `tenants migrate` rewrites older files; where a change
needs a person's decision it writes `DECIDE` in place, which no file may keep.

>>> older_version_message("tenant", "gpu-tenancy.dev/v1alpha1", "tenants/a.yaml").startswith("gpu-tenancy.dev/v1alpha1 is")
True
"""

from __future__ import annotations

from typing import Any, Iterator

from .base import API_VERSION
from .problems import Problem
from .yaml_source import SourceDocument

V1ALPHA1 = "gpu-tenancy.dev/v1alpha1"

# Versions older than API_VERSION, oldest first; what each change asks of a file: docs/migrating.md,
# and its rewrite: components/authoring/migrate.py.
OLDER_VERSIONS = (V1ALPHA1,)

# What `tenants migrate` writes where a person must choose; validation refuses it anywhere.
DECIDE = "DECIDE"


def older_version_message(kind: str, version: str, file: str) -> str:
    """Why an older file is not read, and the command that rewrites it.

    >>> older_version_message("stack", V1ALPHA1, "stacks/Pulumi.dev.yaml")[:46]
    'gpu-tenancy.dev/v1alpha1 is an older format of'
    """
    return (
        f"{version} is an older format of {kind} files (the current one is {API_VERSION}); run "
        f"`tenants migrate {file}`: it rewrites the file and marks DECIDE what you must choose (docs/migrating.md)"
    )


def tenant_version_problems(doc: SourceDocument) -> list[Problem]:
    """The file's `apiVersion` is an older one: one problem saying to migrate (its fields are not
    checked against today's format, which would only repeat what migrate reports).

    >>> doc = SourceDocument("t.yaml", {"apiVersion": V1ALPHA1}, {("apiVersion",): (2, 13)})
    >>> str(tenant_version_problems(doc)[0])[:52]
    't.yaml:2:13: apiVersion: gpu-tenancy.dev/v1alpha1 is'
    """
    version = doc.data.get("apiVersion") if isinstance(doc.data, dict) else None
    if version in OLDER_VERSIONS:
        return [doc.problem(("apiVersion",), older_version_message("tenant", version, doc.file))]
    return []


def stack_version_problems(doc: SourceDocument, config_key: str) -> list[Problem]:
    """A stack file whose platform object names no `apiVersion` (or an older one) predates today's format.

    >>> doc = SourceDocument("s.yaml", {"config": {"p": {"labelDomain": "x"}}}, {("config", "p"): (3, 3)})
    >>> stack_version_problems(doc, "p")[0].field
    'config.p.apiVersion'
    """
    config = doc.data.get("config") if isinstance(doc.data, dict) else None
    platform = config.get(config_key) if isinstance(config, dict) else None
    if not isinstance(platform, dict):
        return []
    version = platform.get("apiVersion", V1ALPHA1)
    if version not in OLDER_VERSIONS:
        return []
    path = ("config", config_key, "apiVersion")
    return [doc.problem(path, older_version_message("stack", version, doc.file), field_name=".".join(path))]


def undecided_problems(doc: SourceDocument) -> list[Problem]:
    """Every `DECIDE` that `tenants migrate` left in the file, at its line.

    >>> doc = SourceDocument("t.yaml", {"a": [{"ports": "DECIDE"}]}, {("a", 0, "ports"): (4, 9)})
    >>> str(undecided_problems(doc)[0])[:38]
    't.yaml:4:9: a[0].ports: undecided: ten'
    """
    return [
        doc.problem(path, "undecided: tenants migrate left this choice to you (the comment above it says what "
                          "each answer means); replace DECIDE with your decision")
        for path in _decide_paths(doc.data, ())
    ]


def _decide_paths(value: Any, path: tuple) -> Iterator[tuple]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _decide_paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _decide_paths(item, (*path, index))
    elif value == DECIDE:
        yield path

"""CEL helpers of the admission policies: the `dyn` rewrite for policies that match several kinds."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from components.manifests.cel import as_dyn


def _as_dyn_by_regex(text: str) -> str:
    """The rewrite as first written (two look-behind substitutions): the reference for the fast one."""
    text = re.sub(r"(?<![\w.])object\.", "dyn(object).", text)
    text = re.sub(r"(?<![\w.])oldObject\.", "dyn(oldObject).", text)
    return text.replace("? object : oldObject)", "? dyn(object) : dyn(oldObject))")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["object.", "oldObject.", "object", "Object.", "o", "x", "é", ".", "_", " ", "(", "1",
                                 "? object : oldObject)", '"'])).map("".join))
def test_the_dyn_rewrite_is_the_look_behind_substitution(text):
    assert as_dyn.__wrapped__(text) == _as_dyn_by_regex(text)

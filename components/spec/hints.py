"""The one "did you mean": which known name a misspelt one is closest to, for every message that
suggests one (unknown fields, GPU classes, pools, tenants, cohorts, bundles, chart values)."""

from __future__ import annotations

import difflib
from typing import Iterable


def closest(value: str, known: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The known name closest to `value`, if any is close enough (difflib's ratio >= `cutoff`).

    >>> closest("h10", ["a100", "h100"]), closest("gpu", ["memory"])
    ('h100', None)
    """
    matches = difflib.get_close_matches(value, sorted(known), n=1, cutoff=cutoff)
    return matches[0] if matches else None


def did_you_mean(value: str, known: Iterable[str], listing: str = "known") -> str:
    """The tail of an "unknown X" message: the close name, else every known one.

    >>> did_you_mean("h10", ["a100", "h100"]), did_you_mean("x", ["a100", "h100"]), did_you_mean("x", [])
    ("; did you mean 'h100'?", ' (known: a100, h100)', ' (known: none defined)')
    """
    known = sorted(known)
    close = closest(value, known)
    if close:
        return f"; did you mean '{close}'?"
    return f" ({listing}: {', '.join(known) or 'none defined'})"


def did_you_mean_tenant(value: str, known: Iterable[str]) -> str:
    """Like `did_you_mean` for tenant names, stricter: teams often share a prefix or a word (llm-eval
    and eval are two teams), so only a near-identical name is suggested.

    >>> did_you_mean_tenant("llm-eval", ["eval", "inference"]), did_you_mean_tenant("inferense", ["eval", "inference"])
    (' (no tenant file has a close name; tenant files define: eval, inference)', "; did you mean 'inference'?")
    """
    known = sorted(known)
    if not known:
        return " (known: none defined)"
    close = closest(value, known, cutoff=0.8)
    if close:
        return f"; did you mean '{close}'?"
    listing = f"; tenant files define: {', '.join(known)}" if 0 < len(known) <= 12 else ""
    return f" (no tenant file has a close name{listing})"

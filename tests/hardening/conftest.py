"""Hardening tests: generated and hostile inputs. Selects the Hypothesis profile (see support.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import settings

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `bench.synthetic` and `tests.*` resolve from the repository root
    sys.path.insert(0, str(REPO))

from tests.hardening.support import PROFILE  # noqa: E402

settings.load_profile(PROFILE)


def pytest_report_header(config):
    return f"hardening: hypothesis profile '{PROFILE}'"

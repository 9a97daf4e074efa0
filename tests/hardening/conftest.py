"""Hardening tests: generated and hostile inputs. Selects the Hypothesis profile (see support.py)."""

from __future__ import annotations

from hypothesis import settings

from tests.hardening.support import PROFILE

settings.load_profile(PROFILE)


def pytest_report_header(config):
    return f"hardening: hypothesis profile '{PROFILE}'"

"""Near-full pool warnings: a shared pool one tenant fills warns, a pool dedicated to its filler does not."""

from __future__ import annotations

from pathlib import Path

from components.load import load_environment

REPO = Path(__file__).resolve().parents[2]


def _pool_warnings(stack: str) -> dict[str, str]:
    warnings = load_environment(REPO, stack).warnings
    return {p.field.rsplit(".", 1)[-1]: p.message for p in warnings if ".nodePools." in p.field and "of what it" in p.message}


def test_a_dedicated_pool_its_owner_fills_is_not_a_warning():
    environment = load_environment(REPO, "prod")
    owners = {t.name: t.spec.gpu.dedicated_pools for t in environment.tenants}
    assert "h100-train" in owners["llm-finetune"] and "h100-serve" in owners["inference"]  # else this proves nothing
    warned = _pool_warnings("prod")
    assert "h100-train" not in warned and "h100-serve" not in warned, warned
    assert "h100-serve" not in _pool_warnings("staging")


def test_a_shared_pool_one_tenant_fills_still_warns():
    warned = _pool_warnings("prod")
    assert sorted(warned) == ["a100-mig", "a100-shared"]
    assert "(eval: 20), 100% of what it holds" in warned["a100-shared"]

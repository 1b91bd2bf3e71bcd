"""The price table and usage arithmetic of orchestrator.report.accounting."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.report.accounting import PriceError, add_usage, load_prices, merge_usage, priced


def test_shipped_table_is_dated_and_looks_up_in_order() -> None:
    prices = load_prices()
    assert prices.as_of and prices.currency == "USD"
    assert prices.price_for("openai/gpt-4o") is prices.models["gpt-4o"]
    assert prices.price_for("openrouter/openai/gpt-4o") is prices.models["gpt-4o"]
    assert prices.price_for("local/qwen2.5-0.5b-instruct") is prices.models["local/*"]
    assert prices.price_for("openai/no-such-model") is None
    free = prices.price_for("openrouter/meta-llama/llama-3.3-70b-instruct:free")
    assert free is not None and (free.input, free.output) == (0.0, 0.0)


def test_cost_charges_cached_input_at_its_rate_and_output_once() -> None:
    prices = load_prices()
    usage = {"input_tokens": 1_000_000, "cached_input_tokens": 200_000,
             "output_tokens": 100_000, "reasoning_tokens": 80_000}
    # claude-3-5-sonnet: $3 input, $0.30 cached, $15 output per 1M; reasoning is inside output
    cost = prices.cost("anthropic/claude-3-5-sonnet-20241022", usage)
    assert cost == pytest.approx(0.8 * 3.00 + 0.2 * 0.30 + 0.1 * 15.00)
    assert prices.cost("local/anything", usage) == 0.0
    assert prices.cost("gemini/unknown-model", usage) is None


def test_usage_sums_and_partial_totals() -> None:
    a: dict[str, dict[str, float]] = {}
    add_usage(a, "openai/gpt-4o", {"calls": 1, "input_tokens": 10, "output_tokens": 2})
    add_usage(a, "openai/gpt-4o", {"calls": 1, "input_tokens": 5, "latency_s": 0.5})
    b = {"openai/mystery": {"calls": 3, "input_tokens": 7}}
    total = merge_usage([a, b])
    assert total["openai/gpt-4o"]["calls"] == 2 and total["openai/gpt-4o"]["input_tokens"] == 15
    result = priced(total, load_prices())
    assert result["unpriced_models"] == ["openai/mystery"]
    assert result["models"]["openai/mystery"]["cost_usd"] is None
    assert result["cost_usd"] == pytest.approx((15 * 2.50 + 2 * 10.00) / 1e6)
    assert priced({}, load_prices())["cost_usd"] is None


def test_bad_tables_name_the_file_and_the_problem(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    with pytest.raises(PriceError, match="cannot read price table"):
        load_prices(str(missing))
    bad = tmp_path / "bad.yaml"
    bad.write_text("as_of: x\nmodels:\n  m: {input: -1, output: 1}\n")
    with pytest.raises(PriceError, match=r"bad price table .*models\.m\.input"):
        load_prices(str(bad))

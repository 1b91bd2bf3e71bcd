"""The cost ledger (``orchestrator.core.budget``), the worst-case token bounds and the
endpoint rate limit (``agent_server.backends.limits``), and how the progress line shows them."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from agent_server.backends.base import ChatMessage
from agent_server.backends.limits import (
    CALL_OVERHEAD_TOKENS,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    EndpointRateLimit,
    token_bound,
    wire_token_bound,
)
from moria.common.v1 import types_pb2
from moria.config import ClientConfig
from moria.policy.v1 import policy_service_pb2 as pol_pb
from orchestrator.core.budget import CostLedger
from orchestrator.report.accounting import price_table
from orchestrator.report.progress import StepTally

PRICES = price_table({"as_of": "test", "models": {"openai/m": {"input": 1e6, "output": 2e6}}},
                     "inline")  # $1 per input token, $2 per output token


def _reserve(inp: int, out: int, model: str = "openai/m") -> pol_pb.Reserve:
    return pol_pb.Reserve(model=model, input_tokens=inp, output_tokens=out)


def _act(inp: int, out: int, *, error: bool = False) -> pol_pb.Act:
    act = pol_pb.Act(model="openai/m", usage=types_pb2.Usage(input_tokens=inp,
                                                             output_tokens=out, calls=1))
    if error:
        act.error.code = 14
    return act


def test_bounds_count_every_byte_the_template_and_images() -> None:
    client = ClientConfig()
    messages = [ChatMessage("system", "abcd"), ChatMessage("user", "é" * 3, [b"png", b"png"])]
    bound = token_bound(messages, 16, client)
    assert bound.input_tokens == (CALL_OVERHEAD_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS + 4 + 6
                                  + 2 * IMAGE_TOKENS)
    assert bound.output_tokens == 16
    assert bound.input_estimate == 3 + 2 * IMAGE_TOKENS  # ceil(10 bytes / 4) plus the images
    thinking = ClientConfig(thinking_budget=2000)
    assert token_bound(messages, 16, thinking).output_tokens == 2016
    wire = wire_token_bound({"messages": [
        {"role": "system", "content": "abcd"},
        {"role": "user", "content": [{"type": "text", "text": "é" * 3},
                                     {"type": "image_url", "image_url": {"url": "data:,"}},
                                     {"type": "image_url", "image_url": {"url": "data:,"}}]}],
        "max_tokens": 16}, client)
    assert wire == bound


async def test_the_ledger_grants_within_the_cap_and_refuses_past_it(tmp_path: Path) -> None:
    ledger = CostLedger(10.0, PRICES, tmp_path / "budget.json")
    first, second = ledger.turn(), ledger.turn()
    assert (await first.grant(_reserve(2, 1))).granted  # $4
    assert (await second.grant(_reserve(2, 1))).granted  # $8 reserved
    refused = await second.grant(_reserve(2, 1))
    assert not refused.granted and "eval.max_cost_usd $10.00 reached" in refused.reason
    assert second.refused == refused.reason and ledger.refused_calls == 1
    first.settle(_act(1, 0))  # answered for $1: its $4 released
    assert (ledger.spent_usd, ledger.reserved_usd) == (1.0, 4.0)
    second.settle(_act(0, 0, error=True))  # failed: its worst case counts as spent
    assert (ledger.spent_usd, ledger.reserved_usd) == (5.0, 0.0)
    third = ledger.turn()
    assert (await third.grant(_reserve(1, 1))).granted
    third.abandon()  # no answer: its worst case counts as spent
    assert (ledger.spent_usd, ledger.reserved_usd) == (8.0, 0.0)
    assert json.loads((tmp_path / "budget.json").read_text())["spent_usd"] == 8.0
    unpriced = await ledger.turn().grant(_reserve(1, 1, model="openai/other"))
    assert not unpriced.granted and "has no price" in unpriced.reason
    assert ledger.status() == ("budget $8.00 spent + $0.00 reserved of $10.00, "
                               "2 call(s) refused")


async def test_a_resumed_ledger_starts_from_what_was_spent_and_held(tmp_path: Path) -> None:
    path = tmp_path / "budget.json"
    path.write_text(json.dumps({"spent_usd": 3.0, "reserved_usd": 1.5}))
    assert CostLedger(10.0, PRICES, path).spent_usd == 4.5
    path.write_text("not json")
    with pytest.raises(ValueError, match="is not a cost ledger"):
        CostLedger(10.0, PRICES, path)
    with pytest.raises(ValueError, match="must be > 0"):
        CostLedger(0.0, PRICES)


async def test_a_429_pauses_every_call_to_the_endpoint() -> None:
    limit = EndpointRateLimit(None, None)
    limit.throttled(0.2)
    started = time.monotonic()
    waits = await asyncio.gather(limit.acquire(10), limit.acquire(10))
    assert min(waits) >= 0.15 and time.monotonic() - started >= 0.15
    assert limit.throttled_calls == 1
    with pytest.raises(ValueError, match="must be > 0"):
        EndpointRateLimit(0, None)


async def test_the_token_bucket_holds_a_minute_of_tokens() -> None:
    limit = EndpointRateLimit(None, 600.0)  # 10 tokens a second
    assert await limit.acquire(600) < 0.05  # a full minute's worth at once
    waited = await limit.acquire(3)  # then 3 tokens' worth of leak
    assert waited >= 0.25


def test_the_progress_line_shows_the_budget_and_rate_limit_waits() -> None:
    tally = StepTally()
    tally.begin(2)
    assert "budget" not in tally.status() and "rate limits" not in tally.status()
    tally.budget_status = lambda: "budget $1.00 spent + $0.50 reserved of $5.00"
    tally.step(("babyai", "t", 0), 0, rate_limit_wait_s=2.34)
    assert tally.status().endswith(
        "| budget $1.00 spent + $0.50 reserved of $5.00 | waited on rate limits 2.3 s")
    assert "waited on rate limits 2.3 s" in tally.info()

"""Smoke test of benchmarks/model_client.py's HTTP-client comparison (``lean=True``): the
backend's calls through the SDK and through the lean client both reach the fake server, and
every figure of the comparison and its result file is reported; never a speed."""

from __future__ import annotations

import pytest

from benchmarks import model_client, tables
from moria import aio
from tests.support.fake_openai import FakeOpenAI

WARM_UP_CALLS = 50  # model_client.measure's warm-up calls per layer


def test_the_lean_layer_is_measured_beside_the_sdk() -> None:
    with FakeOpenAI(reply=model_client.ANSWER) as server:
        figures = aio.run(model_client.measure(server.base_url, calls=4, in_flight=2,
                                               rounds=2, lean=True))
        requests = list(server.requests)
    layers = ("aiohttp", "openai_sdk", "moria_backend", "moria_backend_lean")
    assert len(requests) == len(layers) * (WARM_UP_CALLS + 2 * 4)
    expected = model_client.chat_messages()
    assert all(r.json is not None and r.json["messages"] == expected for r in requests)
    sdk_sent = [r for r in requests if "x-stainless-lang" in r.headers]
    assert len(sdk_sent) == 2 * (WARM_UP_CALLS + 2 * 4)  # the SDK layer and the SDK backend
    t = figures["transports"]
    assert t["sdk_cpu_ms_per_call"] == pytest.approx(
        figures["moria_backend"]["cpu_us_per_call"] / 1000, abs=1e-3)
    assert t["lean_cpu_ms_per_call"] == pytest.approx(
        figures["moria_backend_lean"]["cpu_us_per_call"] / 1000, abs=1e-3)
    assert t["sdk_minus_lean_cpu_ms"] == pytest.approx(
        t["sdk_cpu_ms_per_call"] - t["lean_cpu_ms_per_call"], abs=2e-3)
    if t["lean_cpu_ms_per_call"] > 0:
        assert t["sdk_over_lean_ratio"] == pytest.approx(
            t["sdk_cpu_ms_per_call"] / t["lean_cpu_ms_per_call"], rel=0.02)
    result = model_client.transports_result(
        {"calls": 4, "in_flight": 2, "rounds": 2, "load_average_before": [1.0, 1.0, 1.0],
         "load_average_after": [1.5, 1.0, 1.0], **figures}, commit="abc1234")
    assert result["name"] == model_client.TRANSPORTS_RESULT.stem
    assert all(len(row) == len(result["columns"]) for row in result["rows"])
    rendered = tables.render(result)
    assert "load average 1, 1, 1 before, 1.5, 1, 1 after" in rendered
    assert "--rounds 2 --write" in rendered

"""Smoke tests of two benchmarks: benchmarks/model_client.py against the fake OpenAI server,
benchmarks/server_info.py against a real local stack. They check that every layer and server
was really called and that every figure is reported, never a speed."""

from __future__ import annotations

import pytest

from benchmarks import model_client, server_info
from moria import aio
from tests.support.fake_openai import FakeOpenAI

WARM_UP_CALLS = 50  # model_client.measure's warm-up calls per layer


def test_model_client_sends_every_layer_s_calls() -> None:
    with FakeOpenAI(reply=model_client.ANSWER) as server:
        figures = aio.run(model_client.measure(server.base_url, calls=4,
                                               in_flight=2, rounds=2))
        requests = list(server.requests)
    layers = ("aiohttp", "openai_sdk", "moria_backend")
    assert len(requests) == len(layers) * (WARM_UP_CALLS + 2 * 4)
    expected = model_client.chat_messages()
    for request in requests:
        assert (request.method, request.path) == ("POST", "/v1/chat/completions")
        assert request.json is not None and request.json["messages"] == expected
    for layer in layers:
        low, high = figures[layer]["cpu_us_low_high"]
        assert 0 <= low <= figures[layer]["cpu_us_per_call"] <= high
        assert figures[layer]["wall_us_per_call"] > 0
    assert figures["sdk_over_aiohttp_cpu_us"] == pytest.approx(
        figures["openai_sdk"]["cpu_us_per_call"] - figures["aiohttp"]["cpu_us_per_call"], abs=0.2)
    assert figures["backend_over_sdk_cpu_us"] == pytest.approx(
        figures["moria_backend"]["cpu_us_per_call"] - figures["openai_sdk"]["cpu_us_per_call"],
        abs=0.2)


def test_server_info_times_both_servers() -> None:
    figures = server_info.run(calls=3)
    assert figures["calls"] == 3 and len(figures["load_average_before"]) == 3
    for server in ("env_server", "policy_server"):
        assert figures[server]["wall_ms_per_call"] > 0
        assert figures[server]["server_cpu_ms_per_call"] >= 0

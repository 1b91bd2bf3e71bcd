"""moria.aio.run: every process's event loop is uvloop unless MORIA_EVENT_LOOP says asyncio;
a bad value is refused before anything runs."""

from __future__ import annotations

import asyncio

import pytest

from moria import aio


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_by_default_and_asyncio_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MORIA_EVENT_LOOP", raising=False)
    assert aio.run(_loop_module()).startswith("uvloop")
    monkeypatch.setenv("MORIA_EVENT_LOOP", "asyncio")
    assert aio.run(_loop_module()).startswith("asyncio")


def test_a_bad_loop_name_is_refused_with_the_allowed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MORIA_EVENT_LOOP", "trio")
    coro = _loop_module()
    with pytest.raises(ValueError, match="expected one of uvloop, asyncio"):
        aio.run(coro)
    coro.close()

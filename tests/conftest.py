"""Settings every test starts from, whatever the developer's shell holds."""

from __future__ import annotations

import pytest

import moria  # noqa: F401  (before grpc: the tests' own channels get moria.grpc_defaults)

#: Environment variables that change what a server lists or serves; a test that wants one sets
#: it itself (``monkeypatch.setenv``).
SERVER_SETTINGS = ("MORIA_MELTINGPOT_ASSETS",)


@pytest.fixture(autouse=True)
def _no_server_settings_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SERVER_SETTINGS:
        monkeypatch.delenv(name, raising=False)

pytest_plugins = ["tests.support.budget"]

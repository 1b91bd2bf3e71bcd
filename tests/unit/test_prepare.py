"""``moria prepare``: what a run needs is built once, reruns build nothing, failures say what
is missing and how to get it."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.apps.prepare import (
    DataItem,
    PrepareError,
    build_items,
    items_for_spec,
    sources_for,
)
from orchestrator.plan.spec import load_spec


def _quiet() -> Console:
    return Console(stderr=True, quiet=True)


def test_a_minihack_run_needs_exactly_the_boxoban_levels_its_seeds_pick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MORIA_BOXOBAN_LEVELS", raising=False)
    spec = load_spec(None, ["envs.names=minihack", "eval.num_episodes.minihack=2",
                            "agent.type=dummy"])
    items = items_for_spec(spec)
    # 2 Boxoban tasks x 2 episodes; the other six MiniHack tasks need no data; dummy: no model
    assert [i.source for i in items] == ["boxoban"] * 4
    assert {i.name.split("/")[0] for i in items} == {"hard", "medium"}
    first = build_items(items, console=_quiet(), show_progress=False)
    assert first.built == {"boxoban": 4} and first.present == {}
    assert len(list((tmp_path / "boxoban").rglob("*.txt"))) == 4
    again = build_items(items_for_spec(spec), console=_quiet(), show_progress=False)
    assert again.built == {} and again.present == {"boxoban": 4}


def test_official_boxoban_levels_or_remote_servers_need_nothing_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path))
    official = load_spec(None, ["envs.names=minihack", "agent.type=dummy",
                                f"envs.minihack_kwargs.boxoban_levels={tmp_path}"])
    assert items_for_spec(official) == []
    remote = load_spec(None, ["envs.names=minihack", "agent.type=dummy",
                              "endpoints.env.minihack=[127.0.0.1:1]",
                              "endpoints.policy=[127.0.0.1:2]"])
    assert items_for_spec(remote) == []


def test_the_local_model_is_needed_only_by_a_local_model_run() -> None:
    local = load_spec(None, ["envs.names=babyai"])
    assert [i.source for i in items_for_spec(local)] == ["local-model"]
    other = load_spec(None, ["envs.names=babyai", "client.client_name=openai"])
    assert items_for_spec(other) == []
    gguf = load_spec(None, ["envs.names=babyai", "client.model_id=/models/x.gguf"])
    assert items_for_spec(gguf) == []
    # players that call no model need no weights (prepare used to fetch them for these)
    for player in ("random", "scripted", "human", "dummy", "oracle"):
        assert items_for_spec(load_spec(None, ["envs.names=babyai",
                                               f"agent.type={player}"])) == [], player


def test_a_failed_build_names_the_item_and_the_fix() -> None:
    def fail() -> Path:
        raise OSError("disk full")

    item = DataItem("textworld", "coin_collector/03", lambda: False, fail,
                    "install moria[textworld]")
    with pytest.raises(PrepareError) as info:
        build_items([item], console=_quiet(), show_progress=False)
    message = str(info.value)
    assert "textworld coin_collector/03" in message and "disk full" in message
    assert "install moria[textworld]" in message


def test_sources_by_env_or_data_name() -> None:
    assert [s.name for s in sources_for(["minihack"])] == ["boxoban"]
    assert [s.name for s in sources_for(["textworld", "local-model"])] == [
        "textworld", "local-model"]
    assert sources_for(["babyai"]) == []  # a known env with nothing to build
    with pytest.raises(ValueError, match=r"allowed: .*boxoban"):
        sources_for(["chess"])


def test_prepare_sources_builds_missing_items_and_says_where(tmp_path: Path) -> None:
    from orchestrator.apps.prepare import Source, prepare_sources

    built: list[str] = []

    def item(name: str) -> DataItem:
        def build() -> Path:
            (tmp_path / name).write_text("x")
            built.append(name)
            return tmp_path / name
        return DataItem("demo", name, (tmp_path / name).exists, build)

    source = Source("demo", (), "demo data", lambda: [item("a"), item("b")], lambda: tmp_path)
    console = Console(record=True, width=200)
    first = prepare_sources([source], console=console, show_progress=False)
    assert first.built == {"demo": 2} and built == ["a", "b"]
    second = prepare_sources([source], console=console, show_progress=False)
    assert second.built == {} and second.present == {"demo": 2} and built == ["a", "b"]
    text = console.export_text()
    assert "demo data: 2 built now, 0 already there" in text
    assert "demo data: 0 built now, 2 already there" in text and str(tmp_path) in text

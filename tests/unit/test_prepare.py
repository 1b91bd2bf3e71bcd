"""``moria prepare``: what a run needs is built once, reruns build nothing, failures say what
is missing and how to get it. The orchestrator asks the servers' sides
(``python -m env_server.prepare``, ``python -m agent_server.prepare``) in subprocesses; these
tests run those real subprocesses (and, for the reporting, a stand-in speaking the protocol)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.apps import prepare
from orchestrator.apps.prepare import (
    DataItem,
    PrepareError,
    Source,
    build_items,
    items_for_spec,
    items_for_specs,
    prepare_sources,
    sources_for,
)
from orchestrator.plan.spec import load_spec


def _quiet() -> Console:
    return Console(stderr=True, quiet=True)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache root, no prebuilt TextWorld folder, no official Boxoban levels."""
    root = tmp_path / "cache"
    monkeypatch.setenv("MORIA_CACHE_DIR", str(root))
    monkeypatch.delenv("MORIA_TEXTWORLD_GAMES", raising=False)
    monkeypatch.delenv("MORIA_BOXOBAN_LEVELS", raising=False)
    return root


def test_a_minihack_run_needs_exactly_the_boxoban_levels_its_seeds_pick(cache: Path) -> None:
    spec = load_spec(None, ["envs.names=minihack", "eval.num_episodes.minihack=2",
                            "agent.type=dummy"])
    items = items_for_spec(spec)
    # 2 Boxoban tasks x 2 episodes; the other six MiniHack tasks need no data; dummy: no model
    assert [(i.source, i.built, i.server) for i in items] == [("boxoban", False, "env")] * 4
    assert {i.name.split("/")[0] for i in items} == {"hard", "medium"}
    assert all("MORIA_BOXOBAN_LEVELS" in i.how_to_fix for i in items)
    first = build_items(items, console=_quiet(), show_progress=False)
    assert first.built == {"boxoban": 4} and first.present == {}
    assert len(list((cache / "boxoban").rglob("*.txt"))) == 4
    listed = items_for_spec(spec)
    assert [i.name for i in listed] == [i.name for i in items]
    assert all(i.built for i in listed)
    again = build_items(listed, console=_quiet(), show_progress=False)
    assert again.built == {} and again.present == {"boxoban": 4}
    # an item listed as missing but built meanwhile (another process) counts as present
    stale = build_items(items[:1], console=_quiet(), show_progress=False)
    assert stale.built == {} and stale.present == {"boxoban": 1}


def test_a_textworld_run_needs_the_games_its_seeds_pick(cache: Path) -> None:
    spec = load_spec(None, ["envs.names=textworld", "tasks.textworld_tasks=[coin_collector]",
                            "eval.num_episodes.textworld=3", "agent.type=dummy"])
    items = items_for_spec(spec)
    # episode i plays game i (the seed is aligned to the 25-game cycle)
    assert [(i.source, i.name, i.built) for i in items] == [
        ("textworld", f"coin_collector/{n:02d}", False) for n in range(3)]
    assert "moria[textworld]" in items[0].how_to_fix


def test_official_boxoban_levels_or_remote_servers_need_nothing_built(
    cache: Path, tmp_path: Path
) -> None:
    official = load_spec(None, ["envs.names=minihack", "agent.type=dummy",
                                f"envs.minihack_kwargs.boxoban_levels={tmp_path}"])
    assert items_for_spec(official) == []
    remote = load_spec(None, ["envs.names=minihack", "agent.type=dummy",
                              "endpoints.env.minihack=[127.0.0.1:1]",
                              "endpoints.policy=[127.0.0.1:2]"])
    assert items_for_spec(remote) == []


def test_the_local_model_is_needed_only_by_a_local_model_run(cache: Path) -> None:
    local = load_spec(None, ["envs.names=babyai"])
    [model] = items_for_spec(local)
    assert (model.source, model.name, model.built, model.server) == (
        "local-model", "qwen2.5-0.5b-instruct", False, "agent")
    alias = load_spec(None, ["envs.names=babyai", "client.model_id=qwen2.5-coder-0.5b-instruct"])
    assert items_for_specs([local, alias]) == [model]  # one item for both names
    other = load_spec(None, ["envs.names=babyai", "client.client_name=openai"])
    assert items_for_spec(other) == []
    gguf = load_spec(None, ["envs.names=babyai", "client.model_id=/models/x.gguf"])
    assert items_for_spec(gguf) == []
    # players that call no model need no weights (prepare used to fetch them for these)
    for player in ("random", "scripted", "human", "dummy", "oracle"):
        assert items_for_spec(load_spec(None, ["envs.names=babyai",
                                               f"agent.type={player}"])) == [], player


def test_a_failed_build_names_the_item_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("MORIA_CACHE_DIR", str(blocker))  # nothing can be written under it
    monkeypatch.delenv("MORIA_TEXTWORLD_GAMES", raising=False)
    item = DataItem("textworld", "coin_collector/03", False)
    with pytest.raises(PrepareError) as info:
        build_items([item], console=_quiet(), show_progress=False)
    message = str(info.value)
    assert message.startswith("could not build textworld coin_collector/03: ")
    assert "cannot build TextWorld game coin_collector #3" in message
    assert "pip install 'moria[textworld]'" in message  # the family's own fix


def test_an_unknown_item_is_refused_by_its_family() -> None:
    with pytest.raises(PrepareError, match=r"boxoban medium/5000: no Boxoban level"):
        build_items([DataItem("boxoban", "medium/5000", False)], console=_quiet(),
                    show_progress=False)


def test_sources_by_env_or_data_name() -> None:
    assert [s.name for s in sources_for(["minihack"])] == ["boxoban"]
    assert [s.name for s in sources_for(["textworld", "local-model"])] == [
        "textworld", "local-model"]
    assert sources_for(["babyai"]) == []  # a known env with nothing to build
    with pytest.raises(ValueError, match=r"allowed: .*boxoban"):
        sources_for(["chess"])
    # the families' sources come from their manifests, the model from the agent server
    assert prepare.SOURCES["boxoban"] == Source("boxoban", ("minihack",), "env")
    assert prepare.SOURCES["local-model"].server == "agent"


#: A stand-in for ``python -m env_server.prepare`` speaking the same protocol: source ``demo``
#: with items ``a`` and ``b`` (files in $DEMO_DIR), item ``bad`` fails, item ``crash`` kills
#: the process without a word on standard output.
FAKE_SERVER = '''
import json, os, sys
from pathlib import Path

folder = Path(os.environ["DEMO_DIR"])
command = sys.argv[1]
if command == "sources":
    print(json.dumps({"source": "demo", "description": "demo data", "location": str(folder)}))
elif command == "list":
    for name in ("a", "b"):
        print(json.dumps({"source": "demo", "name": name,
                          "built": (folder / name).exists(), "how_to_fix": "run make demo"}))
elif command == "build":
    for line in sys.stdin.read().splitlines():
        name = json.loads(line)["name"]
        if name == "crash":
            sys.stderr.write("Traceback: demo builder crashed\\n")
            sys.exit(3)
        if name == "bad":
            print(json.dumps({"source": "demo", "name": name, "built": False,
                              "error": "disk full", "how_to_fix": "run make demo"}))
            sys.exit(1)
        already = (folder / name).exists()
        (folder / name).write_text("x")
        print(json.dumps({"source": "demo", "name": name, "built": True, "already": already,
                          "path": str(folder / name)}), flush=True)
'''


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in as the env side; returns the folder its items go to."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "fake_prepare_server.py").write_text(textwrap.dedent(FAKE_SERVER))
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("PYTHONPATH", str(code))
    monkeypatch.setenv("DEMO_DIR", str(data))
    monkeypatch.setitem(prepare.SERVER_MODULES, "env", "fake_prepare_server")
    return data


def test_prepare_sources_builds_missing_items_and_says_where(fake_server: Path) -> None:
    source = Source("demo", ())
    console = Console(record=True, width=200)
    first = prepare_sources([source], console=console, show_progress=False)
    assert first.built == {"demo": 2} and first.present == {}
    assert sorted(p.name for p in fake_server.iterdir()) == ["a", "b"]
    second = prepare_sources([source], console=console, show_progress=False)
    assert second.built == {} and second.present == {"demo": 2}
    text = console.export_text()
    assert "demo data: 2 built now, 0 already there" in text
    assert "demo data: 0 built now, 2 already there" in text and str(fake_server) in text


def test_a_failure_reported_by_the_side_stops_the_build(fake_server: Path) -> None:
    items = [DataItem("demo", "a", False), DataItem("demo", "bad", False),
             DataItem("demo", "b", False)]
    with pytest.raises(PrepareError) as info:
        build_items(items, console=_quiet(), show_progress=False)
    assert str(info.value) == "could not build demo bad: disk full (run make demo)"
    assert sorted(p.name for p in fake_server.iterdir()) == ["a"]  # b was not attempted


def test_a_crashed_side_names_the_item_and_its_error_output(fake_server: Path) -> None:
    items = [DataItem("demo", "a", False), DataItem("demo", "crash", False, "reinstall")]
    with pytest.raises(PrepareError) as info:
        build_items(items, console=_quiet(), show_progress=False)
    message = str(info.value)
    assert message.startswith("could not build demo crash: python -m fake_prepare_server "
                              "build exited with status 3")
    assert "demo builder crashed" in message and message.endswith("(reinstall)")

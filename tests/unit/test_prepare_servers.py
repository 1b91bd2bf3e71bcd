"""The servers' sides of ``moria prepare``, run as the orchestrator runs them
(``python -m env_server.prepare``, ``python -m agent_server.prepare``): JSON lines out, items
declared by the families' own ``prepare`` modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from env_server.families import discover
from env_server.prepare import family_sources

REPO = Path(__file__).resolve().parents[2]


def _run(module: str, args: list[str], cache: Path, stdin: str = "") -> tuple[
        int, list[dict[str, Any]], str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MORIA_TEXTWORLD_GAMES", "MORIA_BOXOBAN_LEVELS")}
    env["MORIA_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-m", module, *args], input=stdin, cwd=REPO,
                          env=env, capture_output=True, text=True, check=False)
    return (done.returncode, [json.loads(line) for line in done.stdout.splitlines()],
            done.stderr)


def test_every_family_data_source_is_defined_in_its_folder() -> None:
    sources = family_sources()
    for manifest in discover():
        assert [s.name for s in sources[manifest.name]] == list(manifest.prepare)
        for source in sources[manifest.name]:
            assert source.all_items(), source.name
            assert source.description and source.how_to_fix


def test_the_env_side_lists_what_episodes_read_and_builds_it(tmp_path: Path) -> None:
    episodes = [{"env": "textworld", "task": "coin_collector", "seed": 28},
                {"env": "minihack", "task": "MiniHack-Boxoban-Medium-v0", "seed": 1007},
                {"env": "minihack", "task": "MiniHack-Boxoban-Medium-v0", "seed": 7},
                {"env": "minihack", "task": "MiniHack-Boxoban-Hard-v0", "seed": 7,
                 "options": {"boxoban_levels": str(tmp_path)}},
                {"env": "minihack", "task": "MiniHack-MazeWalk-9x9-v0", "seed": 7},
                {"env": "babyai", "task": "BabyAI-GoToObj-v0", "seed": 7}]
    request = "".join(json.dumps(e) + "\n" for e in episodes)
    code, items, _ = _run("env_server.prepare", ["list", "--episodes", "-"], tmp_path, request)
    # game 28 mod 25; level 1007 mod 1000 = 7 once; an official level set needs nothing
    assert code == 0
    assert [(i["source"], i["name"], i["built"]) for i in items] == [
        ("textworld", "coin_collector/03", False), ("boxoban", "medium/0007", False)]

    code, done, _ = _run("env_server.prepare", ["build"], tmp_path,
                         json.dumps({"source": "boxoban", "name": "medium/0007"}) + "\n")
    assert code == 0
    assert [(d["name"], d["built"], d["already"]) for d in done] == [("medium/0007", True, False)]
    assert (tmp_path / "boxoban" / "v1" / "medium" / "000007.txt").is_file()
    code, items, _ = _run("env_server.prepare", ["list", "--episodes", "-"], tmp_path, request)
    assert [i["built"] for i in items] == [False, True]


def test_the_env_side_lists_and_describes_a_family_s_sources(tmp_path: Path) -> None:
    code, items, _ = _run("env_server.prepare", ["list", "--family", "textworld"], tmp_path)
    assert code == 0 and len(items) == 75 and not any(i["built"] for i in items)
    assert items[0]["name"] == "treasure_hunter/00"
    code, about, _ = _run("env_server.prepare", ["sources", "--source", "boxoban"], tmp_path)
    assert about == [{"source": "boxoban", "families": ["minihack"],
                      "description": "Boxoban levels (2 x 1000)",
                      "location": str(tmp_path / "boxoban")}]
    code, items, _ = _run("env_server.prepare", ["list", "--family", "babyai"], tmp_path)
    assert (code, items) == (0, [])  # a family with nothing to build


@pytest.mark.parametrize(("args", "stdin", "said"), [
    (["list", "--family", "chess"], "", "unknown family 'chess'"),
    (["list", "--episodes", "-"], "not json\n", "line 1: not JSON"),
    (["build"], '{"source": "nope", "name": "x"}\n', "unknown data source 'nope'"),
])
def test_the_env_side_refuses_a_bad_request(tmp_path: Path, args: list[str], stdin: str,
                                            said: str) -> None:
    code, out, err = _run("env_server.prepare", args, tmp_path, stdin)
    assert (code, out) == (2, []) and said in err


def test_the_agent_side_lists_the_weights_a_model_needs(tmp_path: Path) -> None:
    code, items, _ = _run("agent_server.prepare",
                          ["list", "--model=", "--model=qwen2.5-coder-0.5b-instruct",
                           "--model=/x.gguf", "--model=smollm2-135m-instruct"], tmp_path)
    assert code == 0
    assert [(i["source"], i["name"], i["built"]) for i in items] == [
        ("local-model", "qwen2.5-0.5b-instruct", False)]
    code, about, _ = _run("agent_server.prepare", ["sources"], tmp_path)
    assert about[0]["location"] == str(tmp_path / "models")
    code, _, err = _run("agent_server.prepare", ["build"], tmp_path,
                        '{"source": "local-model", "name": "other"}\n')
    assert code == 2 and "qwen2.5-0.5b-instruct" in err

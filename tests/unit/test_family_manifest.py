"""Family manifests: discovery from the family folders, and the generated moria/families.json
that everything outside the env server reads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import env_server.families as package
from env_server.families.manifest import discover
from moria import families
from moria.families import FamilyManifest, table_text


def test_the_generated_table_is_what_the_manifests_declare() -> None:
    assert families.TABLE_PATH.read_text(encoding="utf-8") == table_text(discover())
    assert set(families.families()) == set(package.FAMILIES)


def test_suite_facts_come_from_the_manifests() -> None:
    assert families.suite_envs("balrog") == (
        "babyai", "crafter", "textworld", "babaisai", "minihack", "nle")
    assert families.suite_envs("mosaic")[:2] == ("multigrid", "pettingzoo")
    assert families.seed_cycles() == {"textworld": 25}
    assert families.oracle_sources()["babyai"] == "babyai-bot"
    assert len(families.default_tasks("babaisai")) == 40
    assert families.episodes_per_task("minihack") == 5
    assert families.default_tasks("no-such-env") == []


def test_a_new_family_folder_is_discovered_with_nothing_else_touched(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "toyfamily"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "manifest.py").write_text(
        "from moria.families import FamilyManifest, SuiteEntry\n"
        "MANIFESTS = [FamilyManifest(name='toy', entry_point='x.y:Toy', "
        "suites={'mosaic': SuiteEntry(position=9, default_tasks=('t1',), "
        "episodes_per_task=2)}, report_kind='two_player')]\n")
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    found = {m.name: m for m in discover()}
    assert found["toy"].entry_point == "x.y:Toy"
    assert found["toy"].suites["mosaic"].default_tasks == ("t1",)
    sys.modules.pop("env_server.families.toyfamily", None)
    sys.modules.pop("env_server.families.toyfamily.manifest", None)


def test_the_table_round_trips() -> None:
    for manifest in families.families().values():
        assert FamilyManifest.from_json(manifest.as_json()) == manifest


def test_server_environment_maps_listed_options_to_the_env_servers_variables() -> None:
    assert families.families()["meltingpot"].server_env == {
        "assets": "MORIA_MELTINGPOT_ASSETS"}
    found = families.server_environment({
        "meltingpot": {"assets": "/data/mp.tar.gz"}, "babyai": {"num_dists": 2},
        "no_such_env": {"assets": "x"}})
    assert found == {"MORIA_MELTINGPOT_ASSETS": "/data/mp.tar.gz"}
    assert families.server_environment({"meltingpot": {"assets": ""}}) == {}
    assert families.server_environment({"meltingpot": {}}) == {}


def test_only_path_like_prefixes_are_completed_from_a_bare_name() -> None:
    assert families.resolve_task("babaisai", "goto_win") == "env/goto_win"
    # commons_harvest__, go_: word starts, not paths: the name is left for the server to judge
    assert families.resolve_task("meltingpot", "open") == "open"
    assert families.resolve_task("pettingzoo", "v5") == "v5"
    assert families.resolve_task("meltingpot", "repeated") == "repeated"

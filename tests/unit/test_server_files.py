"""``moria.server_files``: what a server offers (NAME=PATH entries and folders) and how a
client's name resolves, from the flags a server is started with."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from moria import server_files
from moria.server_files import ServerFileError, ServerFiles

KINDS = ("balrog_source", "prices")


def parsed(*argv: str, address: str = "127.0.0.1:0") -> ServerFiles:
    parser = argparse.ArgumentParser()
    server_files.add_arguments(parser, KINDS)
    return ServerFiles.from_args(parser.parse_args(list(argv)), KINDS, address=address)


@pytest.fixture
def offered(tmp_path: Path) -> dict[str, Path]:
    pinned = tmp_path / "srv" / "balrog-checkout"
    pinned.mkdir(parents=True)
    folder = tmp_path / "checkouts"
    (folder / "upstream").mkdir(parents=True)
    table = tmp_path / "lab-prices.yaml"
    table.write_text("as_of: x\n")
    return {"pinned": pinned, "folder": folder, "table": table}


def test_named_entries_and_a_folder_resolve_by_name(offered: dict[str, Path]) -> None:
    files = parsed("--balrog-sources", f"pinned={offered['pinned']}",
                   "--balrog-sources", str(offered["folder"]),
                   "--prices-dir", f"lab.yaml={offered['table']}")
    assert files.resolve("balrog_source", "pinned", "agent.balrog_source") == str(
        offered["pinned"])
    assert files.resolve("balrog_source", "upstream", "agent.balrog_source") == str(
        offered["folder"] / "upstream")
    assert files.resolve("prices", "lab.yaml", "eval.prices") == str(offered["table"])
    with pytest.raises(ServerFileError) as missing:
        files.resolve("balrog_source", "other", "agent.balrog_source")
    assert str(missing.value) == (
        "agent.balrog_source 'other' is not offered by this server (its --balrog-sources "
        "offers no such BALROG checkout); offered: 'pinned', 'upstream'")
    again = server_files.args_for(files)
    assert again == ["--balrog-sources", str(offered["folder"]),
                     "--balrog-sources", f"pinned={offered['pinned']}",
                     "--prices-dir", f"lab.yaml={offered['table']}"]
    assert parsed(*again) == files


def test_a_path_gets_the_same_answer_whether_or_not_it_exists(
        offered: dict[str, Path]) -> None:
    files = parsed("--balrog-sources", f"pinned={offered['pinned']}")
    answers = []
    for path in (offered["pinned"], offered["pinned"].parent / "absent"):
        with pytest.raises(ServerFileError) as refused:
            files.resolve("balrog_source", str(path), "agent.balrog_source")
        answers.append(str(refused.value).partition(" is not ")[2])  # past the quoted path
    assert answers[0] == answers[1]
    assert "never a path" in answers[0] and "--balrog-sources" in answers[0]
    with pytest.raises(ServerFileError, match=r"offers none \(it runs without --prices-dir"):
        files.resolve("prices", "lab.yaml", "eval.prices")


@pytest.mark.parametrize(("argv", "message"), [
    (["--balrog-sources", "pinned={missing}"], "does not exist"),
    (["--prices-dir", "lab.txt={table}"], "ending .yaml or .yml"),
    (["--balrog-sources", "a={pinned}", "--balrog-sources", "a={pinned}"], "offered twice"),
    (["--balrog-sources", "{folder}", "--balrog-sources", "{pinned}"], "a second folder"),
    (["--balrog-sources", "{missing}"], "not a folder"),
])
def test_bad_flags_stop_the_server_with_what_is_wrong(
        offered: dict[str, Path], tmp_path: Path, argv: list[str], message: str) -> None:
    values = {**{k: str(v) for k, v in offered.items()}, "missing": str(tmp_path / "none")}
    with pytest.raises(SystemExit) as stopped:
        parsed(*(a.format(**values) for a in argv))
    assert message in str(stopped.value)


def test_client_paths_only_on_a_unix_socket() -> None:
    with pytest.raises(SystemExit, match="only for a server on a unix socket"):
        parsed("--client-paths")
    files = parsed("--client-paths", address="unix:///tmp/x.sock")
    assert files.resolve("balrog_source", "/any/where", "agent.balrog_source") == "/any/where"

"""Files a server opens because a client named them: only by a name the server offers.

A client of a Moria server (an orchestrator talking to an env or agent server, anyone calling
``SubmitRun``) may ask for a BALROG checkout, a model file, an RL checkpoint, a demonstration
folder, a price table, TLS files, Melting Pot's assets or Boxoban levels. Each is a *server
file*: the server's operator offers them with a flag per kind (:data:`FILE_KINDS`), given
once or more, each time either ``NAME=PATH`` (one file or folder offered as ``NAME``, e.g.
``--balrog-sources pinned=/srv/balrog``) or a folder (each of its entries offered by its own
name), and a client names one by its plain name (letters, digits, ``.``, ``_``, ``-``; no
``/``, not starting with ``.``). Anything else is refused from the name alone, before any
file is touched, so the answer is the same whether or not such a path exists, and no server
ever imports code from, or parses, a place a client chose.

The one exception is a server only its owner can reach: the local stack that ``moria eval``
starts on a private unix socket (``orchestrator.core.stack``) is started with
``--client-paths``, and takes paths as given (the user owns the machine). A server refuses
``--client-paths`` on any address but a unix socket.

:class:`ServerFiles` holds a server's folders and resolves names; :func:`add_arguments` and
:meth:`ServerFiles.from_args` give its flags. Every error is a :class:`ServerFileError` whose
message names the field, the flag that offers the kind and, for a plain name the folder lacks,
the names it offers.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Final

from moria.quoting import quote, quote_names


@dataclass(frozen=True)
class FileKind:
    """One kind of server file: the flag that offers its folder, what an entry is, and the
    suffixes a name must end with (empty: any)."""

    flag: str
    what: str
    suffixes: tuple[str, ...] = ()


#: Every kind of server file, by the name the option schemas and configs use.
FILE_KINDS: Final[dict[str, FileKind]] = {
    "balrog_source": FileKind("--balrog-sources", "BALROG checkout"),
    "model": FileKind("--models-dir", "model file (a GGUF, or a vLLM model folder)"),
    "checkpoint": FileKind("--checkpoints-dir", "RL checkpoint (.npz)"),
    "demos": FileKind("--demos-dir", "demonstration folder"),
    "prices": FileKind("--prices-dir", "price table (YAML)", (".yaml", ".yml")),
    "tls": FileKind("--client-tls-dir", "PEM file (a CA, a client certificate or its key)"),
    "meltingpot_assets": FileKind("--meltingpot-assets",
                                  "Melting Pot assets tarball or folder"),
    "boxoban_levels": FileKind("--boxoban-levels", "Boxoban level folder"),
}

#: A name a client may give: a plain file name, 1 to 128 characters, no path separator, not
#: starting with '.' (so never '.' or '..').
NAME_PATTERN: Final[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
#: ``agent.balrog_source`` naming the balrog package installed beside the server (the
#: server's own environment, so the server's choice): always allowed.
INSTALLED = "installed"
#: How many offered names an error lists.
OFFERED_SHOWN: Final[int] = 20


class ServerFileError(ValueError):
    """A client named a server file the server does not offer (the message says how to name
    one it does)."""


@dataclass(frozen=True)
class ServerFiles:
    """What a server offers, by kind (``FILE_KINDS``): ``folders``, kind -> a folder whose
    entries are offered by their names; ``entries``, kind -> {name: path} offered one by one
    (``NAME=PATH`` flags; a name here wins over a folder's entry of the same name); and
    whether it takes client paths as given (``client_paths``: only for a server reached by
    its owner alone, the local stack on a private unix socket). Raises ValueError for an
    unknown kind or an entry name a client could not give (``NAME_PATTERN``)."""

    folders: Mapping[str, Path] = field(default_factory=dict)
    client_paths: bool = False
    entries: Mapping[str, Mapping[str, Path]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted((set(self.folders) | set(self.entries)) - set(FILE_KINDS))
        if unknown:
            raise ValueError(f"unknown server file kind {unknown[0]!r}; kinds: "
                             + ", ".join(FILE_KINDS))
        for kind, named in self.entries.items():
            for name in named:
                if not _is_name(kind, name):
                    raise ValueError(f"{FILE_KINDS[kind].flag} {name}=...: {_NAME_RULE}"
                                     + _ending(kind))

    def offers(self, kind: str) -> bool:
        """Whether the server offers any file of ``kind`` (a folder or a named entry)."""
        return kind in self.folders or bool(self.entries.get(kind))

    def resolve(self, kind: str, value: str, field_name: str) -> str:
        """The path ``value`` stands for: with ``client_paths`` the value itself; else the
        entry ``value`` of the folder offered for ``kind``. Decided from the name first (a
        path, an empty or odd name, a kind not offered: refused without touching a file),
        then the entry must exist in the folder (an error lists the names it offers).
        ``field_name`` names the field in messages (``agent.balrog_source``). Raises
        ServerFileError."""
        spec = FILE_KINDS[kind]
        if self.client_paths:
            return value
        if not self.offers(kind):
            raise ServerFileError(
                f"{field_name} names a server file ({spec.what}), but this server offers "
                f"none (it runs without {spec.flag}); a client names server files only by "
                "the names the server offers")
        if not _is_name(kind, value):
            raise ServerFileError(
                f"{field_name} {quote(value, 80)} is not a name the server offers: give a "
                f"name it offers with {spec.flag} ({_NAME_RULE}{_ending(kind)}), never a path")
        named = self.entries.get(kind, {}).get(value)
        if named is not None:
            return str(named)
        folder = self.folders.get(kind)
        if folder is None or not (folder / value).exists():
            raise ServerFileError(
                f"{field_name} {quote(value, 80)} is not offered by this server (its "
                f"{spec.flag} offers no such {spec.what}); offered: "
                f"{self.offered_names(kind) or 'none'}")
        return str(folder / value)

    def offered_names(self, kind: str) -> str:
        """The names offered for ``kind``, named entries and the folder's (the first
        ``OFFERED_SHOWN``, sorted), quoted; '' when none or not offered."""
        names = set(self.entries.get(kind, {}))
        folder = self.folders.get(kind)
        if folder is not None and folder.is_dir():
            names.update(islice((p.name for p in folder.iterdir() if _is_name(kind, p.name)),
                                1000))
        return quote_names(sorted(names), OFFERED_SHOWN) if names else ""

    def describe(self) -> str:
        """What is offered, in one line, for the server's start-up log."""
        if self.client_paths:
            return "client paths taken as given"
        offered = [f"{FILE_KINDS[k].flag} {v}" for k, v in sorted(self.folders.items())]
        offered += [f"{FILE_KINDS[k].flag} {name}={path}"
                    for k, named in sorted(self.entries.items())
                    for name, path in sorted(named.items())]
        return ", ".join(offered) or "no server files offered"

    @classmethod
    def from_args(cls, args: argparse.Namespace, kinds: Iterable[str], *,
                  address: str = "") -> ServerFiles:
        """The settings of :func:`add_arguments`' flags for ``kinds``. Raises SystemExit for
        a folder or a ``NAME=PATH`` path that does not exist, a name a client could not give,
        the same name twice, two folders for one kind, or ``--client-paths`` on an address
        that is not a unix socket (anyone who can reach a TCP port could name the server's
        files)."""
        folders: dict[str, Path] = {}
        entries: dict[str, dict[str, Path]] = {}
        for kind in kinds:
            flag = FILE_KINDS[kind].flag
            for value in getattr(args, _dest(kind), None) or ():
                name, sep, given = value.partition("=")
                if sep and NAME_PATTERN.match(name):
                    path = Path(given).expanduser().resolve()
                    if not _is_name(kind, name):
                        raise SystemExit(f"{flag} {value}: the name must be {_NAME_RULE}"
                                         + _ending(kind))
                    if not path.exists():
                        raise SystemExit(f"{flag} {value}: {given} does not exist")
                    if name in entries.setdefault(kind, {}):
                        raise SystemExit(f"{flag} {value}: the name {name} is offered twice")
                    entries[kind][name] = path
                    continue
                folder = Path(value).expanduser().resolve()
                if not folder.is_dir():
                    raise SystemExit(f"{flag} {value}: not a folder (give a folder, whose "
                                     "entries are offered by their names, or NAME=PATH)")
                if kind in folders:
                    raise SystemExit(f"{flag} {value}: a second folder (one folder per kind; "
                                     "offer more by NAME=PATH)")
                folders[kind] = folder
        client_paths = bool(getattr(args, "client_paths", False))
        if client_paths and not address.startswith("unix:"):
            raise SystemExit("--client-paths is only for a server on a unix socket (the local "
                             "stack); on a TCP address offer folders by name instead ("
                             + ", ".join(FILE_KINDS[k].flag for k in kinds) + ")")
        return cls(folders, client_paths, entries)


def add_arguments(parser: Any, kinds: Iterable[str], *, client_paths: bool = True) -> None:
    """The flags offering ``kinds`` of server files (``FILE_KINDS``), and, with
    ``client_paths``, ``--client-paths``."""
    for kind in kinds:
        spec = FILE_KINDS[kind]
        parser.add_argument(spec.flag, dest=_dest(kind), action="append", default=None,
                            metavar="NAME=PATH|DIR",
                            help=f"a {spec.what} clients may name as NAME, or a folder of "
                            "them offered by their names in it; repeat to offer more "
                            "(default: none)")
    if client_paths:
        parser.add_argument("--client-paths", action="store_true",
                            help="take the paths clients give as they are (only on a unix "
                            "socket: the local stack that moria eval starts for its user)")


def args_for(files: ServerFiles) -> list[str]:
    """The command-line flags that give a server started by this one the same settings."""
    out = ["--client-paths"] if files.client_paths else []
    for kind, folder in sorted(files.folders.items()):
        out += [FILE_KINDS[kind].flag, str(folder)]
    for kind, named in sorted(files.entries.items()):
        for name, path in sorted(named.items()):
            out += [FILE_KINDS[kind].flag, f"{name}={path}"]
    return out


def names_a_model_file(client_name: str, model_id: str | None, base_url: str | None) -> bool:
    """Whether ``client.model_id`` names a model file of the policy server: a ``.gguf`` name
    (``local``, and ``llamacpp`` without a ``base_url``), or a path for vLLM's in-process
    engine (``vllm`` without a ``base_url``, a model id starting with ``/``, ``.`` or ``~``;
    a Hugging Face id like ``org/name`` is not one)."""
    if not model_id:
        return False
    if model_id.endswith(".gguf") and client_name in ("local", "llamacpp") and not base_url:
        return True
    return client_name == "vllm" and not base_url and model_id.startswith(("/", ".", "~"))


#: What a name a client gives must be, for messages.
_NAME_RULE = "letters, digits, '.', '_', '-', not starting with '.'"


def _is_name(kind: str, name: str) -> bool:
    """Whether ``name`` is a name a client may give for ``kind``: ``NAME_PATTERN`` and, for a
    kind with suffixes, ending with one."""
    return bool(NAME_PATTERN.match(name)) and name.endswith(FILE_KINDS[kind].suffixes or ("",))


def _ending(kind: str) -> str:
    suffixes = FILE_KINDS[kind].suffixes
    return f", ending {' or '.join(suffixes)}" if suffixes else ""


def _dest(kind: str) -> str:
    return "offer_" + kind

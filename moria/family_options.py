"""Family options as data: the schema a family's manifest declares, and its validation.

Each family's manifest (``moria.families.FamilyManifest``) lists every option it accepts in
``options`` (the run spec's ``envs.<family>_kwargs``, an Open's ``options`` Struct) and every
seat option in ``player_options`` (``PlayerSpec.options``), each an :class:`OptionSpec`: its
kind, allowed values or range, default and a one-line help. Nothing else is accepted: an
option a schema does not list never reaches a game, so no client input becomes a keyword of a
game constructor unless the family declares it (render modes, for one, are the server's
choice, never a client's).

:func:`check_options` is the one validation, used by the env server before it constructs
anything (``env_server.service``), by each family's ``open`` (so a family opened directly is
held to the same schema), and by the run spec (``orchestrator.plan.spec``), so a bad option
fails before any server starts. It is linear in the number of options given, refuses more
than :data:`MAX_OPTION_KEYS` of them before looking at any, reports at most
:data:`MAX_PROBLEMS` problems, and quotes client input only through ``moria.quoting``.

Kinds (:data:`OptionKind`):

- ``integer``: a whole number in ``[low, high]`` (JSON numbers arrive as floats: 3.0 is 3);
- ``number``: any finite number in ``[low, high]``;
- ``boolean``: true or false (nothing else: not 0/1, not "true");
- ``choice``: one of ``values``;
- ``text``: a string of at most ``high`` characters (the family checks its meaning);
- ``pair``: two integers ``[a, b]``, each in ``[low, high]``;
- ``names``: a list of distinct names from ``values`` (duplicates dropped, order kept);
- ``fixed``: only ``values[0]`` (a key BALROG's configs carry that has one meaning here);
- ``server_path``: the name of a file or folder the *server* offers (``moria.server_files``,
  kind ``path_kind``); the schema checks only that it is a non-empty string, the server
  resolves it.

Every error is an :class:`OptionError` whose message names the key, the value given (quoted,
bounded) and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from itertools import islice
from typing import Any, Final, Literal, get_args

from moria.quoting import quote, quote_names

OptionKind = Literal["integer", "number", "boolean", "choice", "text", "pair", "names",
                     "fixed", "server_path"]
OPTION_KINDS: Final[tuple[str, ...]] = get_args(OptionKind)

#: The most option keys one Open (or one seat) may carry; no family declares more than 12.
#: A request with more is refused before any key is looked at.
MAX_OPTION_KEYS: Final[int] = 64
#: How many problems one error message names before it says how many more there are.
MAX_PROBLEMS: Final[int] = 10
#: Longest ``text`` or ``server_path`` value (characters) unless the spec says less.
MAX_TEXT_CHARS: Final[int] = 4096
#: How many characters of a value an error message shows.
QUOTED_VALUE_CHARS: Final[int] = 64


class OptionError(ValueError):
    """An option the schema refuses; the message names the key, the value and what is
    allowed (client input quoted with ``moria.quoting``)."""


@dataclass(frozen=True)
class OptionSpec:
    """One option a family accepts (module docstring: the kinds).

    ``default``: the value filled in when the option is not given (None: not filled in; the
    family then decides, e.g. from another option). ``low``/``high``: the inclusive range of
    ``integer``, ``number`` and each ``pair`` member; ``high`` is the longest ``text``.
    ``values``: the allowed values of ``choice`` and ``names``, the one value of ``fixed``.
    ``tasks``: the tasks that take this option (empty: every task of the family).
    ``path_kind``: for ``server_path``, the kind of server file (``moria.server_files``)."""

    kind: OptionKind
    help: str
    default: Any = None
    low: float | None = None
    high: float | None = None
    values: tuple[Any, ...] = ()
    tasks: tuple[str, ...] = ()
    path_kind: str = ""

    def __post_init__(self) -> None:
        if self.kind not in OPTION_KINDS:
            raise ValueError(f"unknown option kind {self.kind!r}; kinds: {OPTION_KINDS}")
        if self.kind == "server_path" and not self.path_kind:
            raise ValueError("a server_path option needs its path_kind")

    def applies_to(self, task: str | None) -> bool:
        """Whether ``task`` takes this option (None: any task, for checks without one)."""
        return task is None or not self.tasks or task in self.tasks

    def allowed(self) -> str:
        """What the option accepts, in words (for errors and docs)."""
        if self.kind in ("integer", "number"):
            what = "an integer" if self.kind == "integer" else "a number"
            return f"{what} in [{_num(self.low)}, {_num(self.high)}]"
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(str(v) for v in self.values)
        if self.kind == "text":
            return f"a string of at most {int(self.high or MAX_TEXT_CHARS)} characters"
        if self.kind == "pair":
            return (f"two integers [a, b], each in [{_num(self.low)}, {_num(self.high)}]")
        if self.kind == "names":
            return "a list of names from " + ", ".join(str(v) for v in self.values)
        if self.kind == "fixed":
            return _json_text(self.values[0])
        return f"the name of a {self.path_kind} the server offers"

    def check(self, key: str, value: Any) -> Any:
        """``value`` as the family reads it (an ``integer`` as int, a ``pair`` as a tuple, a
        ``names`` list deduplicated). Raises OptionError naming ``key``, the value and what
        is allowed."""
        checker = _CHECKS[self.kind]
        ok, normal = checker(self, value)
        if not ok:
            raise OptionError(f"{key}: must be {self.allowed()}; got "
                              f"{quote(_json_text(value), QUOTED_VALUE_CHARS)}")
        return normal

    def as_json(self) -> dict[str, Any]:
        """The JSON form stored in ``families.json`` (defaults left out)."""
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()
                if v not in (None, (), "") or k in ("kind", "help")}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OptionSpec:
        """Parse :meth:`as_json`'s form."""
        default = data.get("default")
        return cls(kind=data["kind"], help=str(data.get("help", "")),
                   default=tuple(default) if isinstance(default, list) else default,
                   low=data.get("low"), high=data.get("high"),
                   values=tuple(data.get("values", ())), tasks=tuple(data.get("tasks", ())),
                   path_kind=str(data.get("path_kind", "")))


# ---- constructors, for manifests -----------------------------------------------------------

def integer(help: str, default: int | None, low: int, high: int, *,
            tasks: tuple[str, ...] = ()) -> OptionSpec:
    """An ``integer`` option in [low, high]."""
    return OptionSpec("integer", help, default, low, high, tasks=tasks)


def number(help: str, default: float | None, low: float, high: float, *,
           tasks: tuple[str, ...] = ()) -> OptionSpec:
    """A ``number`` option in [low, high]."""
    return OptionSpec("number", help, default, low, high, tasks=tasks)


def boolean(help: str, default: bool | None, *, tasks: tuple[str, ...] = ()) -> OptionSpec:
    """A ``boolean`` option."""
    return OptionSpec("boolean", help, default, tasks=tasks)


def choice(help: str, default: str | None, values: Iterable[str], *,
           tasks: tuple[str, ...] = ()) -> OptionSpec:
    """A ``choice`` option among ``values``."""
    return OptionSpec("choice", help, default, values=tuple(values), tasks=tasks)


def text(help: str, *, max_chars: int = 64, tasks: tuple[str, ...] = ()) -> OptionSpec:
    """A ``text`` option of at most ``max_chars`` characters (no default)."""
    return OptionSpec("text", help, None, high=max_chars, tasks=tasks)


def pair(help: str, default: tuple[int, int], low: int, high: int) -> OptionSpec:
    """A ``pair`` option: two integers in [low, high]."""
    return OptionSpec("pair", help, default, low, high)


def names(help: str, values: Iterable[str]) -> OptionSpec:
    """A ``names`` option: a list of distinct names from ``values`` (default empty)."""
    return OptionSpec("names", help, (), values=tuple(values))


def fixed(help: str, value: Any) -> OptionSpec:
    """A ``fixed`` option: only ``value`` is accepted (nothing filled in when absent)."""
    return OptionSpec("fixed", help, None, values=(value,))


def server_path(help: str, path_kind: str) -> OptionSpec:
    """A ``server_path`` option naming a server file of ``path_kind``."""
    return OptionSpec("server_path", help, None, high=MAX_TEXT_CHARS, path_kind=path_kind)


# ---- validation ----------------------------------------------------------------------------

def check_key_count(count: int, where: str = "options") -> None:
    """Refuse more than ``MAX_OPTION_KEYS`` keys (before any key or value is read: a count is
    all it needs). Raises OptionError."""
    if count > MAX_OPTION_KEYS:
        raise OptionError(f"{where}: {count:,} keys given; a family takes at most "
                          f"{MAX_OPTION_KEYS}")


def unknown_keys(schema: Mapping[str, OptionSpec], keys: Iterable[str],
                 task: str | None) -> list[str]:
    """The keys of ``keys`` that ``schema`` does not take for ``task``, in order."""
    return [key for key in keys if not (key in schema and schema[key].applies_to(task))]


def check_options(schema: Mapping[str, OptionSpec], given: Mapping[str, Any], *,
                  task: str | None = None, where: str = "options",
                  fill_defaults: bool = True) -> dict[str, Any]:
    """``given`` checked against ``schema`` for ``task`` (None: any task): every value as the
    family reads it (``OptionSpec.check``), then, with ``fill_defaults``, the default of each
    option not given (those whose default is not None). ``where`` heads each message
    (``options``, ``players[agent_0].options``; '' for none, where the caller names the
    place).

    Raises OptionError for more than ``MAX_OPTION_KEYS`` keys, an unknown key (the message
    lists the first ``MAX_PROBLEMS`` and the keys allowed) or a bad value (the first
    ``MAX_PROBLEMS``, each naming the key, the value and what is allowed)."""
    check_key_count(len(given), where or "options")
    unknown = sorted(unknown_keys(schema, given, task))  # at most MAX_OPTION_KEYS
    if unknown:
        allowed = [k for k, spec in schema.items() if spec.applies_to(task)]
        subject = f" for {quote(task, 128)}" if task else ""
        head = f"{where}: " if where else ""
        raise OptionError(f"{head}unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{quote_names(unknown, MAX_PROBLEMS)}{subject}; allowed: "
                          + (", ".join(allowed) or "none"))
    checked: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in given.items():
        try:
            checked[key] = schema[key].check(f"{where}.{key}" if where else key, value)
        except OptionError as exc:
            problems.append(str(exc))
    if problems:
        shown = "; ".join(islice(problems, MAX_PROBLEMS))
        more = len(problems) - MAX_PROBLEMS
        raise OptionError(shown + (f"; and {more} more" if more > 0 else ""))
    if fill_defaults:
        for key, spec in schema.items():
            if key not in checked and spec.default is not None and spec.applies_to(task):
                checked[key] = spec.default
    return checked


def schema_json(schema: Mapping[str, OptionSpec]) -> dict[str, Any]:
    """``schema`` in its JSON form (sorted by key)."""
    return {key: schema[key].as_json() for key in sorted(schema)}


def schema_from_json(data: Mapping[str, Any]) -> dict[str, OptionSpec]:
    """Parse :func:`schema_json`'s form."""
    return {str(key): OptionSpec.from_json(value) for key, value in data.items()}


# ---- the checks, one per kind: (accepted?, value as the family reads it) -----------------------

def _is_number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _in_range(spec: OptionSpec, value: float) -> bool:
    return ((spec.low is None or value >= spec.low)
            and (spec.high is None or value <= spec.high))


def _check_integer(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    if not _is_number(value) or int(value) != value or not _in_range(spec, value):
        return False, None
    return True, int(value)


def _check_number(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    if not _is_number(value) or not _in_range(spec, value):
        return False, None
    return True, float(value)


def _check_boolean(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    return isinstance(value, bool), value


def _check_choice(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    return isinstance(value, str) and value in spec.values, value


def _check_text(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    limit = int(spec.high or MAX_TEXT_CHARS)
    return isinstance(value, str) and 0 < len(value) <= limit, value


def _check_pair(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        return False, None
    members = [_check_integer(spec, v) for v in value]
    if not all(ok for ok, _ in members):
        return False, None
    return True, (members[0][1], members[1][1])


def _check_names(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    if value is None:
        return True, ()
    if not isinstance(value, list | tuple) or len(value) > len(spec.values) * 4:
        return False, None
    if not all(isinstance(v, str) and v in spec.values for v in value):
        return False, None
    return True, tuple(dict.fromkeys(value))


def _check_fixed(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    expected = spec.values[0]
    if isinstance(expected, tuple | list):
        same = (isinstance(value, list | tuple) and len(value) == len(expected)
                and all(_same_scalar(a, b) for a, b in zip(value, expected, strict=True)))
    else:
        same = _same_scalar(value, expected)
    return same, value


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    return (type(a) is type(b) and a == b) or (_is_number(a) and _is_number(b) and a == b)


def _check_server_path(spec: OptionSpec, value: Any) -> tuple[bool, Any]:
    return _check_text(spec, value)


_CHECKS = {
    "integer": _check_integer, "number": _check_number, "boolean": _check_boolean,
    "choice": _check_choice, "text": _check_text, "pair": _check_pair, "names": _check_names,
    "fixed": _check_fixed, "server_path": _check_server_path,
}


def _num(value: float | None) -> str:
    if value is None:
        return "any"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _json_text(value: Any) -> str:
    """A value as JSON would print it (true, null, [1, 2]), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_json_text(v) for v in islice(value, 8)) + (
            ", ..." if len(value) > 8 else "") + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: ..." for k in islice(value, 4)) + (
            ", ..." if len(value) > 4 else "") + "}"
    return str(value)

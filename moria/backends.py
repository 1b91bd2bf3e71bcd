"""Every model backend's facts, one record each: the one owner of what ``client.client_name``
may be and what each choice means.

A record names the backend (``client.client_name``), its other spellings, the environment
variables its API key may come from, its default base URL, whether it can take images, whether
it calls a remote endpoint, the pip extra that installs its SDK and a line for the docs. Every
table that used to list backends is derived from ``BACKENDS``: the names ``moria.config``
validates (``ClientName``) and the HTTP client ``client.http_client`` picks
(``http_client_for``), ``API_KEY_ENV``, ``DEFAULT_BASE_URL``, the policy server's image
and endpoint checks (``agent_server.backends``), the MOSAIC worker's ``--client`` choices and the
table in docs/backends.md (``python -m moria.backends --check`` keeps it current). The factory
that builds each backend lives with the backends (``agent_server.backends.FACTORIES``, keyed by
the same names; a test checks the two agree).

Add a backend: one ``BackendRecord`` here, its factory there, then
``python -m moria.backends --write``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

#: Where a backend sends its calls: always a hosted API, a server only when ``client.base_url``
#: is set (else it runs the model itself), or never (in this process).
Endpoint = Literal["remote", "remote_with_base_url", "in_process"]

#: The HTTP client of a backend that speaks OpenAI's wire format: the official ``openai`` SDK,
#: or Moria's lean aiohttp client (``agent_server/backends/lean_http.py``).
HttpClient = Literal["sdk", "lean"]
#: The type of ``client.http_client``: ``auto`` takes the record's choice.
HttpClientChoice = Literal["auto", "sdk", "lean"]
#: Its values.
HTTP_CLIENT_CHOICES: tuple[str, ...] = get_args(HttpClientChoice)


@dataclass(frozen=True)
class BackendRecord:
    """One backend (see the module docstring). ``image_input``: False = never takes images
    (Moria's own GGUFs on llama.cpp, with no vision projector); None = it depends on the model
    the endpoint serves. ``extra``: the pip extra of its SDK (``""``: none needed).
    ``http_client``: the HTTP client of its OpenAI-compatible calls under
    ``client.http_client=auto``: ``lean`` for self-hosted servers (a call's client CPU counts
    there), ``sdk`` for hosted APIs (they take ``lean`` only with a ``client.base_url``: a
    self-hosted server spoken to as that provider); None for a backend that does not speak
    OpenAI's wire format (its own SDK, or no network), which refuses ``lean``."""

    name: str
    summary: str
    aliases: tuple[str, ...] = ()
    key_env: tuple[str, ...] = ()
    default_base_url: str | None = None
    image_input: bool | None = None
    endpoint: Endpoint = "remote"
    extra: str = ""
    http_client: HttpClient | None = None


BACKENDS: tuple[BackendRecord, ...] = (
    BackendRecord(
        "local", "Moria's embedded llama.cpp model (a built-in GGUF or a .gguf path); no key, "
        "no network", image_input=False, endpoint="in_process", extra="local"),
    BackendRecord(
        "openai", "the openai SDK, chat completions; reasoning_effort",
        key_env=("OPENAI_API_KEY",), extra="openai", http_client="sdk"),
    BackendRecord(
        "openrouter", "the openai SDK at OpenRouter; reasoning budget or effort",
        key_env=("OPENROUTER_API_KEY",), default_base_url="https://openrouter.ai/api/v1",
        extra="openai", http_client="sdk"),
    BackendRecord(
        "anthropic", "the anthropic SDK, Messages API: system prompt in its own field, images "
        "as base64 blocks, thinking budget_tokens", aliases=("claude",),
        key_env=("ANTHROPIC_API_KEY",), extra="anthropic"),
    BackendRecord(
        "gemini", "the google-genai SDK: inline image parts, thinking_budget, thought parts "
        "kept apart", aliases=("google",), key_env=("GOOGLE_API_KEY", "GEMINI_API_KEY"),
        extra="gemini"),
    BackendRecord(
        "vllm", "a vLLM server at client.base_url (OpenAI wire format, guided_choice); without "
        "one, vLLM's in-process engine", endpoint="remote_with_base_url", extra="vllm",
        http_client="lean"),
    BackendRecord(
        "llamacpp", "a llama.cpp server at client.base_url (OpenAI wire format, grammars); "
        "without one, a llama_cpp.server child process Moria starts",
        endpoint="remote_with_base_url", extra="local", http_client="lean"),
)

#: client_name -> its record.
BY_NAME: dict[str, BackendRecord] = {record.name: record for record in BACKENDS}
#: The names ``client.client_name`` takes, in ``BACKENDS`` order.
BACKEND_NAMES: tuple[str, ...] = tuple(BY_NAME)
#: Other spellings -> the name (BALROG writes ``claude``, MOSAIC writes ``google``).
ALIASES: dict[str, str] = {alias: r.name for r in BACKENDS for alias in r.aliases}


def http_client_for(client_name: str, choice: str, base_url: str | None) -> HttpClient:
    """The HTTP client a backend named ``client_name`` sends with, for ``client.http_client``
    = ``choice`` (one of ``HTTP_CLIENT_CHOICES``) and ``client.base_url`` = ``base_url``:
    ``auto`` gives the record's choice (``sdk`` for a backend that has none: the setting does
    not apply to it). Raises ValueError, naming the allowed values, for ``lean`` where it
    cannot serve: a backend that does not speak OpenAI's wire format, or a hosted provider's
    own API (no ``base_url``), which keeps its official SDK."""
    if choice not in HTTP_CLIENT_CHOICES:
        raise ValueError(f"client.http_client must be one of "
                         f"{', '.join(repr(c) for c in HTTP_CLIENT_CHOICES)}, not {choice!r}")
    record = BY_NAME.get(client_name)
    own = record.http_client if record is not None else None
    if choice == "auto":
        return own or "sdk"
    if choice == "sdk":
        return "sdk"
    if own is None:
        raise ValueError(
            f"client.http_client='lean' does not apply to client {client_name!r}: the lean "
            f"client speaks OpenAI's wire format, which {client_name!r} does not; use 'auto' "
            f"or 'sdk' (allowed: {', '.join(repr(c) for c in HTTP_CLIENT_CHOICES)})")
    if own == "sdk" and not base_url:
        raise ValueError(
            f"client.http_client='lean' needs client.base_url for client {client_name!r}: "
            f"without one the calls go to its hosted API, which keeps the official SDK; use "
            f"'auto' or 'sdk' (allowed: {', '.join(repr(c) for c in HTTP_CLIENT_CHOICES)}), or "
            "set client.base_url to the self-hosted OpenAI-compatible server")
    return "lean"


#: The generated table in docs/backends.md sits between these lines.
TABLE_BEGIN = "<!-- generated by python -m moria.backends: do not edit -->"
TABLE_END = "<!-- end of generated table -->"
DOC = Path(__file__).resolve().parents[1] / "docs" / "backends.md"


def markdown_table() -> str:
    """The docs table of every backend (name and aliases, what it is, key variables, images,
    endpoint, extra, the HTTP client ``client.http_client=auto`` picks)."""
    where = {"remote": "hosted API", "remote_with_base_url": "client.base_url, else here",
             "in_process": "this process"}
    images = {False: "no", None: "if the model does"}
    http = {"sdk": "`sdk` (`lean` with a base_url)", "lean": "`lean`", None: "n/a"}
    rows = ["| `client_name` | what it is | API key | images | calls | extra | "
            "`http_client=auto` |",
            "|---|---|---|---|---|---|---|"]
    for r in BACKENDS:
        name = f"`{r.name}`" + (f" (alias {', '.join(f'`{a}`' for a in r.aliases)})"
                                if r.aliases else "")
        keys = " or ".join(f"`{k}`" for k in r.key_env) or "none"
        rows.append(f"| {name} | {r.summary} | {keys} | {images[r.image_input]} | "
                    f"{where[r.endpoint]} | `{r.extra}` | {http[r.http_client]} |")
    return "\n".join(rows) + "\n"


def render_doc(text: str) -> str:
    """``text`` (docs/backends.md) with its generated table replaced by ``markdown_table``.
    Raises ValueError when the markers are missing."""
    start, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"{DOC} has no generated-table markers ({TABLE_BEGIN!r} ... "
                         f"{TABLE_END!r})")
    return text[:start] + TABLE_BEGIN + "\n" + markdown_table() + text[end:]


def main(argv: list[str] | None = None) -> int:
    """``--write`` regenerates the docs table; ``--check`` exits 1 when it is stale."""
    parser = argparse.ArgumentParser(prog="python -m moria.backends",
                                     description="the backend table of docs/backends.md")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the table")
    mode.add_argument("--check", action="store_true", help="exit 1 when the table is stale")
    args = parser.parse_args(argv)
    current = DOC.read_text(encoding="utf-8")
    wanted = render_doc(current)
    if args.check:
        if wanted != current:
            print(f"{DOC}: the backend table is stale; run python -m moria.backends --write",
                  file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        DOC.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

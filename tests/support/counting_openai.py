"""``FakeOpenAI`` whose usage counts tokens as a provider's tokenizer would, roughly.

``fake_openai.FakeOpenAI`` reports white-space separated words as tokens; a real BPE tokenizer
(OpenAI's cl100k/o200k) gives a common English word one token but also a token to every
punctuation mark, splits numbers into groups of at most three digits and adds a few tokens per
chat message. ``TokenCountingOpenAI`` counts that way (``pretokens``), so a test can compare an
estimate with what a run "measured" without the estimator and the server sharing one formula
(``moria plan`` counts UTF-8 bytes / 4 when no tokenizer is installed). Every request is still
recorded in ``requests`` (``len(server.requests)`` is the number of calls it got).

    with TokenCountingOpenAI("go forward") as server:
        ...  # point client.base_url at server.base_url
"""

from __future__ import annotations

import re
from typing import Any

from tests.support.fake_openai import Behaviour, FakeOpenAI

#: Tokens of the chat format per message and per reply (OpenAI's published counting recipe).
PER_MESSAGE = 3
PER_REPLY = 3

_PIECES = re.compile(r"[A-Za-z]+|\d{1,3}|[^\sA-Za-z\d]")


def pretokens(text: str) -> int:
    """Tokens of ``text`` under a BPE-like split: each run of letters, each group of up to three
    digits and each other non-space character is one token."""
    return len(_PIECES.findall(text))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def prompt_tokens(request: dict[str, Any]) -> int:
    """The prompt tokens of one chat-completions request."""
    messages = request.get("messages") or []
    return PER_REPLY + sum(PER_MESSAGE + pretokens(_text(m.get("content"))) for m in messages)


class TokenCountingOpenAI(FakeOpenAI):
    """``FakeOpenAI`` reporting ``prompt_tokens`` / ``completion_tokens`` counted with
    ``pretokens`` (a scripted ``Behaviour.usage`` still wins)."""

    def _usage(self, behaviour: Behaviour, request: dict[str, Any], text: str) -> dict[str, Any]:
        if behaviour.usage is not None:
            return behaviour.usage
        prompt, completion = prompt_tokens(request), pretokens(text)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}

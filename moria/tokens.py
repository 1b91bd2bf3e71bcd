"""Token counts before a prompt is tokenized: the rule of thumb providers use themselves.

OpenAI documents that its rate limiter counts a request's prompt, before any model reads it, as
about a quarter of its characters; English prose and game text run at 3.5-4.5 UTF-8 bytes per
token under OpenAI's and Anthropic's tokenizers. Both ``moria plan``'s fallback estimate and
the policy server's rate limiter (``client.max_tokens_per_minute``) count this way.
"""

from __future__ import annotations

from typing import Final

#: UTF-8 bytes of text per token of the estimate.
BYTES_PER_TOKEN: Final = 4


def estimate_tokens(utf8_bytes: int) -> int:
    """The estimated tokens of ``utf8_bytes`` bytes of text: a quarter, rounded up."""
    return -(-utf8_bytes // BYTES_PER_TOKEN)

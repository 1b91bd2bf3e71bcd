"""Token and cost accounting: usage per model, and a cost estimate from a price table.

Every agent turn carries its model (``"<client_name>/<model_id>"``), its token counts (input,
output, cached input, reasoning) and its latency. ``usage_by_model`` sums them per model over
steps; the summaries (``orchestrator.report.summary``) add them up per env, per task and per model
and
price them with ``PriceTable.cost``.

The price table is a YAML file (``orchestrator/suites/prices.yaml`` by default; ``eval.prices`` or
``moria report --prices`` override it) with the date its prices were read (``as_of``) and, per
model, US dollars per million ``input``, ``cached_input`` and ``output`` tokens. Reasoning
tokens are billed as output tokens (every provider does so) and are already part of the output
count where the provider reports them inside it (OpenAI, Gemini report them separately: see
``cost``). A model with no entry is *unpriced*: its cost is None, never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: The price table shipped with Moria.
DEFAULT_PRICES = Path(__file__).parents[1] / "suites" / "prices.yaml"

#: Counters kept per model (``usage_by_model`` values).
USAGE_KEYS: tuple[str, ...] = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
    "latency_s",
)


class ModelPrice(BaseModel):
    """US dollars per million tokens of one model."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)


#: The price of OpenRouter's free-tier models.
FREE = ModelPrice(input=0.0, output=0.0)


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    as_of: str
    currency: str = "USD"
    models: dict[str, ModelPrice]


class PriceError(ValueError):
    """A price table that cannot be read; the message names the file and the problem."""


@dataclass(frozen=True)
class PriceTable:
    """A loaded price table. ``source`` is its path, ``as_of`` the date of its prices."""

    source: str
    as_of: str
    currency: str
    models: Mapping[str, ModelPrice]

    def price_for(self, model: str) -> ModelPrice | None:
        """The entry for ``model`` (``"<client>/<model_id>"``): an exact match, then the model
        id, then its last ``/`` segment, then ``"<client>/*"``; None when unpriced. OpenRouter's
        free-tier ids (ending in ``:free``) cost nothing."""
        client, _, model_id = model.partition("/")
        if client == "openrouter" and model_id.endswith(":free"):
            return FREE
        for key in (model, model_id, model_id.rsplit("/", 1)[-1], f"{client}/*"):
            if key and key in self.models:
                return self.models[key]
        return None

    def cost(self, model: str, usage: Mapping[str, float]) -> float | None:
        """Dollars for ``usage`` (``input_tokens``, ``cached_input_tokens``, ``output_tokens``)
        of ``model``; None when the model is unpriced.

        ``input_tokens`` includes the cached ones (as every provider reports it); those are
        charged at ``cached_input`` (default: the input price). Output tokens include reasoning
        tokens for every backend Moria has (OpenAI and Gemini report reasoning inside or next
        to the output count; Moria's Gemini backend adds them into ``output_tokens``), so
        reasoning tokens are not charged twice.
        """
        price = self.price_for(model)
        if price is None:
            return None
        cached = float(usage.get("cached_input_tokens", 0))
        uncached = max(0.0, float(usage.get("input_tokens", 0)) - cached)
        cached_rate = price.input if price.cached_input is None else price.cached_input
        dollars = (
            uncached * price.input
            + cached * cached_rate
            + float(usage.get("output_tokens", 0)) * price.output
        )
        return dollars / 1_000_000

    def describe(self) -> dict[str, str]:
        """``{"source", "as_of", "currency"}`` for the summary."""
        return {"source": self.source, "as_of": self.as_of, "currency": self.currency}


@lru_cache(maxsize=8)
def load_prices(path: str | None = None) -> PriceTable:
    """Read a price table file (None: the shipped ``prices.yaml``); a relative path is taken
    from the current directory and named resolved in errors. Raises ``PriceError``."""
    file = Path(path).resolve() if path else DEFAULT_PRICES
    try:
        raw = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PriceError(f"cannot read price table {file}: {exc}") from exc
    return price_table(raw, str(file))


def price_table(raw: Any, source: str) -> PriceTable:
    """A price table from its parsed content (``as_of``, ``currency``, ``models``: {name:
    {input, output, cached_input}}); ``source`` names it in errors and in the summary.
    Raises ``PriceError`` listing at most 10 problems, values never quoted, and keys only
    where a table has names of its own (a model's): an unknown top-level key is not shown, as
    the lines of a file that is no price table (a path given by mistake, ``/etc/shadow``) are
    such keys of its YAML."""
    try:
        parsed = _PriceFile.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        problems = "; ".join(
            f"{_location(e)}: {e['msg']}" for e in errors[:10]
        ) + (f"; and {len(errors) - 10} more" if len(errors) > 10 else "")
        raise PriceError(
            f"bad price table {source}: {problems} (expected as_of, currency and models: "
            "{name: {input, output, cached_input}} in dollars per million tokens)"
        ) from None
    return PriceTable(source, parsed.as_of, parsed.currency, dict(parsed.models))


def _location(error: Mapping[str, Any]) -> str:
    """Where a validation error is, as a message shows it: an unknown top-level key as
    ``<unknown key>`` (see ``price_table``), a model's key cut to 100
    characters."""
    loc = [str(p) for p in error["loc"]]
    if error["type"] == "extra_forbidden" and len(loc) == 1:
        return "<unknown key>"
    return ".".join(loc)[:100]


def prices_for(value: str | Mapping[str, Any] | None) -> PriceTable:
    """The price table ``eval.prices`` names: None, the shipped table; a mapping, an inline
    table (source ``"inline"``); a string, a file path (``load_prices``). Raises PriceError."""
    if value is None or isinstance(value, str):
        return load_prices(value)
    return price_table(dict(value), "inline")


def empty_usage() -> dict[str, float]:
    """A zeroed ``usage_by_model`` value."""
    return dict.fromkeys(USAGE_KEYS, 0)


def add_usage(into: dict[str, dict[str, float]], model: str, usage: Mapping[str, float]) -> None:
    """Add one turn's (or one episode's) counters for ``model`` into ``into``."""
    totals = into.setdefault(model, empty_usage())
    for key in USAGE_KEYS:
        totals[key] += usage.get(key, 0)


def merge_usage(parts: Iterable[Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, Any]]:
    """Sum several ``usage_by_model`` mappings."""
    total: dict[str, dict[str, float]] = {}
    for part in parts:
        for model, usage in part.items():
            add_usage(total, model, usage)
    return total


def priced(usage: Mapping[str, Mapping[str, float]], prices: PriceTable) -> dict[str, Any]:
    """``{"models": {model: counters + cost_usd}, "cost_usd", "unpriced_models"}``.

    ``cost_usd`` (total) is None when no model is priced; models without a price are listed in
    ``unpriced_models`` and left out of the total (so a partial total is visible as such).
    """
    models: dict[str, Any] = {}
    total = 0.0
    any_priced = False
    unpriced: list[str] = []
    for model in sorted(usage):
        cost = prices.cost(model, usage[model])
        models[model] = {**usage[model], "cost_usd": cost}
        if cost is None:
            unpriced.append(model)
        else:
            any_priced = True
            total += cost
    return {
        "models": models,
        "cost_usd": total if any_priced else None,
        "unpriced_models": unpriced,
    }

"""The run's cost cap (``eval.max_cost_usd``): one ledger per run, kept by the orchestrator.

Every Play stream of a capped run is begun with ``reserve_calls``: before each model call the
policy server sends the call's worst case (``Reserve``: prompt and output token bounds, see
``agent_server.backends.limits``) and waits for the answer. The ledger prices the worst case with
the run's price table and grants it only when ``spent + reserved + worst case <= cap``; a
granted call's worst case stays *reserved* until its turn's ``Act`` arrives, when every
reservation of the turn is released and the turn's real usage, priced, is added to *spent*.
A turn that ends in an error (or never answers) keeps its granted worst cases as spent: a call
that failed may still have been billed. So the run's spending by the provider's count never
passes the cap, whatever the number of episodes, seats and policy replicas (they all ask this
one ledger).

The ledger is saved to ``<out>/budget.json`` before each grant is answered and after each
settlement, so a resumed run (a higher cap) starts from what was spent; calls that were in
flight when a run stopped count as spent (their worst case).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moria.files import atomic_write_text
from moria.policy.v1 import policy_service_pb2 as pol_pb
from orchestrator.report.accounting import PriceTable

log = logging.getLogger(__name__)

#: The ledger's file in a run's output directory.
BUDGET_FILE = "budget.json"


def usd(amount: float) -> str:
    """``$1.23`` (cents; ``$0.0042`` below one cent, so a small run's spending shows)."""
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


class CostLedger:
    """Spent and reserved dollars of one run against ``cap_usd`` (> 0), priced by ``prices``;
    saved to ``path`` (None: not saved). Raises ValueError for a cap <= 0 and when ``path``
    holds a ledger that cannot be read."""

    def __init__(self, cap_usd: float, prices: PriceTable, path: Path | None = None):
        if not cap_usd > 0:
            raise ValueError(f"eval.max_cost_usd must be > 0, got {cap_usd}")
        self.cap_usd = float(cap_usd)
        self.prices = prices
        self.path = path
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self.refused_calls = 0
        self.granted_calls = 0
        if path is not None and path.exists():
            self.spent_usd = _earlier_spending(path)

    def turn(self) -> TurnLedger:
        """The reservations of one agent turn (one Observe)."""
        return TurnLedger(self)

    def worst_case_usd(self, reserve: pol_pb.Reserve) -> float | None:
        """The priced worst case of ``reserve`` (None: its model is unpriced)."""
        return self.prices.cost(reserve.model, {"input_tokens": reserve.input_tokens,
                                                "output_tokens": reserve.output_tokens})

    def snapshot(self) -> dict[str, Any]:
        """``{"max_cost_usd", "spent_usd", "reserved_usd", "refused_calls", "granted_calls"}``
        (what ``summary.json``'s ``budget`` and ``GetRun``'s ``Run.budget`` hold)."""
        return {"max_cost_usd": self.cap_usd, "spent_usd": round(self.spent_usd, 6),
                "reserved_usd": round(self.reserved_usd, 6),
                "refused_calls": self.refused_calls, "granted_calls": self.granted_calls}

    def status(self) -> str:
        """``budget $1.20 spent + $0.40 reserved of $5.00`` (the progress line's part)."""
        text = (f"budget {usd(self.spent_usd)} spent + {usd(self.reserved_usd)} reserved "
                f"of {usd(self.cap_usd)}")
        return text + (f", {self.refused_calls} call(s) refused" if self.refused_calls else "")

    def save(self) -> None:
        """Write the ledger to ``path`` (atomically; nothing without a path)."""
        if self.path is not None:
            atomic_write_text(self.path, json.dumps(self.snapshot(), indent=2) + "\n")


def _earlier_spending(path: Path) -> float:
    """What an earlier invocation of the run spent: its spent and reserved dollars (calls in
    flight when it stopped may have been billed). Raises ValueError for an unreadable file."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return float(saved["spent_usd"]) + float(saved.get("reserved_usd", 0.0))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a cost ledger Moria wrote ({exc}); remove it to "
                         "start the run's spending from zero") from None


@dataclass
class TurnLedger:
    """One turn's reservations on a ``CostLedger``: ``grant`` answers each Reserve;
    ``settle`` (the turn's Act) or ``abandon`` (no Act) ends them. ``refused`` is the reason
    of a refused call, empty when none was."""

    ledger: CostLedger
    held_usd: float = 0.0
    refused: str = ""
    _open: bool = field(default=True, repr=False)

    async def grant(self, reserve: pol_pb.Reserve) -> pol_pb.Grant:
        """Grant ``reserve`` when its worst case fits under the cap (held until the turn ends);
        else refuse it, saying why."""
        ledger = self.ledger
        worst = ledger.worst_case_usd(reserve)
        if worst is None:
            reason = (f"{reserve.model} has no price in {ledger.prices.source}, so "
                      "eval.max_cost_usd cannot bound its calls")
        elif ledger.spent_usd + ledger.reserved_usd + worst <= ledger.cap_usd:
            ledger.reserved_usd += worst
            ledger.granted_calls += 1
            self.held_usd += worst
            ledger.save()
            return pol_pb.Grant(granted=True)
        else:
            reason = (f"eval.max_cost_usd {usd(ledger.cap_usd)} reached: spent "
                      f"{usd(ledger.spent_usd)}, reserved {usd(ledger.reserved_usd)} for calls "
                      f"in flight, and this call's worst case is {usd(worst)} "
                      f"({reserve.input_tokens} prompt + {reserve.output_tokens} output "
                      "tokens); resume with a higher cap to play the rest")
        ledger.refused_calls += 1
        self.refused = self.refused or reason
        return pol_pb.Grant(granted=False, reason=reason)

    def settle(self, act: pol_pb.Act) -> None:
        """End the turn with its ``act``: release what it held and add its priced usage; an
        act with an error keeps the held worst cases as spent."""
        if not self._open:
            return
        self._open = False
        ledger = self.ledger
        ledger.reserved_usd = max(0.0, ledger.reserved_usd - self.held_usd)
        if act.error.code:
            ledger.spent_usd += self.held_usd
        else:
            usage = {"input_tokens": act.usage.input_tokens,
                     "cached_input_tokens": act.usage.cached_input_tokens,
                     "output_tokens": act.usage.output_tokens}
            cost = ledger.prices.cost(act.model, usage) if act.model else None
            if cost is None and any(usage.values()):
                cost = self.held_usd  # an answer from a model with no price: its worst case
                log.warning("priced %s's usage at its reserved worst case: no price for it",
                            act.model or "an unnamed model")
            ledger.spent_usd += cost or 0.0
        if self.held_usd or act.error.code:
            ledger.save()

    def abandon(self) -> None:
        """End a turn that got no Act (a lost server, a cancelled episode): what it held is
        counted as spent."""
        if not self._open:
            return
        self._open = False
        ledger = self.ledger
        ledger.reserved_usd = max(0.0, ledger.reserved_usd - self.held_usd)
        ledger.spent_usd += self.held_usd
        if self.held_usd:
            ledger.save()

"""NetHack progression and end reason (docs/families/nle.md, "Metrics").

Progression
-----------
Each table value is the fraction of human games that went on to win after reaching that point.
After every step ``NLEProgress.update(blstats)`` looks up, in this order:

1. ``Xp:<experience level>`` (blstats[18]);
2. ``Dlvl:<depth>`` (blstats[12]), in every branch, as the reference does;
3. ``Home <n>`` when the player is in the Quest: blstats[23] (dungeon number) == 3 and
   n = blstats[24] (level number inside the Quest), exactly what NetHack's status line shows;
4. ``Astral Plane`` when blstats[23] == 7 (the Elemental Planes) and blstats[24] == 1;
5. ``Ascended`` when the caller says the game was won (NLE's ``info["is_ascended"]``).

Keys outside the table (e.g. ``Dlvl:0`` from the zeroed blstats of the final observation, or the
planes' negative depths) are ignored. ``progression`` is the largest value seen (never decreases),
``highest_achievement`` the key that first set it (``None`` while it is 0, as in the reference).

The dungeon numbers follow the order of NetHack 3.6's ``dungeon.def`` (0 Dungeons of Doom,
1 Gehennom, 2 Gnomish Mines, 3 Quest, 4 Sokoban, 5 Fort Ludios, 6 Vlad's Tower, 7 Elemental
Planes, astral = level 1); checked in NLE 1.3.0 by level-teleporting in wizard mode (Quest home:
dnum 3, level 1, status line ``Home 1``; Astral: dnum 7, level 1, status line ``Astral Plane``).

Difference from the reference: BALROG's table has the Home, Astral and ascension entries but its
code only ever looks up Dlvl/Xp, so its maximum is about 0.807; we reach them. The
reference keys the ascension entry ``"You ascend t"`` (a message prefix); we call it ``Ascended``.
Values are the reference's exact floats (its ``achievements.json``), not a 4-decimal rounding of
them.

End reason
----------
The reference flattens the final ``tty_chars`` (the top-ten screen), removes the sentence
``You made the top ten list!``, splits on whitespace and reads the words by position: words 0-4
are the header ``No Points Name Hp [max]``, 5 the rank, 6 the points, 7 the name token
``Agent-Rol-Rac-Gen-Ali``; the death text runs from word 8 (from 7 if word 7 does not start with
``Agent``) to the last two words (``- [maxhp]``) excluded. The first "."-sentence is cut before the
first standalone word ``in``; the result is ``<END_STATUS>: <that part>. <other sentences>``, e.g.
``DEATH: died. Killed by a jackal.``

Our fix (**defect**: on an aborted episode, or a list with several entries, the reference returns
garbage): we locate the header wherever it is, parse entries as ``rank points name ... hp [max]``
and only then apply the same sentence rule, so a normal single-entry screen gives the reference's
exact text. When there is no top-ten screen (aborted episode: the map is on screen) the result is
``<END_STATUS> (no end-of-game screen)``; when the screen cannot be parsed,
``<END_STATUS> (end-of-game screen not understood)``; when several entries are listed (an NLE
instance keeps its record file across resets, so later games list earlier ones) and the own entry
cannot be told apart, ``<END_STATUS> (own top-ten entry not identifiable)``. A
``You reached the <n>th place`` sentence identifies the own entry by rank.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

# fmt: off
_DLVL_VALUES = (
    0.0, 0.015392269075361172, 0.017539535798967013, 0.021221378364235505, 0.026482449457437766,
    0.035428686118173014, 0.04846098359243788, 0.0695812141543123, 0.09770935198701912,
    0.12558597019922987, 0.1612677822768481, 0.20612854836308672, 0.2566039887664476,
    0.29247245425293333, 0.30881240110986263, 0.3249071349317381, 0.34007883702829594,
    0.3526455577544006, 0.3654881095022441, 0.37895667923256743, 0.39293747679675045,
    0.40832255575976223, 0.4258360748858015, 0.445181408701678, 0.46637631565303056,
    0.5067605633802816, 0.5543572044866264, 0.6015648510382184, 0.6465049415992812,
    0.6913110342176086, 0.7101094299371864, 0.7176456494828894, 0.7232124894378948,
    0.7284405900470092, 0.7327761924174481, 0.7368528917489855, 0.7421458943978863,
    0.7471321695760599, 0.753731343283582, 0.7610398408061306, 0.76740810314648,
    0.7725338491295938, 0.7771626297577855, 0.7812567949554251, 0.7858986134802957,
    0.7890256738822022, 0.7929718875502008, 0.7967408445768355, 0.8018467495718222,
    0.8067964442444019,
)
_XP_VALUES = (
    0.0, 0.01847840456172601, 0.02081163581974355, 0.024160136550546978, 0.029108986017138745,
    0.036887590648350246, 0.0507583712345433, 0.07453595273884014, 0.11704996473565571,
    0.17909953770432294, 0.25480449090205187, 0.33264942385807844, 0.41442590519821954,
    0.49403949403949404, 0.5778823703813513, 0.6261221999477034, 0.656281764586298,
    0.6810218550418937, 0.7015328516442704, 0.7174494081710576, 0.7286977843944303,
    0.7371004909327723, 0.7443446629532795, 0.7513449678519879, 0.7585537128343045,
    0.7642151855635002, 0.7703376822716808, 0.7759810263044415, 0.7783345263660224,
    0.7804561949196475,
)
_HOME_VALUES = (
    0.3661126311920611, 0.5461852317697947, 0.5493249297123614, 0.561057980620522,
    0.5655729909652877,
)
# fmt: on

ASTRAL_KEY = "Astral Plane"
ASCENDED_KEY = "Ascended"

#: Progression value of every key.
PROGRESSION_TABLE: dict[str, float] = {
    **{f"Dlvl:{i}": v for i, v in enumerate(_DLVL_VALUES, start=1)},
    ASTRAL_KEY: 0.8745866562925501,
    **{f"Home {i}": v for i, v in enumerate(_HOME_VALUES, start=1)},
    **{f"Xp:{i}": v for i, v in enumerate(_XP_VALUES, start=1)},
    ASCENDED_KEY: 1.0,
}

QUEST_DUNGEON = 3
PLANES_DUNGEON = 7
ASTRAL_LEVEL = 1

# blstats indices (NLE 1.3.0)
_BL_DEPTH, _BL_XP, _BL_DNUM, _BL_DLEVEL = 12, 18, 23, 24

_TOP_TEN_SENTENCE = "You made the top ten list!"
_HEADER = ("No", "Points", "Name", "Hp", "[max]")
_MAX_HP = re.compile(r"\[\d+\]")
_REACHED = re.compile(r"You reached the (\d+)(?:st|nd|rd|th) place")

NOTE_NO_SCREEN = "no end-of-game screen"
NOTE_NOT_UNDERSTOOD = "end-of-game screen not understood"
NOTE_AMBIGUOUS = "own top-ten entry not identifiable"


def progression_keys(blstats: np.ndarray, *, ascended: bool = False) -> list[str]:
    """Table keys the game state shows, in look-up order (some may be absent from the table)."""
    keys = [f"Xp:{int(blstats[_BL_XP])}", f"Dlvl:{int(blstats[_BL_DEPTH])}"]
    dnum, dlevel = int(blstats[_BL_DNUM]), int(blstats[_BL_DLEVEL])
    if dnum == QUEST_DUNGEON:
        keys.append(f"Home {dlevel}")
    elif dnum == PLANES_DUNGEON and dlevel == ASTRAL_LEVEL:
        keys.append(ASTRAL_KEY)
    if ascended:
        keys.append(ASCENDED_KEY)
    return keys


def _status_name(end_status: Any) -> str:
    """``"DEATH"`` from ``"DEATH"`` or from an enum member such as ``StepStatus.DEATH``."""
    name = getattr(end_status, "name", None)
    return name if isinstance(name, str) else str(end_status)


def _entries(words: list[str]) -> list[tuple[int, list[str]]] | None:
    """Top-ten entries after the header as (rank, words from the name token to before hp)."""
    entries = []
    i = 0
    while i < len(words):
        if i + 2 >= len(words) or not (words[i].isdigit() and words[i + 1].isdigit()):
            return None
        end = next((k for k in range(i + 3, len(words)) if _MAX_HP.fullmatch(words[k])), None)
        if end is None:
            return None
        entries.append((int(words[i]), words[i + 2 : end - 1]))
        i = end + 1
    return entries


def _phrase(status: str, entry: list[str]) -> str:
    """The reference's sentence rule applied to one entry's words (name token first)."""
    text_words = entry[1:] if entry and entry[0].startswith("Agent") else entry
    sentences = " ".join(text_words).split(".")
    first = sentences[0].split()
    if "in" in first:
        first = first[: first.index("in")]
    rest = ".".join(sentences[1:]).strip()
    return f"{status}: {' '.join(first)}. {rest}".strip()


def parse_end_reason(tty_chars: np.ndarray, end_status: Any) -> str:
    """End reason from the final screen (see the module docstring).

    Args:
        tty_chars: NLE ``tty_chars`` of the final observation, (24, 80) uint8.
        end_status: the NLE end status name (``"DEATH"``, ``"ABORTED"``...) or enum member.

    Returns:
        ``"<STATUS>: <how>. <details>"`` for a parsable top-ten screen, else
        ``"<STATUS> (<note>)"``.
    """
    status = _status_name(end_status)
    text = np.asarray(tty_chars, dtype=np.uint8).tobytes().decode("utf-8", errors="ignore")
    words = text.replace(_TOP_TEN_SENTENCE, "").split()
    start = next((i for i in range(len(words) - 4) if tuple(words[i : i + 5]) == _HEADER), None)
    if start is None:
        return f"{status} ({NOTE_NO_SCREEN})"
    entries = _entries(words[start + 5 :])
    if not entries:
        return f"{status} ({NOTE_NOT_UNDERSTOOD})"
    if len(entries) == 1:
        return _phrase(status, entries[0][1])
    reached = _REACHED.search(" ".join(words[:start]))
    if reached:
        own = [entry for rank, entry in entries if rank == int(reached.group(1))]
        if len(own) == 1:
            return _phrase(status, own[0])
    return f"{status} ({NOTE_AMBIGUOUS})"


class NLEProgress:
    """Per-episode progression tracker for NLE (create one per episode).

    Attributes:
        progression: highest table value reached, in [0, 1].
        highest_achievement: the key that set ``progression`` (``None`` while it is 0).
        keys_seen: table keys reached, in order of first appearance.
    """

    def __init__(self) -> None:
        self.progression: float = 0.0
        self.highest_achievement: str | None = None
        self.keys_seen: list[str] = []
        self._seen: set[str] = set()

    def update(self, blstats: np.ndarray, *, ascended: bool = False) -> float:
        """Record the state of one observation and return the progression so far.

        Args:
            blstats: NLE ``blstats`` (27 int64) of the observation.
            ascended: the game was won (pass NLE's ``info.get("is_ascended", False)``).

        Returns:
            ``progression`` after the update (never lower than before).
        """
        for key in progression_keys(blstats, ascended=ascended):
            value = PROGRESSION_TABLE.get(key)
            if value is None or key in self._seen:
                continue
            self._seen.add(key)
            self.keys_seen.append(key)
            if value > self.progression:
                self.progression = value
                self.highest_achievement = key
        return self.progression

    @property
    def dlvl_list(self) -> list[str]:
        """The ``Dlvl:<n>`` keys seen (the reference's ``dlvl_list``)."""
        return [k for k in self.keys_seen if k.startswith("Dlvl:")]

    @property
    def xplvl_list(self) -> list[str]:
        """The ``Xp:<n>`` keys seen (the reference's ``xplvl_list``)."""
        return [k for k in self.keys_seen if k.startswith("Xp:")]

    def end_reason(self, tty_chars: np.ndarray, end_status: str) -> str:
        """End reason of the episode from its final screen; see ``parse_end_reason``."""
        return parse_end_reason(tty_chars, end_status)

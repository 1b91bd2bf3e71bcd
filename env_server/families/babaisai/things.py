"""The vocabulary of BabaIsAI and the integer codes of every thing that can lie on the grid.

Source of reference behaviour: nacloos/baba-is-ai ``world_object.py``:
object nouns ``baba``, ``wall``, ``ball``, ``key``, ``door`` with a colour; text blocks naming a
noun, the word ``is``, a property or a colour; and the solid border.

Every thing is a small integer *code* in 1..255 (0 never names a thing), so that a cell's stack
fits one Python int (see ``grid.py``). Object codes also carry the direction the object faces
(0 up, 1 right, 2 down, 3 left), which only matters for MOVE objects and for drawing baba.
Lookup tables below turn a code into its kind, noun, colour, word and direction in O(1).
"""

from __future__ import annotations

from dataclasses import dataclass

NOUNS: tuple[str, ...] = ("baba", "wall", "ball", "key", "door")
COLOURS: tuple[str, ...] = ("red", "green", "blue", "grey", "white")
PROPERTIES: tuple[str, ...] = (
    "you", "win", "stop", "push", "lose", "pull", "move", "open", "shut",
)
#: The colour an object takes when a noun is created by a transformation rule.
DEFAULT_COLOUR: dict[str, str] = {
    "baba": "white", "wall": "grey", "ball": "green", "key": "blue", "door": "red",
}

# Direction index -> (dx, dy), x to the right and y down; index = action index - 1.
DIRECTIONS: tuple[tuple[int, int], ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))
DEFAULT_DIR = 1  # objects face right when created

# -- code layout --------------------------------------------------------------------------------

BORDER = 1
_OBJ_BASE = 2
_N_OBJ = len(NOUNS) * len(COLOURS) * 4
_TEXT_BASE = _OBJ_BASE + _N_OBJ
TEXT_WORDS: tuple[str, ...] = (*NOUNS, "is", *PROPERTIES, *COLOURS)
N_CODES = _TEXT_BASE + len(TEXT_WORDS)
assert N_CODES <= 256, "codes must fit one byte"

KIND_BORDER = "border"
KIND_OBJECT = "object"
KIND_NOUN_TEXT = "noun_text"
KIND_IS_TEXT = "is_text"
KIND_PROPERTY_TEXT = "property_text"
KIND_COLOUR_TEXT = "colour_text"


@dataclass(frozen=True)
class ThingInfo:
    """What one code stands for.

    ``kind`` is one of the ``KIND_*`` names; ``noun``/``colour``/``direction`` are set for
    objects; ``word`` for text blocks (the noun, ``is``, property or colour it shows).
    """

    code: int
    kind: str
    noun: str = ""
    colour: str = ""
    direction: int = DEFAULT_DIR
    word: str = ""

    @property
    def is_text(self) -> bool:
        """True for the four text-block kinds."""
        return self.kind not in (KIND_OBJECT, KIND_BORDER)


def object_code(noun: str, colour: str, direction: int = DEFAULT_DIR) -> int:
    """The code of an object. Raises ``KeyError``/``ValueError`` for an unknown noun/colour."""
    n = NOUNS.index(noun)
    c = COLOURS.index(colour)
    if not 0 <= direction < 4:
        raise ValueError(f"direction must be 0..3, got {direction}")
    return _OBJ_BASE + (n * len(COLOURS) + c) * 4 + direction


def text_code(word: str) -> int:
    """The code of a text block showing ``word`` (a noun, ``is``, a property or a colour).

    Raises ``ValueError`` for any other word.
    """
    return _TEXT_BASE + TEXT_WORDS.index(word)


def _build_info() -> tuple[ThingInfo, ...]:
    table: list[ThingInfo] = [ThingInfo(0, "empty"), ThingInfo(BORDER, KIND_BORDER)]
    for noun in NOUNS:
        for colour in COLOURS:
            for d in range(4):
                table.append(ThingInfo(object_code(noun, colour, d), KIND_OBJECT, noun, colour, d))
    for word in TEXT_WORDS:
        if word in NOUNS:
            kind = KIND_NOUN_TEXT
        elif word == "is":
            kind = KIND_IS_TEXT
        elif word in PROPERTIES:
            kind = KIND_PROPERTY_TEXT
        else:
            kind = KIND_COLOUR_TEXT
        table.append(ThingInfo(text_code(word), kind, word=word))
    assert [t.code for t in table] == list(range(N_CODES))
    return tuple(table)


#: ``INFO[code]`` describes every code (index 0 is a placeholder for "no thing").
INFO: tuple[ThingInfo, ...] = _build_info()
IS_CODE = text_code("is")
#: ``IS_TEXT[code]``: the code is a text block.
IS_TEXT: tuple[bool, ...] = tuple(t.is_text for t in INFO)
#: ``IS_OBJECT[code]``: the code is an object (baba, wall, ball, key, door).
IS_OBJECT: tuple[bool, ...] = tuple(t.kind == KIND_OBJECT for t in INFO)
#: ``WITHOUT_DIR[code]``: the same thing facing the default direction (text/border unchanged).
WITHOUT_DIR: tuple[int, ...] = tuple(
    object_code(t.noun, t.colour) if t.kind == KIND_OBJECT else t.code for t in INFO
)


def with_direction(code: int, direction: int) -> int:
    """``code`` turned to face ``direction`` (objects only; other codes are returned as is)."""
    if not IS_OBJECT[code]:
        return code
    return code - INFO[code].direction + direction


def display_name(code: int) -> str:
    """A short name: the noun for objects (``key``), ``TEXT(<word>)`` for text, ``border``."""
    info = INFO[code]
    if info.kind == KIND_OBJECT:
        return info.noun
    if info.is_text:
        return f"TEXT({info.word})"
    return info.kind

"""RGB frames of the grid with our own simple tiles (numpy + Pillow only).

Each thing is drawn on a square tile of ``tile_size`` pixels: the border as dark bricks, wall
objects as grey blocks, balls as discs, keys as a ring with a shaft, doors as framed panels, baba
as a white triangle pointing where it faces, and text blocks as coloured labels showing their word
(noun words pink, ``is`` white, property words orange, colour words in their colour). A cell's
stack is drawn bottom to top, so the top thing is what you see, as in the game.

The frame of a ``W`` x ``H`` grid is a ``(H * tile_size, W * tile_size, 3)`` uint8 array.
(The reference draws its own tiles too; ours only need to be distinguishable, not identical.)
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from env_server.families.babaisai.grid import Board, stack_codes
from env_server.families.babaisai.things import (
    BORDER,
    INFO,
    KIND_COLOUR_TEXT,
    KIND_IS_TEXT,
    KIND_NOUN_TEXT,
    KIND_OBJECT,
)

RGB = tuple[int, int, int]
BACKGROUND: RGB = (18, 18, 24)
GRID_LINE: RGB = (40, 40, 48)
PALETTE: dict[str, RGB] = {
    "red": (230, 60, 60),
    "green": (70, 200, 90),
    "blue": (70, 120, 240),
    "grey": (130, 130, 140),
    "white": (245, 245, 245),
}
_TEXT_BACKGROUND: dict[str, RGB] = {
    KIND_NOUN_TEXT: (220, 80, 150),
    KIND_IS_TEXT: (240, 240, 240),
    "property_text": (235, 150, 40),
}


def _label_font(tile_size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=max(6, tile_size // 3))
    except (TypeError, OSError):  # Pillow without FreeType: fixed bitmap font
        return ImageFont.load_default()


def _draw_object(draw: ImageDraw.ImageDraw, code: int, s: int) -> None:
    info = INFO[code]
    colour = PALETTE[info.colour]
    m = max(1, s // 8)
    if info.noun == "wall":
        draw.rectangle((m, m, s - 1 - m, s - 1 - m), fill=colour)
    elif info.noun == "ball":
        draw.ellipse((m, m, s - 1 - m, s - 1 - m), fill=colour)
    elif info.noun == "key":
        r = s // 5
        cx, cy = s // 2, s // 3
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), outline=colour, width=max(1, s // 12))
        draw.rectangle((cx - max(1, s // 16), cy + r, cx + max(1, s // 16), s - 1 - m),
                       fill=colour)
        draw.rectangle((cx, s - 1 - m - s // 6, cx + s // 5, s - 1 - m - s // 8), fill=colour)
    elif info.noun == "door":
        draw.rectangle((m, m, s - 1 - m, s - 1 - m), outline=colour, width=max(1, s // 10))
        h = max(1, s // 12)
        draw.ellipse((s * 2 // 3 - h, s // 2 - h, s * 2 // 3 + h, s // 2 + h), fill=colour)
    else:  # baba: a triangle pointing where it faces (0 up, 1 right, 2 down, 3 left)
        points = [(-0.35, -0.3), (0.38, 0.0), (-0.35, 0.3)]  # pointing right
        turn = {0: (0, -1), 1: (1, 0), 2: (0, 1), 3: (-1, 0)}[info.direction]
        c = s / 2
        rotated = [
            (c + s * (px * turn[0] - py * turn[1]), c + s * (px * turn[1] + py * turn[0]))
            for px, py in points
        ]
        draw.polygon(rotated, fill=colour)


def _draw_text(draw: ImageDraw.ImageDraw, code: int, s: int) -> None:
    info = INFO[code]
    colour_word = info.kind == KIND_COLOUR_TEXT
    fill = PALETTE[info.word] if colour_word else _TEXT_BACKGROUND[info.kind]
    m = max(1, s // 16)
    draw.rectangle((m, m, s - 1 - m, s - 1 - m), fill=fill)
    ink = (20, 20, 20) if sum(fill) > 450 else (250, 250, 250)
    if s >= 12:
        draw.text((s / 2, s / 2), info.word.upper(), fill=ink, font=_label_font(s), anchor="mm")


@lru_cache(maxsize=2048)
def tile(code: int, tile_size: int) -> np.ndarray:
    """The RGBA tile of one thing, ``(tile_size, tile_size, 4)`` uint8 (alpha 0 = see-through).

    Cached: a pure function of its arguments. Raises ``IndexError`` for an unknown code.
    """
    s = tile_size
    image = Image.new("RGBA", (s, s), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    info = INFO[code]
    if code == BORDER:
        draw.rectangle((0, 0, s - 1, s - 1), fill=(70, 62, 58, 255))
        draw.line((0, s // 2, s - 1, s // 2), fill=(45, 40, 38, 255))
        draw.line((s // 2, 0, s // 2, s // 2), fill=(45, 40, 38, 255))
    elif info.kind == KIND_OBJECT:
        _draw_object(draw, code, s)
    elif info.is_text:
        _draw_text(draw, code, s)
    return np.asarray(image, dtype=np.uint8)


@lru_cache(maxsize=4096)
def cell_image(cell: int, tile_size: int) -> np.ndarray:
    """The RGB image of one packed cell stack (``grid.py``), bottom thing first, over the
    background with its grid lines: ``(tile_size, tile_size, 3)`` uint8. Cached (pure)."""
    s = tile_size
    view = np.empty((s, s, 3), dtype=np.uint16)
    view[:] = BACKGROUND
    view[0, :] = GRID_LINE
    view[:, 0] = GRID_LINE
    for code in reversed(stack_codes(cell)):
        rgba = tile(code, s).astype(np.uint16)
        alpha = rgba[:, :, 3:4]
        view = (rgba[:, :, :3] * alpha + view * (255 - alpha)) // 255
    image = view.astype(np.uint8)
    image.flags.writeable = False
    return image


def render(board: Board, tile_size: int = 32) -> np.ndarray:
    """The whole grid as an RGB frame ``(H * tile_size, W * tile_size, 3)`` uint8.

    Raises ``ValueError`` when ``tile_size`` < 4.
    """
    if tile_size < 4:
        raise ValueError(f"tile_size must be >= 4, got {tile_size}")
    s = tile_size
    frame = np.empty((board.height * s, board.width * s, 3), dtype=np.uint8)
    for i, cell in enumerate(board.cells):
        y, x = divmod(i, board.width)
        frame[y * s:(y + 1) * s, x * s:(x + 1) * s] = cell_image(cell, s)
    return frame

"""A picture of a text-only game: the last observation drawn on a fixed-size canvas.

TextWorld has no graphics. ``Game.render`` must still return an RGB frame, so we draw the text
(word-wrapped, dark on light, PIL's default font). Agents never receive this frame as their
observation image: ``AgentView.image`` stays None even with ``render_image``, and the agent side
then falls back to text, as BALROG does for TextWorld.
"""

from __future__ import annotations

import textwrap

import numpy as np
from PIL import Image, ImageDraw, ImageFont

WIDTH = 640
HEIGHT = 480
_MARGIN = 8
_BACKGROUND = (250, 248, 240)
_INK = (20, 20, 20)


def text_frame(text: str, width: int = WIDTH, height: int = HEIGHT) -> np.ndarray:
    """``text`` drawn on a ``(height, width, 3)`` uint8 RGB canvas.

    Paragraph breaks are kept and long lines wrapped to the canvas; lines that do not fit are cut
    and the last visible line is replaced by ``...``.
    """
    font = ImageFont.load_default()
    image = Image.new("RGB", (width, height), _BACKGROUND)
    draw = ImageDraw.Draw(image)
    char_w = max(1.0, draw.textlength("M" * 10, font=font) / 10)
    _, top, _, bottom = draw.textbbox((0, 0), "Mg", font=font)
    line_h = int(max(1, bottom - top)) + 3
    columns = max(10, int((width - 2 * _MARGIN) / char_w))
    rows = max(1, (height - 2 * _MARGIN) // line_h)

    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(paragraph, columns) or [""])
    if len(lines) > rows:
        lines = [*lines[: rows - 1], "..."]
    for row, line in enumerate(lines):
        draw.text((_MARGIN, _MARGIN + row * line_h), line, fill=_INK, font=font)
    return np.asarray(image, dtype=np.uint8)

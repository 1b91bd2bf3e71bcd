"""An episode's frames on disk (``eval.save_images``, ``moria replay --frames``).

Layout: one folder of PNG files beside the episode's JSON, named after it::

    <out>/<env>/<task_dir>/<task_dir>_run_<NN>.frames/00000.png   the state before step 0
    <out>/<env>/<task_dir>/<task_dir>_run_<NN>.frames/00001.png   the state after step 0
    ...

``NNNNN.png`` is the env's full-state frame (the Session ``render`` call, RGB) after ``NNNNN``
env steps, so a step record with ``step = s`` acted on frame ``s`` and its result is frame
``s + 1``. The episode JSON names the folder (``frames``, relative to the JSON) and how many
frames it holds (``frame_count``). Every family renders; TextWorld has no picture of its own
and its frame is its observation text drawn on a page.

Each frame is written atomically (``moria.files``) as it arrives, off the event loop, so a long
episode never holds its frames in memory and a crash keeps the frames written so far. A new
attempt of the same episode (a re-queue, a resume) starts from an empty folder.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path
from typing import Final

from moria.codecs import png_bytes
from moria.common.v1 import types_pb2
from moria.files import atomic_write_bytes

#: Suffix of an episode's frame folder (after the episode JSON's stem).
FRAMES_SUFFIX: Final = ".frames"
#: Digits of a frame's file name (``00042.png``): episodes of up to 99,999 steps sort by name.
FRAME_DIGITS: Final = 5
_FRAME_NAME = re.compile(r"^(\d{5,})\.png$")


def frames_dir(json_path: Path) -> Path:
    """The frame folder of the episode whose JSON is ``json_path``."""
    return json_path.with_name(json_path.stem + FRAMES_SUFFIX)


def frame_name(step: int) -> str:
    """The file name of the frame after ``step`` env steps (``00042.png``); step >= 0."""
    if step < 0:
        raise ValueError(f"a frame's step is >= 0; got {step}")
    return f"{step:0{FRAME_DIGITS}d}.png"


def list_frames(folder: Path) -> dict[int, Path]:
    """{env steps taken: path} of the frames in ``folder`` (empty when there is none or it is
    a link); files not named like a frame, and links, are ignored (a frame is a file the run
    wrote, never a pointer elsewhere)."""
    if folder.is_symlink() or not folder.is_dir():
        return {}
    found: dict[int, Path] = {}
    for path in folder.iterdir():
        match = _FRAME_NAME.match(path.name)
        if match and path.is_file() and not path.is_symlink():
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


class FrameRecorder:
    """Writes one episode's frames into ``folder`` as they come.

    ``start`` empties the folder (an earlier attempt's frames go); ``add(step, image)`` writes
    the frame after ``step`` env steps (PNG; a RAW_RGB image is encoded). ``count`` is the
    number written. Raises OSError when the folder cannot be written and
    ``moria.codecs.CodecError`` for an image that is not a PNG or a RAW_RGB frame.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    async def start(self) -> None:
        """Make the folder empty (created when missing)."""
        await asyncio.to_thread(self._reset)

    def _reset(self) -> None:
        if self.folder.is_dir():
            shutil.rmtree(self.folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count = 0

    async def add(self, step: int, image: types_pb2.Image) -> None:
        """Write the frame after ``step`` env steps."""
        path = self.folder / frame_name(step)
        await asyncio.to_thread(_write_png, path, image)
        self.count += 1


def _write_png(path: Path, image: types_pb2.Image) -> None:
    atomic_write_bytes(path, png_bytes(image))

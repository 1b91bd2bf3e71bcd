"""An episode's saved frames as an animated GIF (the viewer's export), written with Pillow."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Final

from PIL import Image

from orchestrator.store.frames import list_frames

#: The most frames one GIF holds (the first ones); a longer episode's GIF says so in its name
#: of the download, and its full frames stay on disk.
MAX_GIF_FRAMES: Final = 2000
#: How long each frame shows (milliseconds).
FRAME_MS: Final = 200


def episode_gif(folder: Path, *, max_frames: int = MAX_GIF_FRAMES) -> bytes:
    """The frames of ``folder`` (``orchestrator.store.frames`` layout), in step order, as an
    animated GIF that loops. Raises FileNotFoundError when the folder holds no frame and
    ValueError naming a frame that is no readable image."""
    frames = list(list_frames(folder).values())[:max_frames]
    if not frames:
        raise FileNotFoundError(f"no frames in {folder}")
    images = []
    for path in frames:
        try:
            with Image.open(path) as image:
                images.append(image.convert("RGB"))
        except (OSError, ValueError) as exc:  # PIL's UnidentifiedImageError is an OSError
            raise ValueError(f"{path.name} is not a readable PNG frame ({exc})") from None
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:],
                   duration=FRAME_MS, loop=0)
    return out.getvalue()

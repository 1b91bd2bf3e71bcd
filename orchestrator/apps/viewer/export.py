"""An episode's saved frames as a video (the viewer's export): an animated GIF written with
Pillow, or an MP4 (H.264) written by imageio through the ffmpeg binary the imageio-ffmpeg
package ships."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Final

from PIL import Image

from orchestrator.store.frames import list_frames

#: The most frames one video holds: the first ones of a longer episode (its frames all stay on
#: disk).
MAX_VIDEO_FRAMES: Final = 2000
#: How long each frame shows (milliseconds).
FRAME_MS: Final = 200


def _frames(folder: Path, max_frames: int) -> list[Path]:
    frames = list(list_frames(folder).values())[:max_frames]
    if not frames:
        raise FileNotFoundError(f"no frames in {folder}")
    return frames


def _rgb(path: Path) -> Image.Image:
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, ValueError) as exc:  # PIL's UnidentifiedImageError is an OSError
        raise ValueError(f"{path.name} is not a readable PNG frame ({exc})") from None


def episode_gif(folder: Path, *, max_frames: int = MAX_VIDEO_FRAMES) -> bytes:
    """The frames of ``folder`` (``orchestrator.store.frames`` layout), in step order, as an
    animated GIF that loops. Raises FileNotFoundError when the folder holds no frame and
    ValueError naming a frame that is no readable image."""
    images = [_rgb(path) for path in _frames(folder, max_frames)]
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:],
                   duration=FRAME_MS, loop=0)
    return out.getvalue()


def episode_mp4(folder: Path, *, max_frames: int = MAX_VIDEO_FRAMES) -> bytes:
    """The frames of ``folder`` as an H.264 MP4 at 1000 / ``FRAME_MS`` frames per second
    (sizes padded to even pixels, as yuv420p needs). Raises FileNotFoundError when the folder
    holds no frame, ValueError naming a frame that is no readable image, and ImportError
    without imageio-ffmpeg."""
    import imageio.v2 as imageio
    import imageio_ffmpeg  # noqa: F401  (its ffmpeg binary; a clear ImportError without it)
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="moria-mp4-") as tmp:
        path = Path(tmp) / "episode.mp4"
        writer = imageio.get_writer(path, format="FFMPEG", fps=1000 / FRAME_MS,
                                    codec="libx264", pixelformat="yuv420p",
                                    macro_block_size=2, ffmpeg_log_level="error")
        try:
            for frame in _frames(folder, max_frames):
                writer.append_data(np.asarray(_rgb(frame)))
        finally:
            writer.close()
        return path.read_bytes()

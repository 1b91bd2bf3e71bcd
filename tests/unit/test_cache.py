"""moria.cache: folders and files built readable by all, and locks that leave no file behind."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from moria.cache import file_lock, make_dirs, make_readable


def test_make_dirs_and_make_readable_ignore_a_strict_umask(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(mode=0o700)
    old = os.umask(0o077)
    try:
        folder = make_dirs(tmp_path / "a" / "b" / "c")
        (folder / "f").write_text("x")
        make_readable(folder / "f", folder / "missing")  # a missing file is skipped
    finally:
        os.umask(old)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700  # existing folders untouched
    for made in (tmp_path / "a" / "b", folder):
        assert made.stat().st_mode & 0o777 == 0o755
    assert (folder / "f").stat().st_mode & 0o777 == 0o644
    assert make_dirs(folder) == folder  # exists already: fine


def test_a_removed_lock_still_excludes_and_leaves_no_file(tmp_path: Path) -> None:
    lock = tmp_path / "sub" / ".item.lock"
    counter = tmp_path / "counter"
    counter.write_text("0")
    inside: list[int] = []

    def bump() -> None:
        for _ in range(5):
            with file_lock(lock, remove=True):
                inside.append(1)
                assert len(inside) == 1, "two holders at once"
                value = int(counter.read_text())
                time.sleep(0.001)
                counter.write_text(str(value + 1))
                inside.pop()

    threads = [threading.Thread(target=bump) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.read_text() == "30"
    assert not lock.exists()
    with file_lock(lock):  # the default keeps the file, as before
        pass
    assert lock.exists()

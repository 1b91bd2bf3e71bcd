"""``moria serve env`` settings checked before any server starts: one line naming what was
wrong and what is allowed, not a traceback."""

from __future__ import annotations

import pytest

from env_server.__main__ import build_parser, serve
from moria import aio


@pytest.mark.parametrize(("flags", "expected"), [
    # a typo in --isolate would silently leave a family without worker processes
    (["--families", "nle,minihack", "--isolate", "nle,minihak"],
     "process isolation asked for 'minihak', which this server does not host; "
     "hosted families: nle, minihack"),
    (["--families", "babyai", "--isolate", "nle"],
     "process isolation asked for 'nle', which this server does not host; "
     "hosted families: babyai"),
    (["--families", "babyai", "--capacity", "0"], "capacity must be >= 1, got 0"),
])
def test_a_bad_setting_is_one_line_naming_it(flags: list[str], expected: str) -> None:
    args = build_parser().parse_args([*flags, "--address", "127.0.0.1:0"])
    with pytest.raises(SystemExit) as exc:
        aio.run(serve(args))
    assert str(exc.value) == f"moria serve env: {expected}"

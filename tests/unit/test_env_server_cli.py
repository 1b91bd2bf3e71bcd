"""``moria serve env`` flags checked before any server starts."""

from __future__ import annotations

import pytest

from env_server.__main__ import build_parser, serve
from moria import aio


@pytest.mark.parametrize(("flags", "named"), [
    (["--families", "nle,minihack", "--isolate", "nle,minihak"], "'minihak'"),
    (["--families", "babyai", "--isolate", "nle"], "'nle'"),
])
def test_isolate_naming_a_family_the_server_does_not_host_is_refused(
        flags: list[str], named: str) -> None:
    """A typo in ``--isolate`` would silently leave a family without worker processes."""
    args = build_parser().parse_args([*flags, "--address", "127.0.0.1:0"])
    with pytest.raises(SystemExit) as exc:
        aio.run(serve(args))
    message = str(exc.value)
    assert named in message and "which this server does not host" in message
    assert message.endswith("hosted families: " + flags[1].replace(",", ", "))


"""moria.observations.observation_text: the one flattening of an observation's text channels
(trajectories and demonstrations both store it)."""

from __future__ import annotations

from moria.common.v1 import types_pb2
from moria.observations import observation_text, text_channels


def _obs(long_term: str, short_term: str) -> types_pb2.Observation:
    return types_pb2.Observation(text={"long_term_context": long_term,
                                       "short_term_context": short_term})


def test_long_term_then_short_term_on_the_next_line() -> None:
    text = observation_text(_obs("a wall ahead", "you hold a key"))
    assert text == "a wall ahead\nyou hold a key"


def test_one_channel_alone_is_kept_as_it_is() -> None:
    assert observation_text(_obs("a wall ahead\n", "")) == "a wall ahead\n"
    assert observation_text(_obs("", "you hold a key")) == "you hold a key"
    assert observation_text(_obs("", "")) == ""


def test_only_the_outer_newlines_are_removed() -> None:
    assert observation_text(_obs("a wall\n", "\nkey")) == "a wall\n\n\nkey"
    assert observation_text(_obs("\n\na wall", "key\n")) == "a wall\nkey"


def test_the_typed_channels_come_first_and_the_map_serves_older_clients() -> None:
    typed = types_pb2.Observation(long_term_context="typed wall", short_term_context="typed key",
                                  text={"long_term_context": "map wall"})
    assert text_channels(typed) == ("typed wall", "typed key")
    assert text_channels(_obs("map wall", "map key")) == ("map wall", "map key")
    assert observation_text(typed) == "typed wall\ntyped key"

"""Moria's garbage-collector settings (moria/gc_tuning.py): the young generation's threshold is
raised, the heap of a started process is frozen, and MORIA_GC=default leaves CPython's
collector as it is."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator

import pytest

from moria import gc_tuning


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


@pytest.mark.usefixtures("restored_gc")
def test_tune_raises_only_the_young_generation_threshold() -> None:
    gc.set_threshold(700, 10, 10)
    assert gc_tuning.tune({}) is True
    assert gc.get_threshold() == (gc_tuning.GEN0_THRESHOLD, 10, 10)


@pytest.mark.usefixtures("restored_gc")
def test_freeze_collects_then_moves_the_live_heap_to_the_permanent_generation() -> None:
    gc.unfreeze()

    class Node:
        def __init__(self) -> None:
            self.me = self  # a reference cycle: only the cyclic collector frees it

    gc.disable()  # so that only freeze's own collection can free the garbage below
    try:
        garbage = Node()
        collected = weakref.ref(garbage)
        del garbage
        kept = Node()
        assert collected() is not None
        assert gc_tuning.freeze({}) is True
    finally:
        gc.enable()
    assert collected() is None  # garbage already was collected first, never frozen
    assert gc.get_freeze_count() > 0
    assert all(obj is not kept for obj in gc.get_objects())  # frozen: walked no more


@pytest.mark.usefixtures("restored_gc")
def test_moria_gc_default_leaves_the_collector_alone() -> None:
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    assert gc_tuning.tune({"MORIA_GC": "default"}) is False
    assert gc_tuning.freeze({"MORIA_GC": " Default "}) is False
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.get_freeze_count() == 0


def test_a_started_server_runs_with_the_settings() -> None:
    # server_main, the entry point every server shares, applies the threshold before it serves
    script = ("import argparse, gc\n"
              "from moria import server\n"
              "def parser():\n"
              "    p = argparse.ArgumentParser()\n"
              "    p.add_argument('--log-level', default='WARNING')\n"
              "    return p\n"
              "async def serve(args):\n"
              "    print(gc.get_threshold()[0], flush=True)\n"
              "server.server_main(parser, serve, [])\n")
    for environ, threshold in (({}, gc_tuning.GEN0_THRESHOLD), ({"MORIA_GC": "default"}, 700)):
        shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                               timeout=60, check=True, env={**os.environ, **environ}).stdout
        assert shown.split() == [str(threshold)]

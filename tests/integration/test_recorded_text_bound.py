"""A model that answers far more than any ``max_tokens`` allows (a server ignoring it): the
episode plays on, and what its record keeps of each answer (and so its episode files) is cut
to ``MAX_RECORDED_TEXT_CHARS`` with a line counting the rest."""

from __future__ import annotations

import json
from pathlib import Path

from moria.records import MAX_RECORDED_TEXT_CHARS
from orchestrator.plan.spec import load_spec
from orchestrator.store.episodes import write_episode
from tests.support.fake_openai import FakeOpenAI
from tests.support.servers import play_one_episode

#: One answer: a valid action after about four times the recorded bound of filler.
FILLER = "turtles " * (MAX_RECORDED_TEXT_CHARS // 2)


async def test_a_huge_answer_is_recorded_cut_and_counted(tmp_path: Path) -> None:
    answer = FILLER + "go forward"
    with FakeOpenAI(reply=answer) as server:
        spec = load_spec(None, ["client.client_name=vllm", f"client.base_url={server.base_url}",
                                "client.model_id=fake", "client.max_retries=0",
                                "eval.max_steps_per_episode=2"])
        record = await play_one_episode(spec, "babyai", "BabyAI-MixedTrainLocal-v0/goto", 3)
    assert record.end_reason == "truncated" and len(record.steps) == 2
    rest = len(answer) - MAX_RECORDED_TEXT_CHARS
    for step in record.steps:
        # the policy read the whole answer (its action came from the end of it) ...
        assert step.action == "go forward" and step.valid
        # ... and the record keeps the first MAX_RECORDED_TEXT_CHARS characters of it
        kept, _, note = step.raw_completion.rpartition("\n")
        assert kept == answer[:MAX_RECORDED_TEXT_CHARS]
        assert note == f"[… {rest:,} more characters cut]"
    # the episode's files, as the run writes them, hold the cut text
    json_path, csv_path = write_episode(tmp_path, record)
    assert json_path.stat().st_size < 4 * MAX_RECORDED_TEXT_CHARS
    assert csv_path.stat().st_size < 4 * MAX_RECORDED_TEXT_CHARS
    document = json.loads(json_path.read_text())
    assert document["steps"][0]["raw_completion"].endswith(f"[… {rest:,} more characters cut]")

"""Our MixedTrainLocal level: layout rules of BALROG's level, per kind."""

from __future__ import annotations

import re

import pytest
from minigrid.envs.babyai.core.verifier import (
    AfterInstr,
    BeforeInstr,
    GoToInstr,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
)

from env_server.families.babyai.levels import BANNED_PAIRS, MixedTrainLocalLevel
from env_server.families.babyai.tasks import KIND_MAX_STEPS, KINDS, kind_for_seed, reduce_seed

SEEDS = range(60)
COLORS = "(red|green|blue|purple|yellow|grey)"
OBJ = rf"(the|a) {COLORS} (key|ball|box)"
TEMPLATES = {
    "goto": rf"go to {OBJ}",
    "pickup": rf"pick up {OBJ}",
    "open": r"open the( (yellow|green|blue|purple))? door",
    "putnext": rf"put {OBJ} next to {OBJ}",
    "pick_up_seq_go_to": rf"(pick up {OBJ}, then go to {OBJ}|go to {OBJ} after you pick up {OBJ})",
}
TARGETS = {"goto": 1, "pickup": 1, "open": 1, "putnext": 2, "pick_up_seq_go_to": 2}


def _objects(env) -> list[tuple[tuple[int, int], object]]:
    found = []
    for x in range(env.width):
        for y in range(env.height):
            cell = env.grid.get(x, y)
            if cell is not None and cell.type in ("key", "ball", "box", "door"):
                found.append(((x, y), cell))
    return found


def _descs(instr):
    if isinstance(instr, (BeforeInstr, AfterInstr)):
        return _descs(instr.instr_a) + _descs(instr.instr_b)
    if isinstance(instr, PutNextInstr):
        return [instr.desc_move, instr.desc_fixed]
    return [instr.desc]


@pytest.fixture(scope="module", params=KINDS)
def episodes(request):
    kind = request.param
    env = MixedTrainLocalLevel(kind)
    out = []
    for seed in SEEDS:
        env.reset(seed=seed)
        out.append(
            {
                "mission": env.mission,
                "size": (env.width, env.height),
                "max_steps": env.max_steps,
                "agent": tuple(int(v) for v in env.agent_pos),
                "front": env.grid.get(*env.front_pos),
                "objects": [(pos, obj.type, obj.color, obj) for pos, obj in _objects(env)],
                "instrs": env.instrs,
                "reachable": env.check_objs_reachable(raise_exc=False),
            }
        )
    return kind, out


def test_grid_size_and_max_steps(episodes) -> None:
    kind, eps = episodes
    for ep in eps:
        assert ep["size"] == ((15, 8) if kind == "open" else (8, 8))
        assert ep["max_steps"] == KIND_MAX_STEPS[kind]


def test_mission_template_and_banned_pairs(episodes) -> None:
    kind, eps = episodes
    for ep in eps:
        assert re.fullmatch(TEMPLATES[kind], ep["mission"]), ep["mission"]
        assert not any(pair in ep["mission"] for pair in BANNED_PAIRS)


def test_object_count_without_distractors(episodes) -> None:
    kind, eps = episodes
    for ep in eps:
        types = sorted(t for _, t, _, _ in ep["objects"])
        if kind == "open":
            assert types == ["door", "key"]
        else:
            assert len(types) == TARGETS[kind]
            assert set(types) <= {"key", "ball", "box"}


def test_agent_placement(episodes) -> None:
    kind, eps = episodes
    for ep in eps:
        front = ep["front"]
        assert front is None or front.type == "wall"
        if kind != "open":
            ax, ay = ep["agent"]
            for (x, y), *_ in ep["objects"]:
                assert abs(x - ax) + abs(y - ay) >= 2


def test_everything_reachable(episodes) -> None:
    _, eps = episodes
    assert all(ep["reachable"] for ep in eps)


def test_article_follows_number_of_matches(episodes) -> None:
    _, eps = episodes
    for ep in eps:
        for desc in _descs(ep["instrs"]):
            if desc.type == "door":
                continue
            count = sum(1 for _, t, c, _ in ep["objects"] if (t, c) == (desc.type, desc.color))
            article = "the" if count == 1 else "a"
            assert f"{article} {desc.color} {desc.type}" in ep["mission"]


def test_layouts_vary_with_the_seed(episodes) -> None:
    kind, eps = episodes
    # open has only five possible missions
    assert len({ep["mission"] for ep in eps}) >= (5 if kind == "open" else 10)
    assert len({ep["agent"] for ep in eps}) >= 15
    assert len({tuple(pos for pos, *_ in ep["objects"]) for ep in eps}) >= 20


def test_same_seed_same_layout() -> None:
    for kind in KINDS:
        a, b = MixedTrainLocalLevel(kind), MixedTrainLocalLevel(kind)
        b.reset(seed=999)  # unrelated history must not matter
        for seed in (3, 2**63 + 5):
            a.reset(seed=seed)
            b.reset(seed=seed)
            assert a.mission == b.mission
            assert a.grid.encode().tobytes() == b.grid.encode().tobytes()
            assert tuple(a.agent_pos) == tuple(b.agent_pos) and a.agent_dir == b.agent_dir


def test_open_layout_details() -> None:
    env = MixedTrainLocalLevel("open")
    with_color = 0
    rows = set()
    for seed in range(100):
        env.reset(seed=seed)
        ((door_pos, door),) = [(p, o) for p, o in _objects(env) if o.type == "door"]
        ((key_pos, key),) = [(p, o) for p, o in _objects(env) if o.type == "key"]
        assert door_pos[0] == 7 and door.is_locked
        assert door.color in ("yellow", "green", "blue", "purple")
        assert key.color == door.color
        assert (key_pos[0] < 7) == (env.agent_pos[0] < 7)  # key in the agent's room
        assert isinstance(env.instrs, OpenInstr)
        rows.add(door_pos[1])
        with_color += door.color in env.mission
    assert 25 <= with_color <= 75
    assert len(rows) >= 4


def test_instruction_structure_per_kind() -> None:
    expected = {"goto": GoToInstr, "pickup": PickupInstr, "putnext": PutNextInstr}
    forms = set()
    for kind in KINDS:
        env = MixedTrainLocalLevel(kind)
        for seed in range(40):
            env.reset(seed=seed)
            if kind in expected:
                assert type(env.instrs) is expected[kind]
            if kind == "putnext":
                move, fixed = env.instrs.desc_move, env.instrs.desc_fixed
                assert not set(map(id, move.obj_set)) & set(map(id, fixed.obj_set))
                assert not env.instrs.objs_next()
            if kind == "pick_up_seq_go_to":
                forms.add(type(env.instrs))
    assert forms == {BeforeInstr, AfterInstr}


@pytest.mark.parametrize("kind", KINDS)
def test_num_dists_adds_distractors(kind: str) -> None:
    env = MixedTrainLocalLevel(kind, num_dists=4)
    for seed in range(10):
        env.reset(seed=seed)
        objs = _objects(env)
        assert len(objs) == TARGETS[kind] + (1 if kind == "open" else 0) + 4
        assert env.check_objs_reachable(raise_exc=False)
        assert not any(pair in env.mission for pair in BANNED_PAIRS)


def test_kind_for_seed_is_deterministic_and_covers_all_kinds() -> None:
    kinds = [kind_for_seed(s) for s in range(200)]
    assert kinds == [kind_for_seed(s) for s in range(200)]
    assert set(kinds) == set(KINDS)
    assert min(kinds.count(k) for k in KINDS) >= 20


def test_reduce_seed() -> None:
    assert reduce_seed(5) == 5
    assert reduce_seed(2**64 - 1) == 2**64 - 1
    assert reduce_seed(2**64 + 3) == 3
    assert 0 <= reduce_seed(-1) < 2**64


def test_bad_kind_rejected() -> None:
    with pytest.raises(ValueError):
        MixedTrainLocalLevel("dance")

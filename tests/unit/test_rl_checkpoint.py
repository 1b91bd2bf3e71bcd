"""The moria-mlp checkpoint format and the rl player: round trip, exact logits, one clear error
per kind of bad file, legal-only moves, and refusal of the wrong env or task."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest

from agent_server.rl.checkpoint import (
    CheckpointError,
    CheckpointMetadata,
    InputSpec,
    MlpPolicy,
    load_checkpoint,
    load_checkpoint_cached,
    save_checkpoint,
)
from agent_server.strategies import create_strategy
from agent_server.strategies.rl import RLStrategy
from agent_server.turn import EpisodeContext, TurnInput
from moria.config import AgentConfig, ClientConfig

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "examples" / "checkpoints" / "connect_four_v3_mlp.npz"
COLUMNS = [f"column {i + 1}" for i in range(7)]


def _meta(**changes: object) -> CheckpointMetadata:
    base: dict = dict(env="pettingzoo", tasks=("connect_four_v3",), observation_key="observation",
                      observation_shape=(6, 7, 2), preprocess_scale=1.0, activation="relu",
                      action_names=tuple(COLUMNS), trained_with={"seed": 0})
    base.update(changes)
    return CheckpointMetadata(**base)


def _net(rng: np.random.Generator, sizes: tuple[int, ...] = (84, 16, 7)) -> tuple[list, list]:
    weights = [rng.normal(size=(o, i)).astype(np.float32) for i, o in itertools.pairwise(sizes)]
    biases = [rng.normal(size=(o,)).astype(np.float32) for o in sizes[1:]]
    return weights, biases


def _write_raw(path: Path, meta: dict, arrays: dict[str, np.ndarray]) -> Path:
    blob = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    np.savez(path, metadata=blob, **arrays)
    return path


def _ctx(checkpoint: str, *, env: str = "pettingzoo", task: str = "connect_four_v3",
         names: list[str] | None = None, seed: int = 7) -> EpisodeContext:
    return EpisodeContext(
        instruction="play", action_names=COLUMNS if names is None else names,
        default_action="", agent=AgentConfig(type="rl", checkpoint=checkpoint),
        client=ClientConfig(), seed=seed, env_name=env, task=task, agent_id="player_0")


def _turn(obs: np.ndarray | None, mask: list[bool], legal: list[str] | None = None) -> TurnInput:
    tensors = {} if obs is None else {"observation": obs}
    return TurnInput(step=0, long_term_context="", short_term_context="", image_png=None,
                     legal_actions=legal if legal is not None else
                     [n for n, ok in zip(COLUMNS, mask, strict=True) if ok],
                     info={}, tensors=tensors, action_mask=mask)


def test_round_trip_keeps_weights_metadata_and_logits(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    weights, biases = _net(rng, (84, 32, 16, 7))
    path = save_checkpoint(tmp_path / "sub" / "p.npz", weights, biases, _meta())
    policy = load_checkpoint(path)
    assert policy.metadata == _meta()
    assert [w.shape for w in policy.weights] == [(32, 84), (16, 32), (7, 16)]
    for a, b in zip(policy.weights + policy.biases, weights + biases, strict=True):
        assert a.dtype == np.float32 and np.array_equal(a, b)
    obs = rng.integers(0, 2, size=(6, 7, 2)).astype(np.int8)
    direct = MlpPolicy(weights, biases, _meta()).logits(obs)
    assert np.array_equal(policy.logits(obs), direct)
    assert np.array_equal(policy.logits(obs), policy.logits(obs.copy()))
    with np.load(path) as archive:  # the documented layout, readable without our code
        assert sorted(archive.files) == ["layer0.bias", "layer0.weight", "layer1.bias",
                                         "layer1.weight", "layer2.bias", "layer2.weight",
                                         "metadata"]
        meta = json.loads(archive["metadata"].tobytes().decode("utf-8"))
    assert meta["format"] == "moria-mlp" and meta["version"] == 1
    assert meta["preprocess"] == {"op": "flatten", "scale": 1.0}
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["p.npz"]  # no temp file left


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_logits_equal_a_hand_computation_on_a_two_layer_net(activation: str) -> None:
    # input: observation shape (2,), scale 0.5; hidden 2 units; 3 actions
    w0 = np.array([[1.0, -2.0], [0.5, 1.0]], dtype=np.float32)
    b0 = np.array([0.25, -3.0], dtype=np.float32)
    w1 = np.array([[1.0, 0.0], [-1.0, 2.0], [0.0, 0.0]], dtype=np.float32)
    b1 = np.array([0.0, 1.0, -0.5], dtype=np.float32)
    meta = _meta(observation_shape=(2,), preprocess_scale=0.5, activation=activation,
                 action_names=("a", "b", "c"))
    policy = MlpPolicy([w0, w1], [b0, b1], meta)
    obs = np.array([2, 1], dtype=np.int8)  # scaled: x = [1.0, 0.5]
    # hidden pre-activation: [1*1 - 2*0.5 + 0.25, 0.5*1 + 1*0.5 - 3] = [0.25, -2.0]
    if activation == "relu":
        h = [0.25, 0.0]
    else:
        h = [float(np.tanh(np.float32(0.25))), float(np.tanh(np.float32(-2.0)))]
    expected = [h[0], -h[0] + 2 * h[1] + 1.0, -0.5]
    got = policy.logits(obs)
    assert got.shape == (3,) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def _good_arrays() -> dict[str, np.ndarray]:
    weights, biases = _net(np.random.default_rng(2))
    return {"layer0.weight": weights[0], "layer0.bias": biases[0],
            "layer1.weight": weights[1], "layer1.bias": biases[1]}


@pytest.mark.parametrize(("case", "expected"), [
    ("missing", "checkpoint file not found"),
    ("not_npz", "not a NumPy .npz archive of plain arrays"),
    ("pickled", "not a NumPy .npz archive of plain arrays"),
    ("no_metadata", "no 'metadata' entry"),
    ("metadata_not_json", "'metadata' is not UTF-8 JSON"),
    ("format", "unknown checkpoint format 'torch-state-dict'; expected 'moria-mlp'"),
    ("version", "unsupported moria-mlp version 3; this reader knows versions [1, 2]"),
    ("key_missing", "metadata lacks ['action_names']"),
    ("activation", "metadata 'activation' = 'gelu'; expected one of ['relu', 'tanh']"),
    ("no_chain", "layer1.weight has shape [7, 15]; its input size must be 16"),
    ("first_layer", "layer0.weight has shape [16, 80]; its input size must be 84"),
    ("bias_shape", "layer0.bias has shape [3]; expected [16]"),
    ("action_count", "the last layer has 7 outputs but metadata lists 6 action_names"),
    ("missing_bias", "layer1.bias is missing"),
    ("int_weights", "layer0.weight has dtype int64; expected float32"),
])
def test_each_bad_file_gives_its_clear_error(tmp_path: Path, case: str, expected: str) -> None:
    path = tmp_path / f"{case}.npz"
    meta = _meta().to_json()
    arrays = _good_arrays()
    if case == "missing":
        pass
    elif case == "not_npz":
        path.write_text("this is not a zip file")
    elif case == "pickled":  # object arrays need pickle, which the loader refuses
        np.savez(path, metadata=np.array([{"format": "moria-mlp"}], dtype=object), **arrays)
    elif case == "no_metadata":
        np.savez(path, **arrays)
    elif case == "metadata_not_json":
        np.savez(path, metadata=np.frombuffer(b"{not json", dtype=np.uint8), **arrays)
    else:
        if case == "format":
            meta["format"] = "torch-state-dict"
        elif case == "version":
            meta["version"] = 3
        elif case == "key_missing":
            del meta["action_names"]
        elif case == "activation":
            meta["activation"] = "gelu"
        elif case == "no_chain":
            arrays["layer1.weight"] = arrays["layer1.weight"][:, :15]
        elif case == "first_layer":
            arrays["layer0.weight"] = arrays["layer0.weight"][:, :80]
        elif case == "bias_shape":
            arrays["layer0.bias"] = arrays["layer0.bias"][:3]
        elif case == "action_count":
            meta["action_names"] = COLUMNS[:6]
        elif case == "missing_bias":
            del arrays["layer1.bias"]
        elif case == "int_weights":
            arrays["layer0.weight"] = np.ones((16, 84), dtype=np.int64)
        _write_raw(path, meta, arrays)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_observation_shape_mismatch_at_act_time_names_file_and_shapes(tmp_path: Path) -> None:
    weights, biases = _net(np.random.default_rng(3))
    path = save_checkpoint(tmp_path / "p.npz", weights, biases, _meta())
    policy = load_checkpoint(path)
    with pytest.raises(CheckpointError, match=r"shape \[3, 3, 2\], but the checkpoint expects "
                                              r"\[6, 7, 2\]") as err:
        policy.logits(np.zeros((3, 3, 2), dtype=np.int8))
    assert str(path) in str(err.value)
    strategy = RLStrategy(_ctx(str(path)), None)
    with pytest.raises(ValueError, match="expects \\[6, 7, 2\\]"):
        asyncio.run(strategy.act(_turn(np.zeros((3, 3, 2), dtype=np.int8), [True] * 7)))


def test_save_refuses_layers_that_do_not_fit(tmp_path: Path) -> None:
    weights, biases = _net(np.random.default_rng(4))
    with pytest.raises(CheckpointError, match="7 outputs but metadata lists 3"):
        save_checkpoint(tmp_path / "p.npz", weights, biases, _meta(action_names=("a", "b", "c")))
    assert not (tmp_path / "p.npz").exists()


def _biased_checkpoint(tmp_path: Path, preferred: list[float]) -> Path:
    """A one-layer net whose logits are exactly ``preferred`` (zero weights)."""
    w = np.zeros((7, 84), dtype=np.float32)
    b = np.array(preferred, dtype=np.float32)
    return save_checkpoint(tmp_path / "biased.npz", [w], [b], _meta())


def test_masking_never_picks_an_illegal_move(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    weights, biases = _net(rng)
    path = save_checkpoint(tmp_path / "p.npz", weights, biases, _meta())
    for seed in range(30):
        strategy = RLStrategy(_ctx(str(path), seed=seed), None, sample=seed % 2 == 1)
        for _ in range(10):
            mask = [bool(v) for v in rng.integers(0, 2, size=7)]
            if not any(mask):
                mask[int(rng.integers(0, 7))] = True
            obs = rng.integers(0, 2, size=(6, 7, 2)).astype(np.int8)
            by_mask = asyncio.run(strategy.act(_turn(obs, mask)))
            assert mask[COLUMNS.index(by_mask.action)]
            # only the legal-move names (no mask): the same rule holds
            by_names = asyncio.run(strategy.act(_turn(obs, [], legal=[
                n for n, ok in zip(COLUMNS, mask, strict=True) if ok])))
            assert mask[COLUMNS.index(by_names.action)]


def test_argmax_with_mask_ties_broken_by_seed_and_sampling(tmp_path: Path) -> None:
    path = str(_biased_checkpoint(tmp_path, [9.0, 1.0, 5.0, 5.0, 5.0, 0.0, 0.0]))
    obs = np.zeros((6, 7, 2), dtype=np.int8)
    full = [True] * 7
    strategy = RLStrategy(_ctx(path), None)
    assert asyncio.run(strategy.act(_turn(obs, full))).action == "column 1"
    no_first = [False] + [True] * 6  # columns 3, 4, 5 tie
    picks = {asyncio.run(RLStrategy(_ctx(path, seed=s), None).act(_turn(obs, no_first))).action
             for s in range(40)}
    assert picks == {"column 3", "column 4", "column 5"}
    again = [asyncio.run(RLStrategy(_ctx(path, seed=3), None).act(_turn(obs, no_first))).action
             for _ in range(3)]
    assert len(set(again)) == 1  # same seed, same tie break
    sampled = RLStrategy(_ctx(path, seed=11), None, sample=True)
    draws = [asyncio.run(sampled.act(_turn(obs, [False, True] + [False] * 4 + [True]))).action
             for _ in range(200)]
    assert set(draws) == {"column 2", "column 7"}  # logits 1 vs 0: both drawn, 2 more often
    assert draws.count("column 2") > draws.count("column 7")


def test_wrong_env_task_or_action_names_rejected(tmp_path: Path) -> None:
    path = str(_biased_checkpoint(tmp_path, [0.0] * 7))
    with pytest.raises(ValueError, match="trained for env 'pettingzoo', tasks "
                                         r"\['connect_four_v3'\]; this episode is env "
                                         "'pettingzoo', task 'tictactoe_v3'"):
        RLStrategy(_ctx(path, task="tictactoe_v3"), None)
    with pytest.raises(ValueError, match="this episode is env 'multigrid'"):
        RLStrategy(_ctx(path, env="multigrid"), None)
    with pytest.raises(ValueError, match=r"action names \['column 7'\] are not actions"):
        RLStrategy(_ctx(path, names=COLUMNS[:6]), None)
    with pytest.raises(ValueError, match="checkpoint file not found"):
        create_strategy(_ctx(str(tmp_path / "nope.npz")), None)
    assert isinstance(create_strategy(_ctx(path), None), RLStrategy)


def test_missing_tensor_says_the_session_needs_tensors(tmp_path: Path) -> None:
    path = str(_biased_checkpoint(tmp_path, [0.0] * 7))
    strategy = RLStrategy(_ctx(path), None)
    with pytest.raises(ValueError, match=r"no tensor 'observation'.*opened with tensors"):
        asyncio.run(strategy.act(_turn(None, [True] * 7)))


def test_cache_reloads_a_rewritten_file(tmp_path: Path) -> None:
    path = _biased_checkpoint(tmp_path, [1.0] + [0.0] * 6)
    first = load_checkpoint_cached(path)
    assert load_checkpoint_cached(path) is first
    w = np.zeros((7, 84), dtype=np.float32)
    save_checkpoint(path, [w], [np.array([0.0] * 6 + [1.0], dtype=np.float32)], _meta())
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = load_checkpoint_cached(path)
    assert second is not first
    assert int(np.argmax(second.logits(np.zeros((6, 7, 2))))) == 6


def test_shipped_checkpoint_is_valid_and_small() -> None:
    assert SHIPPED.stat().st_size < 300_000
    policy = load_checkpoint(SHIPPED)
    meta = policy.metadata
    assert (meta.env, meta.tasks, meta.observation_key) == ("pettingzoo", ("connect_four_v3",),
                                                           "observation")
    assert meta.action_names == tuple(COLUMNS)
    assert meta.trained_with["eval_vs_random"]["games"] == 100
    # on the empty board, a sensible Connect Four policy plays a central column
    assert COLUMNS[int(np.argmax(policy.logits(np.zeros((6, 7, 2), dtype=np.int8))))] in {
        "column 3", "column 4", "column 5"}


def test_trainer_gradients_match_finite_differences() -> None:
    from tools.rl.train import Mlp

    rng = np.random.default_rng(6)
    net = Mlp([5, 4, 3, 2], rng)
    for w in net.weights:
        w += rng.normal(0.0, 0.5, size=w.shape)
    x = rng.normal(size=(3, 5))
    dz = rng.normal(size=(3, 2))
    grads = net.grads(x, dz)
    for param, grad in zip(net.params(), grads, strict=True):
        assert param.shape == grad.shape
        for idx in np.ndindex(param.shape):
            old = param[idx]
            param[idx] = old + 1e-6
            up = float((dz * net.logits(x)).sum())
            param[idx] = old - 1e-6
            down = float((dz * net.logits(x)).sum())
            param[idx] = old
            assert abs((up - down) / 2e-6 - grad[idx]) < 1e-6


def test_trainer_writes_a_loadable_checkpoint_and_is_deterministic(tmp_path: Path,
                                                                   capsys) -> None:
    from tools.rl.train import main

    args = ["--task", "connect_four_v3", "--episodes", "40", "--batch", "20", "--hidden", "8",
            "--eval-games", "4", "--seed", "3", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a.npz")]) == 0
    assert main([*args, "--out", str(tmp_path / "b.npz")]) == 0
    out = capsys.readouterr().out
    assert "greedy policy vs random over 4 games" in out
    a, b = load_checkpoint(tmp_path / "a.npz"), load_checkpoint(tmp_path / "b.npz")
    assert [w.shape for w in a.weights] == [(8, 84), (7, 8)]
    for x, y in zip(a.weights + a.biases, b.weights + b.biases, strict=True):
        assert np.array_equal(x, y)
    trained = a.metadata.trained_with
    assert trained["seed"] == 3 and trained["episodes"] == 40
    assert trained["eval_vs_random"]["games"] == 4
    assert trained["command"].startswith("python -m tools.rl.train --task connect_four_v3")


# -- format version 2: a list of inputs -------------------------------------------------------

SOCCER_TASK = "MosaicMultiGrid-S-2v2-IndAgObs-v1"
SHIPPED_SOCCER = REPO / "examples" / "checkpoints" / "soccer_2v2_mlp.npz"
#: a small v2 input list: "img" (2, 2) channel 0 one-hot of 3, channel 1 scaled, "dir" one-hot
SMALL_INPUTS = (
    InputSpec("img", (2, 2), "one_hot", size=3, channel=0),
    InputSpec("img", (2, 2), "flatten", scale=0.5, channel=1),
    InputSpec("dir", (), "one_hot", size=4),
)


def _meta_v2(inputs: tuple[InputSpec, ...] = SMALL_INPUTS, **changes: object
             ) -> CheckpointMetadata:
    base: dict = dict(env="multigrid", tasks=(SOCCER_TASK,), activation="relu",
                      action_names=("left", "right", "forward"), trained_with={"seed": 1},
                      inputs=inputs)
    base.update(changes)
    return CheckpointMetadata(**base)


def test_v2_one_hot_and_flatten_inputs_equal_a_hand_computation() -> None:
    meta = _meta_v2()
    assert meta.version == 2 and meta.input_size == 2 * 3 + 2 + 4
    # identity first layer (12 -> 12), then a sum of all inputs per action with a bias
    w0 = np.eye(12, dtype=np.float32)
    b0 = np.zeros(12, dtype=np.float32)
    w1 = np.stack([np.ones(12), np.arange(12), np.zeros(12)]).astype(np.float32)
    b1 = np.array([0.0, 0.0, 7.0], dtype=np.float32)
    policy = MlpPolicy([w0, w1], [b0, b1], meta)
    obs = {"img": np.array([[2, 4], [0, 6]], dtype=np.int64), "dir": np.array(1)}
    # channel 0 = [2, 0] -> one-hot [0,0,1, 1,0,0]; channel 1 = [4, 6] * 0.5 -> [2, 3];
    # dir 1 -> [0,1,0,0]
    expected_x = [0, 0, 1, 1, 0, 0, 2, 3, 0, 1, 0, 0]
    x = policy.preprocess(obs)
    assert x.dtype == np.float32
    assert x.tolist() == expected_x
    logits = policy.logits(obs)
    assert logits.tolist() == [sum(expected_x), float(np.dot(np.arange(12), expected_x)), 7.0]
    assert policy.input_keys == ("img", "dir")


def test_v2_round_trip_keeps_inputs_and_logits(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    weights, biases = _net(rng, (12, 8, 3))
    path = save_checkpoint(tmp_path / "v2.npz", weights, biases, _meta_v2())
    policy = load_checkpoint(path)
    assert policy.metadata == _meta_v2()
    with np.load(path) as archive:
        meta = json.loads(archive["metadata"].tobytes().decode("utf-8"))
    assert meta["version"] == 2
    assert "observation_key" not in meta and "preprocess" not in meta
    assert meta["inputs"] == [
        {"key": "img", "shape": [2, 2], "op": "one_hot", "size": 3, "channel": 0},
        {"key": "img", "shape": [2, 2], "op": "flatten", "scale": 0.5, "channel": 1},
        {"key": "dir", "shape": [], "op": "one_hot", "size": 4}]
    obs = {"img": np.array([[1, 3], [2, 5]]), "dir": np.array(3), "extra": np.zeros(9)}
    direct = MlpPolicy(weights, biases, _meta_v2()).logits(obs)
    assert np.array_equal(policy.logits(obs), direct)


def test_v1_files_still_load_as_one_flattened_input(tmp_path: Path) -> None:
    weights, biases = _net(np.random.default_rng(5))
    path = save_checkpoint(tmp_path / "v1.npz", weights, biases, _meta(preprocess_scale=0.25))
    with np.load(path) as archive:
        assert json.loads(archive["metadata"].tobytes())["version"] == 1
    policy = load_checkpoint(path)
    assert policy.metadata.version == 1
    assert policy.metadata.input_specs == (InputSpec("observation", (6, 7, 2), "flatten", 0.25),)
    obs = np.random.default_rng(6).integers(0, 2, size=(6, 7, 2))
    assert np.array_equal(policy.logits(obs), policy.logits({"observation": obs}))
    shipped = load_checkpoint(SHIPPED)  # the version-1 file shipped before version 2
    assert shipped.metadata.version == 1 and shipped.input_keys == ("observation",)


@pytest.mark.parametrize(("change", "expected"), [
    ({"inputs": []}, "metadata 'inputs' = []; expected a non-empty list"),
    ({"inputs": "image"}, "expected a non-empty list of input objects"),
    ({"inputs": [{"key": "img", "shape": [2, 2], "op": "embed"}]},
     "inputs[0] = {'key': 'img', 'shape': [2, 2], 'op': 'embed'}; expected 'op' in "
     "['flatten', 'one_hot']"),
    ({"inputs": [{"key": "", "shape": [2], "op": "flatten"}]}, "expected a non-empty 'key'"),
    ({"inputs": [{"key": "img", "shape": [2, 0], "op": "flatten"}]},
     "'shape': a list of positive integers"),
    ({"inputs": [{"key": "img", "shape": [4], "op": "one_hot"}]},
     "an integer 'size' >= 2 for op one_hot"),
    ({"inputs": [{"key": "img", "shape": [4], "op": "one_hot", "size": 1}]},
     "an integer 'size' >= 2 for op one_hot"),
    ({"inputs": [{"key": "img", "shape": [4], "op": "flatten", "scale": "big"}]},
     "a finite number as 'scale'"),
    ({"inputs": [{"key": "img", "shape": [2, 2], "op": "flatten", "channel": 2}]},
     "'channel': an integer index into the last axis"),
    ({"inputs": [{"key": "d", "shape": [], "op": "flatten", "channel": 0}]},
     "'channel': an integer index into the last axis"),
    ({"inputs": [{"key": "img", "shape": [4], "op": "flatten"},
                 {"key": "img", "shape": [2, 2], "op": "flatten"}]},
     "inputs give tensor 'img' two shapes, [4] and [2, 2]"),
    ({"inputs": None, "drop": "inputs"}, "metadata lacks ['inputs']; required keys (version 2)"),
    ({"inputs": [{"key": "img", "shape": [5], "op": "flatten"}]},
     "layer0.weight has shape [8, 12]; its input size must be 5, the total width of the "
     "inputs: the layers do not chain"),
])
def test_bad_v2_input_specs_give_clear_errors(tmp_path: Path, change: dict,
                                              expected: str) -> None:
    meta = _meta_v2().to_json()
    if change.get("drop"):
        del meta[change["drop"]]
    else:
        meta.update(change)
    weights, biases = _net(np.random.default_rng(7), (12, 8, 3))
    arrays = {"layer0.weight": weights[0], "layer0.bias": biases[0],
              "layer1.weight": weights[1], "layer1.bias": biases[1]}
    path = _write_raw(tmp_path / "bad.npz", meta, arrays)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


@pytest.mark.parametrize(("obs", "expected"), [
    ({"img": np.array([[3, 0], [0, 0]]), "dir": np.array(0)},
     "one_hot input 'img' channel 0 holds 3; expected integers 0..2"),
    ({"img": np.array([[0, 0], [0, 0]]), "dir": np.array(-1)},
     "one_hot input 'dir' holds -1; expected integers 0..3"),
    ({"img": np.array([[0.5, 0], [0, 0]]), "dir": np.array(0)},
     "one_hot input 'img' holds non-integer values"),
    ({"img": np.zeros((3, 2)), "dir": np.array(0)},
     "observation 'img' has shape [3, 2], but the checkpoint expects [2, 2]"),
    ({"img": np.zeros((2, 2))}, "the observation lacks tensors ['dir']"),
    (np.zeros((2, 2)), "the policy reads tensors ['img', 'dir']; pass a mapping"),
])
def test_v2_observation_that_does_not_fit_is_refused(obs: object, expected: str) -> None:
    weights, biases = _net(np.random.default_rng(8), (12, 3))
    policy = MlpPolicy(weights, biases, _meta_v2(), source="small.npz")
    with pytest.raises(CheckpointError) as err:
        policy.logits(obs)  # type: ignore[arg-type]
    assert str(err.value).startswith("small.npz: ")
    assert expected in str(err.value)


# -- the Soccer tensor and the shipped Soccer policy -------------------------------------------


def _soccer_game() -> object:
    from env_server.families.multigrid.game import MultigridGame, PlayerSetup
    from env_server.families.multigrid.tasks import resolve
    from env_server.game import GameOptions

    return MultigridGame(resolve(SOCCER_TASK), GameOptions(seed=0),  # type: ignore[arg-type]
                         {f"agent_{i}": PlayerSetup() for i in range(4)})


def test_soccer_target_side_tensor_matches_the_info() -> None:
    game = _soccer_game()
    seen: set[int] = set()
    views = game.reset(3)  # type: ignore[attr-defined]
    for step in range(4):
        for view in views.values():
            side = view.tensors["target_side"]
            assert side.dtype == np.int64 and side.shape == ()
            assert int(side) == ("east", "west").index(view.info["target_goal_side"])
            seen.add(int(side))
        result = game.step({a: ("forward", "left")[step % 2] for a in views})  # type: ignore
        views = {a: t.view for a, t in result.transitions.items()}
    assert seen == {0, 1}  # the two teams attack opposite ends
    game.close()  # type: ignore[attr-defined]


def test_collect_has_no_target_side_tensor() -> None:
    from env_server.families.multigrid.game import MultigridGame, PlayerSetup
    from env_server.families.multigrid.tasks import resolve
    from env_server.game import GameOptions

    spec = resolve("MosaicMultiGrid-C-IndAgObs-v1")
    assert spec is not None
    game = MultigridGame(spec, GameOptions(seed=0),
                         {f"agent_{i}": PlayerSetup() for i in range(len(spec.team_indices))})
    views = game.reset(0)
    assert all(set(v.tensors) == {"image", "direction"} for v in views.values())
    game.close()


def _soccer_turn(tensors: dict[str, np.ndarray]) -> TurnInput:
    return TurnInput(step=0, long_term_context="", short_term_context="", image_png=None,
                     legal_actions=[], info={}, tensors=tensors, action_mask=[])


def test_rl_player_reads_every_v2_tensor(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    weights, biases = _net(rng, (12, 3))
    path = save_checkpoint(tmp_path / "v2.npz", weights, biases, _meta_v2())
    names = ["noop", "left", "right", "forward", "pickup", "drop", "toggle", "done"]
    ctx = _ctx(str(path), env="multigrid", task=SOCCER_TASK, names=names)
    strategy = RLStrategy(ctx, None)
    obs = {"img": np.array([[1, 2], [0, 4]]), "dir": np.array(2)}
    decision = asyncio.run(strategy.act(_soccer_turn(obs)))
    logits = MlpPolicy(weights, biases, _meta_v2()).logits(obs)
    assert decision.action == ("left", "right", "forward")[int(np.argmax(logits))]
    with pytest.raises(ValueError, match="the observation has no tensor 'dir'"):
        asyncio.run(strategy.act(_soccer_turn({"img": obs["img"]})))
    with pytest.raises(ValueError, match="one_hot input 'dir' holds 9"):
        asyncio.run(strategy.act(_soccer_turn({**obs, "dir": np.array(9)})))


def test_shipped_soccer_checkpoint_is_valid_small_and_plays_the_served_tensors() -> None:
    assert SHIPPED_SOCCER.stat().st_size < 300_000
    policy = load_checkpoint(SHIPPED_SOCCER)
    meta = policy.metadata
    assert meta.version == 2 and (meta.env, meta.tasks) == ("multigrid", (SOCCER_TASK,))
    assert meta.action_names == ("left", "right", "forward", "pickup")
    assert policy.input_keys == ("image", "direction", "target_side")
    evaluation = meta.trained_with["eval_vs_random"]
    assert evaluation["episodes"] == 20
    assert evaluation["goals_for"] > evaluation["goals_against"]
    assert "behaviour cloning" in meta.trained_with["algorithm"]
    game = _soccer_game()
    views = game.reset(0)  # type: ignore[attr-defined]
    for view in views.values():  # the env's own tensors fit the checkpoint
        assert policy.logits(view.tensors).shape == (4,)
    game.close()  # type: ignore[attr-defined]


def test_soccer_trainer_is_deterministic_and_writes_a_v2_checkpoint(tmp_path: Path,
                                                                    capsys) -> None:
    from tools.rl.train_soccer import main

    args = ["--episodes", "2", "--expert-episodes", "1", "--refit-every", "1", "--epochs", "1",
            "--hidden", "8", "--eval-episodes", "1", "--seed", "2", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a.npz")]) == 0
    assert main([*args, "--out", str(tmp_path / "b.npz")]) == 0
    out = capsys.readouterr().out
    assert "greedy rl team vs random team over 1 episodes: goals" in out
    a, b = load_checkpoint(tmp_path / "a.npz"), load_checkpoint(tmp_path / "b.npz")
    assert [w.shape for w in a.weights] == [(8, 195), (4, 8)]
    for x, y in zip(a.weights + a.biases, b.weights + b.biases, strict=True):
        assert np.array_equal(x, y)
    trained = a.metadata.trained_with
    assert trained["seed"] == 2 and trained["episodes"] == 2 and trained["samples"] > 0
    assert trained["eval_vs_random"]["episodes"] == 1
    assert trained["command"].startswith("python -m tools.rl.train_soccer --episodes 2")

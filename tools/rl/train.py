"""Train a ``moria-mlp`` policy for a PettingZoo classic game with REINFORCE, in numpy only.

    python -m tools.rl.train --task connect_four_v3 --episodes 30000 --seed 0 \\
        --out examples/checkpoints/connect_four_v3_mlp.npz

The learner plays the PettingZoo env directly (``pettingzoo.classic.connect_four_v3``'s ``raw_env``,
the same env the pettingzoo family serves), alternating first and second seat every episode,
against a uniformly random opponent (or, with ``--self-play P``, against a copy of itself with
probability P). Illegal moves are masked out with the env's own action mask. The learning rule
is REINFORCE with a batch-mean baseline, normalised advantages, an entropy bonus and Adam;
rewards are the env's final +1/-1/0, discounted by ``--gamma`` per own move so quick wins are
preferred. Everything random comes from ``numpy.random.default_rng(seed)``, so one seed gives
one checkpoint. At the end the greedy (argmax) policy plays ``--eval-games`` games against a
random player (half in each seat) and the win rate is printed and stored in the checkpoint's
``trained_with``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent_server.rl.checkpoint import CheckpointMetadata, save_checkpoint


@dataclass(frozen=True)
class TaskSpec:
    """What the trainer needs to know about one game: how to build its AEC env, the tensor
    shape, and the env's action names in index order (as the env server names them)."""

    make_env: Callable[[], Any]
    observation_shape: tuple[int, ...]
    action_names: tuple[str, ...]


def _connect_four() -> Any:
    # the module behind pettingzoo.classic.connect_four_v3 (that alias warns on import)
    from pettingzoo.classic.connect_four.connect_four import raw_env

    return raw_env()


TASKS: dict[str, TaskSpec] = {
    "connect_four_v3": TaskSpec(_connect_four, (6, 7, 2),
                                tuple(f"column {i + 1}" for i in range(7))),
}


class Mlp:
    """The trainable network: float64 weights ``(out, in)``, ReLU hidden layers, linear logits.

    Args:
        sizes: layer widths, input first, actions last (e.g. ``[84, 128, 128, 7]``).
        rng: the generator for the initial weights (He init; small last layer).
    """

    def __init__(self, sizes: list[int], rng: np.random.Generator) -> None:
        self.weights: list[np.ndarray] = []
        self.biases: list[np.ndarray] = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            last = i == len(sizes) - 2
            std = 0.01 if last else np.sqrt(2.0 / n_in)
            self.weights.append(rng.normal(0.0, std, size=(n_out, n_in)))
            self.biases.append(np.zeros(n_out))

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Logits for a batch ``x`` of shape ``(N, in)`` -> ``(N, actions)``."""
        h = x
        for w, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            h = np.maximum(h @ w.T + b, 0.0)
        return np.asarray(h @ self.weights[-1].T + self.biases[-1])

    def grads(self, x: np.ndarray, dz: np.ndarray) -> list[np.ndarray]:
        """Gradients of ``sum(dz * logits(x))`` w.r.t. ``[w0, b0, w1, b1, ...]``."""
        acts = [x]
        h = x
        for w, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            h = np.maximum(h @ w.T + b, 0.0)
            acts.append(h)
        out: list[np.ndarray] = []
        delta = dz
        for i in range(len(self.weights) - 1, -1, -1):
            out.append(delta.sum(axis=0))
            out.append(delta.T @ acts[i])
            if i > 0:
                delta = (delta @ self.weights[i]) * (acts[i] > 0)
        out.reverse()  # [w0, b0, ...] after reversing [b_last, w_last, ...]
        return out

    def params(self) -> list[np.ndarray]:
        """``[w0, b0, w1, b1, ...]`` (the live arrays, updated in place by Adam)."""
        return [p for pair in zip(self.weights, self.biases, strict=True) for p in pair]


class Adam:
    """Adam over a list of arrays, updated in place (gradient *descent*)."""

    def __init__(self, params: list[np.ndarray], lr: float) -> None:
        self.params, self.lr, self.t = params, lr, 0
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]

    def step(self, grads: list[np.ndarray], b1: float = 0.9, b2: float = 0.999) -> None:
        """Apply one update with ``grads`` (same order as ``params``)."""
        self.t += 1
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            mhat = m / (1 - b1 ** self.t)
            vhat = v / (1 - b2 ** self.t)
            p -= self.lr * mhat / (np.sqrt(vhat) + 1e-8)


def masked_probs(z: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax of logits ``z`` over the legal entries of boolean ``mask`` (0 elsewhere); works
    for one row or a batch."""
    z = np.where(mask, z, -np.inf)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return np.asarray(e / e.sum(axis=-1, keepdims=True))


def play_game(env: Any, net: Mlp, learner: str, rng: np.random.Generator, *, greedy: bool,
              opponent_net: Mlp | None, seed: int) -> tuple[float, list[tuple[np.ndarray,
                                                                            np.ndarray, int]]]:
    """One game; ``learner`` is the seat the net plays, the other seat is random (or
    ``opponent_net`` sampling). Returns the learner's final reward and its moves as
    ``(flat observation, legal mask, action)``."""
    env.reset(seed=seed)
    moves: list[tuple[np.ndarray, np.ndarray, int]] = []
    while not all(env.terminations.values()) and not all(env.truncations.values()):
        agent = env.agent_selection
        obs = env.observe(agent)
        mask = np.asarray(obs["action_mask"], dtype=bool)
        if agent == learner or opponent_net is not None:
            x = np.asarray(obs["observation"], dtype=np.float64).reshape(-1)
            model = net if agent == learner else opponent_net
            assert model is not None
            z = model.logits(x[None])[0]
            if greedy:
                legal_z = np.where(mask, z, -np.inf)
                action = int(rng.choice(np.flatnonzero(legal_z == legal_z.max())))
            else:
                action = int(rng.choice(len(z), p=masked_probs(z, mask)))
            if agent == learner:
                moves.append((x, mask, action))
        else:
            action = int(rng.choice(np.flatnonzero(mask)))
        env.step(action)
    return float(env.rewards[learner]), moves


def evaluate(env: Any, net: Mlp, games: int, rng: np.random.Generator, seed_base: int,
             agents: list[str]) -> dict[str, float]:
    """Greedy play against a random opponent, alternating seats: win/draw/loss rates."""
    results = {"win": 0, "draw": 0, "loss": 0}
    for g in range(games):
        reward, _ = play_game(env, net, agents[g % 2], rng, greedy=True, opponent_net=None,
                              seed=seed_base + g)
        results["win" if reward > 0 else "loss" if reward < 0 else "draw"] += 1
    return {k: v / games for k, v in results.items()}


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Run the training described by the parsed command line; returns the final evaluation
    and writes the checkpoint to ``args.out``."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    spec = TASKS[args.task]
    rng = np.random.default_rng(args.seed)
    env = spec.make_env()
    env.reset(seed=0)
    agents = list(env.possible_agents)
    n_in = int(np.prod(spec.observation_shape))
    net = Mlp([n_in, *args.hidden, len(spec.action_names)], rng)
    opt = Adam(net.params(), args.lr)
    recent: list[float] = []
    batch: list[tuple[np.ndarray, np.ndarray, int, float]] = []
    console_err = sys.stderr
    with Progress(TextColumn("[bold]training[/]"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total} episodes"), TextColumn("{task.fields[stats]}"),
                  TimeElapsedColumn(), disable=args.quiet) as progress:
        bar = progress.add_task("train", total=args.episodes, stats="")
        for ep in range(args.episodes):
            opponent = net if rng.random() < args.self_play else None
            reward, moves = play_game(env, net, agents[ep % 2], rng, greedy=False,
                                      opponent_net=opponent, seed=args.seed * 1_000_003 + ep)
            n = len(moves)
            for t, (x, mask, action) in enumerate(moves):
                batch.append((x, mask, action, reward * args.gamma ** (n - 1 - t)))
            if opponent is None:
                recent.append(reward)
            if (ep + 1) % args.batch == 0:
                _update(net, opt, batch, args.entropy)
                batch.clear()
            if (ep + 1) % 200 == 0 or ep + 1 == args.episodes:
                window = recent[-1000:]
                wins = sum(r > 0 for r in window) / max(1, len(window))
                progress.update(bar, completed=ep + 1,
                                stats=f"win rate vs random (last {len(window)}): {wins:.2f}")
    if not args.quiet:
        print(f"evaluating the greedy policy over {args.eval_games} games vs random ...",
              file=console_err)
    result = evaluate(env, net, args.eval_games, np.random.default_rng(args.seed + 1),
                      10_000_000, agents)
    command = "python -m tools.rl.train " + " ".join(shlex.quote(a) for a in args.argv)
    metadata = CheckpointMetadata(
        env="pettingzoo", tasks=(args.task,), observation_key="observation",
        observation_shape=spec.observation_shape, preprocess_scale=1.0, activation="relu",
        action_names=spec.action_names,
        trained_with={
            "algorithm": "REINFORCE (batch-mean baseline, normalised advantages, entropy "
                         "bonus, Adam), numpy",
            "episodes": args.episodes, "batch_episodes": args.batch, "lr": args.lr,
            "gamma": args.gamma, "entropy": args.entropy, "hidden": list(args.hidden),
            "opponent": "uniform random legal moves"
                        + (f"; self-play with probability {args.self_play}"
                           if args.self_play else ""),
            "seats": "alternating first/second every episode",
            "seed": args.seed, "date": _dt.date.today().isoformat(), "command": command,
            "eval_vs_random": {"games": args.eval_games, **result},
        })
    env.close()
    path = save_checkpoint(args.out, [w.astype(np.float32) for w in net.weights],
                           [b.astype(np.float32) for b in net.biases], metadata)
    print(f"greedy policy vs random over {args.eval_games} games (half in each seat): "
          f"win {result['win']:.2f}, draw {result['draw']:.2f}, loss {result['loss']:.2f}")
    print(f"wrote {path}")
    return result


def _update(net: Mlp, opt: Adam, batch: list[tuple[np.ndarray, np.ndarray, int, float]],
            entropy: float) -> None:
    x = np.stack([b[0] for b in batch])
    mask = np.stack([b[1] for b in batch])
    actions = np.array([b[2] for b in batch])
    returns = np.array([b[3] for b in batch])
    adv = returns - returns.mean()
    std = adv.std()
    if std > 1e-8:
        adv = adv / std
    p = masked_probs(net.logits(x), mask)
    logp = np.where(mask, np.log(np.where(mask, p, 1.0)), 0.0)
    ent = -(p * logp).sum(axis=1)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(actions)), actions] = 1.0
    # loss = -mean(adv * log p(a)) - entropy * mean(H)
    dz = -adv[:, None] * (onehot - p) + entropy * p * (logp + ent[:, None])
    dz /= len(batch)
    opt.step(net.grads(x, dz))


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tools.rl.train",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--task", choices=sorted(TASKS), default="connect_four_v3")
    parser.add_argument("--episodes", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="checkpoint path to write (.npz)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[128, 128])
    parser.add_argument("--batch", type=int, default=64, help="episodes per update")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--gamma", type=float, default=0.97)
    parser.add_argument("--entropy", type=float, default=0.01)
    parser.add_argument("--self-play", type=float, default=0.0,
                        help="probability that an episode's opponent is the policy itself")
    parser.add_argument("--eval-games", type=int, default=100)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    args.argv = argv
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point: train, evaluate, write the checkpoint; returns the exit status."""
    train(parse_args(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Train a ``moria-mlp`` (version 2) policy for mosaic-multigrid Soccer 2v2, in numpy only.

    python -m tools.rl.train_soccer --episodes 300 --seed 0 \\
        --out examples/checkpoints/soccer_2v2_mlp.npz

Recipe: **behaviour cloning of Moria's scripted Soccer bot** (``agent.type=scripted``,
``agent_server/strategies/scripted/multigrid_bot.py``) with DAgger-style data collection.

- Every episode one team (alternating green/blue, so both ends of the field are seen) is the
  *learner team*, the other plays uniformly random actions (as the ``random`` player does).
- The learner's two agents are labelled each step by their own scripted bot, which reads the
  same observation the policy server would get (``info["view"]``, ``info["target_goal_side"]``).
  In the first ``--expert-episodes`` episodes the bot's action is played; afterwards the
  current network's sampled action is played with probability ``--dagger`` (the bot still
  labels it), so the data covers the states the network itself reaches.
- The network (ReLU MLP, ``--hidden``) is fitted by cross-entropy with Adam after every
  ``--refit-every`` episodes, for ``--epochs`` passes over all data gathered so far.

The games are the env server's own ``MultigridGame`` (mosaic-multigrid driven directly, with the
family's observation code), so training sees exactly the tensors and info that are served.
This offline tool therefore needs the multigrid env package installed beside the agent code;
the policy server itself never imports it.

The policy reads (version-2 ``inputs``): the view ``image`` (3, 3, 3) as a one-hot of the object
type (14) and of the colour (6) per cell plus the state channel scaled by 0.01 (an agent's facing,
+1.0 when it carries the ball); a one-hot of ``direction`` (4) and of ``target_side`` (2: east,
west). Outputs: ``left``, ``right``, ``forward``, ``pickup`` (the scripted bot's actions).

At the end the greedy (argmax) policy plays ``--eval-episodes`` full episodes as a team of two
against a random team (alternating the colour it plays); goals for/against and wins, draws and
losses are printed and stored in ``trained_with.eval_vs_random``. Everything random derives from
``--seed``, so one seed gives one checkpoint.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import random
import shlex
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from agent_server.rl.checkpoint import CheckpointMetadata, InputSpec, save_checkpoint
from tools.rl.train import Adam, Mlp, masked_probs

TASK = "MosaicMultiGrid-S-2v2-IndAgObs-v1"
#: the policy's outputs: the scripted Soccer bot's actions, as the env names them
ACTIONS = ("left", "right", "forward", "pickup")
#: object types (mosaic_multigrid ``Type``: 14) and colours (``Color``: 6)
NUM_TYPES, NUM_COLOURS = 14, 6
INPUTS = (
    InputSpec("image", (3, 3, 3), "one_hot", size=NUM_TYPES, channel=0),
    InputSpec("image", (3, 3, 3), "one_hot", size=NUM_COLOURS, channel=1),
    InputSpec("image", (3, 3, 3), "flatten", scale=0.01, channel=2),
    InputSpec("direction", (), "one_hot", size=4),
    InputSpec("target_side", (), "one_hot", size=2),
)


def features(tensors: dict[str, np.ndarray]) -> np.ndarray:
    """One agent's env tensors -> the policy input, float32 ``(sum of INPUTS widths,)``,
    encoded by the same code the checkpoint loader uses (``InputSpec.encode``)."""
    return np.concatenate([spec.encode(tensors[spec.key], "train_soccer") for spec in INPUTS])


@dataclass
class Match:
    """The per-episode objects: the game, the learner team's agents and their bots."""

    game: Any
    learners: list[str]
    others: list[str]
    bots: dict[str, Any]
    env_actions: list[str]


def new_match(game: Any, episode_seed: int, learner_team: int) -> Match:
    """Reset ``game`` with ``episode_seed`` and make one scripted bot per learner agent
    (team ``learner_team``: 0 = agents 0 and 1, 1 = agents 2 and 3)."""
    from agent_server.strategies.scripted.multigrid_bot import SoccerBot
    from agent_server.turn import EpisodeContext
    from moria.config import AgentConfig, ClientConfig

    agents = game.agents
    learners = agents[2 * learner_team: 2 * learner_team + 2]
    others = [a for a in agents if a not in learners]
    env_actions = [a.name for a in game.actions(agents[0])]
    bots = {}
    for k, agent in enumerate(learners):
        ctx = EpisodeContext(instruction="", action_names=env_actions, default_action="noop",
                             agent=AgentConfig(type="scripted"), client=ClientConfig(),
                             seed=episode_seed * 4 + k, env_name="multigrid", task=TASK,
                             agent_id=agent)
        bots[agent] = SoccerBot(ctx, random.Random(ctx.seed))
    return Match(game, learners, others, bots, env_actions)


def _turn(view: Any) -> Any:
    from agent_server.turn import TurnInput

    return TurnInput(step=0, long_term_context="", short_term_context="", image_png=None,
                     legal_actions=[], info=view.info, tensors=view.tensors, action_mask=[])


def play(match: Match, seed: int, rng: np.random.Generator, *, net: Mlp | None,
         net_prob: float, greedy: bool,
         record: list[tuple[np.ndarray, int]] | None) -> dict[str, int]:
    """One full episode. Each learner step the bot labels the observation (when ``record``
    is given, ``(features, bot action index)`` is appended); the net acts with probability
    ``net_prob`` (argmax when ``greedy``, else sampled), else the bot's action is played. The
    other team plays uniformly random env actions. Returns ``{"for": goals, "against": goals}``
    of the learner team."""
    game = match.game
    views = game.reset(seed)
    done = False
    while not done:
        actions: dict[str, str] = {}
        for agent in match.learners:
            view = views[agent]
            x = features(view.tensors)
            label = ""
            if record is not None or net is None or net_prob < 1.0:
                label, _ = match.bots[agent].choose(_turn(view))
                if record is not None:
                    record.append((x, ACTIONS.index(label)))
            if net is not None and (net_prob >= 1.0 or rng.random() < net_prob):
                z = net.logits(x[None].astype(np.float64))[0]
                if greedy:
                    index = int(np.argmax(z))
                else:
                    index = int(rng.choice(len(z), p=masked_probs(z, np.ones(len(z), bool))))
                actions[agent] = ACTIONS[index]
            else:
                actions[agent] = label
        for agent in match.others:
            actions[agent] = match.env_actions[int(rng.integers(len(match.env_actions)))]
        result = game.step(actions)
        views = {a: t.view for a, t in result.transitions.items()}
        done = result.done
    teams = game.metrics()["teams"]
    colour = next(c for c, t in teams.items() if match.learners[0] in t["agents"])
    return {"for": int(teams[colour]["goals_for"]),
            "against": int(teams[colour]["goals_against"])}


def fit(net: Mlp, opt: Adam, data: list[tuple[np.ndarray, int]], epochs: int, batch: int,
        rng: np.random.Generator) -> float:
    """Cross-entropy passes over ``data``; returns the last epoch's mean loss."""
    x = np.stack([d[0] for d in data]).astype(np.float64)
    y = np.array([d[1] for d in data])
    loss = 0.0
    for _ in range(epochs):
        order = rng.permutation(len(y))
        total = 0.0
        for start in range(0, len(y), batch):
            idx = order[start:start + batch]
            z = net.logits(x[idx])
            z = z - z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            total += float(-np.log(p[np.arange(len(idx)), y[idx]] + 1e-12).sum())
            dz = p
            dz[np.arange(len(idx)), y[idx]] -= 1.0
            opt.step(net.grads(x[idx], dz / len(idx)))
        loss = total / len(y)
    return loss


def evaluate(game: Any, net: Mlp, episodes: int, seed_base: int,
             rng: np.random.Generator) -> dict[str, int]:
    """The greedy net as a team of two vs a random team over ``episodes`` full episodes
    (alternating the team it plays): goals for/against, wins, draws, losses."""
    out = {"episodes": episodes, "goals_for": 0, "goals_against": 0, "win": 0, "draw": 0,
           "loss": 0}
    for e in range(episodes):
        match = new_match(game, seed_base + e, e % 2)
        goals = play(match, seed_base + e, rng, net=net, net_prob=1.0, greedy=True, record=None)
        out["goals_for"] += goals["for"]
        out["goals_against"] += goals["against"]
        key = "win" if goals["for"] > goals["against"] else \
            "loss" if goals["for"] < goals["against"] else "draw"
        out[key] += 1
    return out


def make_game() -> Any:
    """The env server's Soccer 2v2 game (imported here: an offline tool's dependency)."""
    from env_server.families.multigrid.game import MultigridGame, PlayerSetup
    from env_server.families.multigrid.tasks import resolve
    from env_server.game import GameOptions

    spec = resolve(TASK)
    if spec is None:
        raise RuntimeError(f"mosaic-multigrid does not offer {TASK}")
    return MultigridGame(spec, GameOptions(seed=0),
                         {f"agent_{i}": PlayerSetup() for i in range(4)})


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Run the training described by the parsed command line; writes the checkpoint to
    ``args.out`` and returns the evaluation."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    rng = np.random.default_rng(args.seed)
    game = make_game()
    n_in = sum(spec.width for spec in INPUTS)
    net = Mlp([n_in, *args.hidden, len(ACTIONS)], rng)
    opt = Adam(net.params(), args.lr)
    data: list[tuple[np.ndarray, int]] = []
    loss = float("nan")
    goals = {"for": 0, "against": 0}
    with Progress(TextColumn("[bold]behaviour cloning[/]"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} episodes"),
                  TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
                  disable=args.quiet) as progress:
        bar = progress.add_task("train", total=args.episodes, stats="")
        for ep in range(args.episodes):
            seed = args.seed * 1_000_003 + ep
            match = new_match(game, seed, ep % 2)
            trained = ep >= args.expert_episodes
            g = play(match, seed, rng, net=net if trained else None,
                     net_prob=args.dagger if trained else 0.0, greedy=False, record=data)
            goals = {k: goals[k] + g[k] for k in goals}
            if (ep + 1) % args.refit_every == 0 or ep + 1 == args.episodes:
                loss = fit(net, opt, data, args.epochs, args.batch, rng)
            progress.update(bar, completed=ep + 1,
                            stats=f"samples {len(data)}, loss {loss:.3f}, "
                                  f"goals {goals['for']}:{goals['against']}")
    if not args.quiet:
        print(f"evaluating the greedy policy over {args.eval_episodes} episodes vs a random "
              "team ...", file=sys.stderr)
    result = evaluate(game, net, args.eval_episodes, 10_000_000,
                      np.random.default_rng(args.seed + 1))
    game.close()
    command = "python -m tools.rl.train_soccer " + " ".join(
        shlex.quote(a) for a in args.argv)
    metadata = CheckpointMetadata(
        env="multigrid", tasks=(TASK,), activation="relu", action_names=ACTIONS,
        inputs=INPUTS,
        trained_with={
            "algorithm": "behaviour cloning of Moria's scripted Soccer bot (agent.type="
                         "scripted) with DAgger-style data collection: cross-entropy, Adam, "
                         "numpy; no reinforcement-learning fine-tune",
            "episodes": args.episodes, "expert_episodes": args.expert_episodes,
            "dagger": args.dagger, "refit_every": args.refit_every, "epochs": args.epochs,
            "batch": args.batch, "lr": args.lr, "hidden": list(args.hidden),
            "samples": len(data), "final_loss": round(loss, 4),
            "opponent": "a team of two uniformly random players (all 8 env actions)",
            "teams": "the learner plays green and blue in alternate episodes",
            "seed": args.seed, "date": _dt.date.today().isoformat(), "command": command,
            "eval_vs_random": {"policy": "greedy (argmax), both seats of one team",
                               "steps": "full episodes (256 steps or 2 goals)", **result},
        })
    path = save_checkpoint(args.out, [w.astype(np.float32) for w in net.weights],
                           [b.astype(np.float32) for b in net.biases], metadata)
    print(f"greedy rl team vs random team over {result['episodes']} episodes: goals "
          f"{result['goals_for']}:{result['goals_against']}, W/D/L "
          f"{result['win']}/{result['draw']}/{result['loss']}")
    print(f"wrote {path}")
    return result


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tools.rl.train_soccer",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--episodes", type=int, default=300,
                        help="training episodes (each gives 2 agents x up to 256 samples)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="checkpoint path to write (.npz)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[128, 128])
    parser.add_argument("--expert-episodes", type=int, default=50,
                        help="first episodes where the scripted bot plays every learner step")
    parser.add_argument("--dagger", type=float, default=0.5,
                        help="after those, probability that the network plays a learner step")
    parser.add_argument("--refit-every", type=int, default=50, help="episodes between fits")
    parser.add_argument("--epochs", type=int, default=3, help="passes over the data per fit")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-episodes", type=int, default=20)
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

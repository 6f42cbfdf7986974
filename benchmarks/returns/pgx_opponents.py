"""A board-game run's final networks against a ladder of opponents, each colour apart.

The runner's evaluation plays the opponent named in the run's env (`pgx:<game>-vs-<opponent>`)
with colours as pgx draws them. This script loads a run's last checkpoint (alphazero.py, or any
discrete file trained on a `pgx:` env) and plays each seed's policy, as its `eval_policy` says
(greedy: the network's most likely legal move, no search), `--games` games as the first mover
and as many as the second, against each opponent of common/envs/pgx.py:

    python benchmarks/returns/pgx_opponents.py RUN_DIR --opponents random mcts32 mcts128 mcts512
    python benchmarks/returns/pgx_opponents.py RUN_DIR --opponents minimax   # tic_tac_toe

It prints and writes `RUN_DIR/opponents.json` and `opponents.md`: per opponent and colour, each
seed's mean outcome (+1 a win, 0 a draw, -1 a loss). Against the perfect player (`minimax`) no
win is possible, so a mean of 0 means no game was lost.
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402


def outcomes(
    train: Any, states: Any, opponent: str, colour: int, games: int, seed: int = 0
) -> np.ndarray:
    """Each seed's mean outcome over `games` games as `colour` (0 the first mover) against
    `opponent`, on the game of `train.env` (`states` batched over seeds)."""
    from canter.common.envs.pgx import Versus, parse_name
    from canter.common.envs.wrappers import EpisodeStats, FloatObservation
    from canter.common.run import evaluation

    game, _ = parse_name(train.env.unwrapped.name)
    board = len(train.env.observation_space(train.env_params).shape) > 1  # else flattened
    env = EpisodeStats(FloatObservation(Versus(game, opponent, colour), keep_shape=board))
    params = env.unwrapped.default_params
    play = dataclasses.replace(train, env=env, env_params=params, num_eval_envs=games)
    keys = jax.random.split(jax.random.key(seed), jax.tree.leaves(states)[0].shape[0])

    def one(state: Any, key: jax.Array) -> jax.Array:
        return evaluation.evaluate(play, state, key)["episodic_return"]

    return np.asarray(jax.jit(jax.vmap(one))(states, keys))


def ladder(run_dir: Path, opponents: list[str], games: int) -> dict:
    """The outcomes of every seed of the run in `run_dir` against each opponent and colour."""
    from canter.algorithms.evaluate import load_run

    module, batch, configs, states, header = load_run(run_dir, episodes=games)
    train = module.make_train(jax.tree.map(lambda x: x[0], configs))
    rows = {}
    for opponent in opponents:
        for colour, side in ((0, "first"), (1, "second")):
            rows[f"{opponent}/{side}"] = outcomes(train, states, opponent, colour, games).tolist()
    env_steps = int(header.get("interval", 0)) * train.eval_every
    record = {"env": train.env.unwrapped.name, "games": games, "env_steps": env_steps}
    return {**record, "selfplay_games": selfplay_games(run_dir), **rows}


def selfplay_games(run_dir: Path) -> list[int]:
    """Each seed's self-play games over its run, from its metrics.csv (`train/episodes`, the
    games ended in each interval), or none for a run without them."""
    import csv

    counts = []
    for path in sorted(run_dir.glob("**/seed_*/metrics.csv")):
        with path.open() as f:
            rows = [r for r in csv.DictReader(f) if r.get("train/episodes")]
        counts.append(round(sum(float(r["train/episodes"]) for r in rows)))
    return counts


def table(record: dict) -> str:
    games = ", ".join(f"{n:,}" for n in record.get("selfplay_games", []))
    lines = [
        f"{record['env']}, {record['env_steps']:,} positions of self-play per seed"
        + (f" ({games} games)" if games else "")
        + f"; {record['games']} games per colour, seed and opponent.",
        "",
        "| opponent | agent moves | mean outcome per seed | mean |",
        "|---|---|---|---:|",
    ]
    for name, values in record.items():
        if "/" not in name:
            continue
        opponent, side = name.split("/")
        cells = ", ".join(f"{v:+.2f}" for v in values)
        lines.append(f"| {opponent} | {side} | {cells} | {np.mean(values):+.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--opponents", nargs="+", default=["random"])
    parser.add_argument("--games", type=int, default=64, help="games per colour and seed")
    args = parser.parse_args()
    record = ladder(args.run_dir, args.opponents, args.games)
    harness.write(args.run_dir / "opponents.json", json.dumps(record, indent=1))
    harness.write(args.run_dir / "opponents.md", table(record))
    print(table(record))


if __name__ == "__main__":
    main()

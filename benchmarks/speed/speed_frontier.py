"""The cost of the algorithms Craftax is won with, per env step, beside ppo_rnn's.

Each algorithm runs its own `--preset <game>` (Craftax-Symbolic-v1 unless told: every one of
them at the Craftax 1M sizes, 256 envs x 16 steps) for `--iterations` iterations on
`--num-seeds` seeds (default one; 2 is what the Craftax rows run, a seed per core), through the
CLI's runner (what `python algorithms/<algo>.py --preset <game>` runs, nothing
written), one evaluation episode at the end; fresh processes, cold compiles, algorithms taking
turns over `--repeats` rounds, ratios to ppo_rnn within a round. What differs besides the
algorithm: each preset's own networks and update (ppo_rnn: a 512 GRU and 4 x 8 minibatches of
whole sequences; pqn_rnn: an LSTM of 512 and 4 x 4; ppo_rnd: PPO's 3 x 512 MLPs and an RND pair
of 3 x 256 over the 8,268 inputs; ppo_trxl: a linear embedding of 256, 2 GTrXL layers of 8
heads over a memory of 128 steps, 4 x 8 minibatches of whole trajectories), and the one
evaluation episode, as long as its policy lives.

    python benchmarks/speed/speed_frontier.py                       # 16 iterations, 2 rounds
    python benchmarks/speed/speed_frontier.py --num-seeds 2         # as the rows run
    python benchmarks/speed/speed_frontier.py --iterations 2 --repeats 1 --out /tmp/frontier

Writes <out>/speed_frontier.md and .json (default out: benchmarks/results), or with N seeds
speed_frontier_<N>seeds.md and .json.
"""

import dataclasses
import importlib
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

SCRIPT = __file__
PEER = "ppo_rnn"
ALGORITHMS = ("ppo_rnn", "pqn_rnn", "ppo_rnd", "ppo_trxl")  # the peer first


def measure(algo: str, game: str, iterations: int, num_seeds: int = 1) -> dict:
    """One algorithm's preset for `iterations` iterations on `num_seeds` seeds, one evaluation
    episode per seed; env steps/s over all seeds."""
    module = importlib.import_module(f"canter.algorithms.{algo}")
    preset = dataclasses.replace(module.Config(), **module.PRESETS[game])
    steps = iterations * preset.num_envs * preset.num_steps
    config = dataclasses.replace(
        preset, total_timesteps=steps, eval_every=steps, num_eval_envs=1, num_seeds=num_seeds
    )
    timing = harness.timed_cli(config, module.make_train, algo)
    shape = dict(num_seeds=num_seeds, num_envs=config.num_envs, num_steps=config.num_steps)
    return harness.record(timing, steps * num_seeds, impl=algo, **shape)


def table(rounds: list[dict], algorithms: tuple[str, ...]) -> str:
    """Env steps/s (median, per round), its ratio to the peer's within each round, compile
    time and peak RSS (medians), one row per algorithm."""
    lines = [
        f"| algorithm | env steps/s: median (per round) | / {PEER}: median (per round) | "
        "compile (s) | peak RSS (MiB) |",
        "|---|---:|---:|---:|---:|",
    ]
    for algo in algorithms:
        speeds = [r[algo]["steps_per_s"] for r in rounds]
        per_round = ", ".join(f"{s:,.0f}" for s in speeds)
        ratio = harness.ratio_cell(harness.ratios(rounds, algo, PEER, "steps_per_s"))
        compile_s = harness.median(rounds, algo, "compile_s")
        rss = harness.median(rounds, algo, "peak_rss_mb")
        cells = f"{statistics.median(speeds):,.0f} ({per_round}) | {ratio} | {compile_s:.0f}"
        lines.append(f"| {algo} | {cells} | {rss:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--game", default="Craftax-Symbolic-v1", help="a preset every file has")
    parser.add_argument("--iterations", type=int, default=16, help="iterations per run")
    parser.add_argument("--num-seeds", type=int, default=1, help="seeds per run (vmapped)")
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS[1:]))
    parser.set_defaults(repeats=2)
    args = parser.parse_args()
    if args.worker:
        return harness.worker(measure, args.worker)
    algorithms = (PEER, *[a for a in args.algorithms if a != PEER])
    run = lambda algo: harness.spawn(  # noqa: E731
        SCRIPT, algo, args.game, args.iterations, args.num_seeds
    )
    say = lambda r: f"{r['steps_per_s']:,.0f} env steps/s"  # noqa: E731
    rounds = harness.rounds(args.repeats, algorithms, run, say)
    text = table(rounds, algorithms)
    seeds = "one seed" if args.num_seeds == 1 else f"{args.num_seeds} seeds (vmapped)"
    setup = f"{args.game}, {args.iterations} iterations per run, {seeds}"
    summary = [text, "", f"Machine: {harness.machine()}; {setup}."]
    name = "speed_frontier" + ("" if args.num_seeds == 1 else f"_{args.num_seeds}seeds")
    harness.write(args.out / f"{name}.md", "\n".join(summary) + "\n")
    record = {"machine": harness.machine(), "setup": setup, "rounds": rounds}
    harness.write(args.out / f"{name}.json", json.dumps(record, indent=1))
    print(*summary, sep="\n")


if __name__ == "__main__":
    main()

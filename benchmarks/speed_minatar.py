"""Breakout-MinAtar: canter's PPO against rejax's, and canter's PQN against random actions.

`--algo ppo`: both sides run gymnax-blines' MinAtar PPO (canter's `--preset Breakout-MinAtar`:
64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-4 constant, gamma 0.999, ReLU MLPs 2x256
on the flat grid) on Breakout-MinAtar for 20 iterations (163,840 env steps per seed), 8
evaluation episodes at the end, with 1 and 8 seeds; canter through its CLI runner and as
`jit(vmap(train))`, rejax as `jit(vmap(algo.train))` (speed_ppo.py's protocol: fresh processes
taking turns, ratios within a round). `--one-core` adds canter's CLI on one device pinned to
one core, the bound of any multi-device speed-up on a 2-core machine.

`--algo pqn`: canter's PQN MinAtar preset (CNN, 128 envs x 32 steps) for 50 iterations through
the CLI runner, one seed, against random actions in the same 128 envs (`jit` of a scan of
vmapped steps): the environment's own ceiling.

    pip install -e ".[bench]"
    python benchmarks/speed_minatar.py --algo ppo --repeats 2
    python benchmarks/speed_minatar.py --algo pqn --repeats 2
    python benchmarks/speed_minatar.py --algo ppo --one-core --seeds 1 8 --repeats 1 \\
        --out benchmarks/results/one_core

Writes benchmarks/results/speed_ppo-minatar.md and .json (`--algo ppo`) and
speed_pqn-minatar.md (`--algo pqn`).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` from any directory

from benchmarks import harness, speed_ppo  # noqa: E402

SCRIPT = __file__
PPO_SETUP = dict(
    env="Breakout-MinAtar", num_envs=64, num_steps=128, iterations=20, minibatches=8,
    learning_rate=5e-4, anneal_lr=False, gamma=0.999, activation="relu", hidden=256,
)  # fmt: skip
PQN_ITERATIONS, PQN_ENVS, PQN_STEPS = 50, 128, 32  # the preset's 128 envs x 32 steps


def pqn_config(num_seeds: int = 1):
    from canter.algorithms import pqn

    preset = pqn.PRESETS["Breakout-MinAtar"]
    steps = PQN_ITERATIONS * PQN_ENVS * PQN_STEPS
    return pqn.Config(**{
        **preset, "total_timesteps": steps, "num_seeds": num_seeds,
        "eval_every": steps, "num_eval_envs": harness.EVAL_EPISODES,
    })  # fmt: skip


def work(impl: str, num_seeds: int, algo: str) -> dict:
    """The worker: `--worker IMPL SEEDS ALGO`; `ppo` is speed_ppo.py's measurement of
    PPO_SETUP, `pqn` runs canter's PQN (CLI runner) or random actions (`random`)."""
    if algo == "ppo":
        return speed_ppo.measure(impl, PPO_SETUP, num_seeds, "ppo-minatar")
    sizes = dict(num_envs=PQN_ENVS, num_steps=PQN_STEPS, iterations=PQN_ITERATIONS)
    if impl == "canter":
        from canter.algorithms import pqn

        config = pqn_config(num_seeds)
        timing = harness.timed_cli(config, pqn.make_train, "pqn")
        env_steps = num_seeds * config.total_timesteps
    else:
        train = harness.random_policy("Breakout-MinAtar", *sizes.values())
        timing = harness.timed_jit(*train, num_seeds)
        env_steps = num_seeds * PQN_ITERATIONS * PQN_ENVS * PQN_STEPS
    fields = dict(impl=impl, algo="pqn-minatar", num_seeds=num_seeds, **sizes)
    return harness.record(timing, env_steps, **fields)


def ceiling(repeats: int) -> str:
    """PQN's MinAtar preset against random actions in the same 128 Breakout envs, one seed."""
    pair = ("canter", "random")
    rows = harness.rounds(
        repeats,
        pair,
        lambda impl: harness.spawn(SCRIPT, impl, 1, "pqn"),
        lambda r: f"{r['steps_per_s']:,.0f} steps/s",
    )
    lines = [
        "| measure | canter PQN (CLI runner) | random policy | PQN / random: median (per round) |",
        "|---|---:|---:|---|",
    ]
    for field, label, fmt in (("steps_per_s", "env steps/s", "{:,.0f}"),
                              ("compile_s", "compile time (s)", "{:.2f}")):  # fmt: skip
        cells = [fmt.format(harness.median(rows, i, field)) for i in pair]
        ratio = "" if field != "steps_per_s" else (
            harness.ratio_cell(harness.ratios(rows, "canter", "random", field), digits=3)
        )  # fmt: skip
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--algo", nargs="+", choices=["ppo", "pqn"], default=["ppo", "pqn"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8], help="PPO's seed counts")
    parser.add_argument(
        "--one-core", action="store_true", help="PPO: also canter's CLI pinned to one core"
    )
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    if "ppo" in args.algo:
        impls = harness.impls("canter", "canter-pure", one_core=args.one_core)
        print(f"head to head, {harness.machine()}", flush=True)
        rows = harness.head_to_head(SCRIPT, args.repeats, args.seeds, impls, ("ppo",))
        harness.report(args.out, "speed_ppo-minatar", rows, impls)
    if "pqn" in args.algo:
        print(f"PQN against the random-policy ceiling, {harness.machine()}", flush=True)
        table = ceiling(args.repeats)
        harness.write(
            args.out / "speed_pqn-minatar.md", f"{table}\n\nMachine: {harness.machine()}.\n"
        )
        print(table)


if __name__ == "__main__":
    main()

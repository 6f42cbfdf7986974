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

`--ppo-iterations` and `--pqn-iterations` change the sizes (benchmarks/gpu/gpu.sh runs PPO for 100
iterations, 819,200 env steps per seed).

    pip install -e ".[bench]"
    python benchmarks/speed/speed_minatar.py --algo ppo --repeats 2
    python benchmarks/speed/speed_minatar.py --algo pqn --repeats 2
    python benchmarks/speed/speed_minatar.py --algo ppo --one-core --seeds 1 8 --repeats 1 \\
        --out benchmarks/results/one_core

Writes benchmarks/results/speed_ppo-minatar.md and .json (`--algo ppo`) and
speed_pqn-minatar.md and .json (`--algo pqn`).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.speed import speed_ppo  # noqa: E402

SCRIPT = __file__
# gymnax-blines' MinAtar PPO config, which both sides run (20 iterations unless told otherwise)
PPO_SETUP = dict(
    env="Breakout-MinAtar",
    num_envs=64,
    num_steps=128,
    iterations=20,
    minibatches=8,
    learning_rate=5e-4,
    anneal_lr=False,
    gamma=0.999,
    activation="relu",
    hidden=256,
    rollout_unroll=4,  # canter's MinAtar preset (a GPU compile only; rejax has no such field)
)
PQN_ITERATIONS, PQN_ENVS, PQN_STEPS = 50, 128, 32  # the preset's 128 envs x 32 steps


def pqn_config(num_seeds: int = 1, iterations: int = PQN_ITERATIONS):
    from canter.algorithms import pqn

    steps = iterations * PQN_ENVS * PQN_STEPS
    overrides = dict(total_timesteps=steps, eval_every=steps, num_eval_envs=harness.EVAL_EPISODES)
    return pqn.Config(**{**pqn.PRESETS["Breakout-MinAtar"], **overrides, "num_seeds": num_seeds})


def work(impl: str, num_seeds: int, algo: str, iterations: int) -> dict:
    """The worker: `--worker IMPL SEEDS ALGO ITERATIONS`; `ppo` is speed_ppo.py's measurement
    of PPO_SETUP, `pqn` runs canter's PQN (CLI runner) or random actions (`random`)."""
    if algo == "ppo":
        setup = dict(PPO_SETUP, iterations=iterations)
        return speed_ppo.measure(impl, setup, num_seeds, "ppo-minatar")
    sizes = dict(num_envs=PQN_ENVS, num_steps=PQN_STEPS, iterations=iterations)
    if impl == "canter":
        from canter.algorithms import pqn

        config = pqn_config(num_seeds, iterations)
        timing = harness.timed_cli(config, pqn.make_train, "pqn")
    else:
        train = harness.random_policy("Breakout-MinAtar", *sizes.values())
        timing = harness.timed_jit(*train, num_seeds)
    env_steps = num_seeds * iterations * PQN_ENVS * PQN_STEPS
    fields = dict(impl=impl, algo="pqn-minatar", num_seeds=num_seeds, **sizes)
    return harness.record(timing, env_steps, **fields)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--algo", nargs="+", choices=["ppo", "pqn"], default=["ppo", "pqn"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8], help="PPO's seed counts")
    parser.add_argument(
        "--one-core", action="store_true", help="PPO: also canter's CLI pinned to one core"
    )
    parser.add_argument("--ppo-iterations", type=int, default=PPO_SETUP["iterations"])
    parser.add_argument("--pqn-iterations", type=int, default=PQN_ITERATIONS)
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    if "ppo" in args.algo:
        impls = harness.impls("canter", "canter-pure", one_core=args.one_core)
        print(f"head to head, {harness.machine()}", flush=True)
        sizes = ("ppo", args.ppo_iterations)
        rows = harness.head_to_head(SCRIPT, args.repeats, args.seeds, impls, sizes)
        harness.report(args.out, "speed_ppo-minatar", rows, impls)
    if "pqn" in args.algo:
        print(f"PQN against the random-policy ceiling, {harness.machine()}", flush=True)
        # PQN's MinAtar preset against random actions in the same 128 Breakout envs, one seed.
        _, lines = harness.ceiling(
            args.out,
            "speed_pqn-minatar",
            args.repeats,
            lambda impl: harness.spawn(SCRIPT, impl, 1, "pqn", args.pqn_iterations),
            ("canter PQN (CLI runner)", "random policy", "PQN"),
        )
        text = "\n".join(lines) + f"\n\nMachine: {harness.machine()}.\n"
        harness.write(args.out / "speed_pqn-minatar.md", text)
        print(text)


if __name__ == "__main__":
    main()

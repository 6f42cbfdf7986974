"""canter's DQN against rejax's DQN on PureJaxRL's CartPole config, in fresh processes, in turn.

Both sides run PureJaxRL's DQN CartPole config for 5e5 env steps: 10 envs, an update of 128
every 10 env steps, buffer 10,000 filled first, hard target copy every 500 env steps, epsilon
1 -> 0.05 over half the run, with rejax's fixed 64x64 ReLU network, 8 evaluation episodes every
25,000 env steps; with 1 and 8 seeds. canter runs through its CLI runner (`canter`) and as
`jit(vmap(train))` (`canter-pure`), rejax as `jit(vmap(algo.train))` (benchmarks/rejax_peer.py);
speed_ppo.py's protocol: fresh processes taking turns, ratios within a round
(benchmarks/harness.py). `--one-core` adds canter's CLI pinned to one core.

    pip install -e ".[bench]"
    python benchmarks/speed_dqn.py

Writes benchmarks/results/speed_dqn.md and speed_dqn.json.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` from any directory

from benchmarks import harness, rejax_peer  # noqa: E402

SCRIPT = __file__


def canter_config(num_seeds: int = 1):
    from canter.algorithms import dqn

    # PureJaxRL's DQN CartPole config with rejax's fixed 64x64 network: 10 envs, one update of
    # 128 every 10 env steps, buffer 10,000 filled first, target copied every 500 env steps.
    return dqn.Config(
        num_seeds=num_seeds, hidden_sizes=(64, 64), num_eval_envs=harness.EVAL_EPISODES
    )


def work(impl: str, num_seeds: int) -> dict:
    """The worker: `--worker IMPL SEEDS`; `canter` (and `canter-1core`) through the CLI runner,
    `canter-pure` and `rejax` as `jit(vmap(train))`."""
    from canter.algorithms import dqn

    config = canter_config()
    if impl in ("canter", "canter-1core"):
        timing = harness.timed_cli(canter_config(num_seeds), dqn.make_train, "dqn")
    elif impl == "canter-pure":
        timing = harness.timed_jit(dqn.make_train(config), harness.canter_final_return, num_seeds)
    else:
        timing = harness.timed_jit(*rejax_peer.dqn(config), num_seeds)
    sizes = dict(num_envs=config.num_envs, num_steps=1,
                 iterations=config.total_timesteps // config.num_envs)  # fmt: skip
    fields = dict(impl=impl, algo="dqn", num_seeds=num_seeds, **sizes)
    return harness.record(timing, num_seeds * config.total_timesteps, **fields)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--one-core", action="store_true", help="also canter's CLI pinned to one core (the bound)"
    )
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    impls = harness.impls("canter", "canter-pure", one_core=args.one_core)
    print(f"head to head, {harness.machine()}", flush=True)
    rows = harness.head_to_head(SCRIPT, args.repeats, args.seeds, impls)
    harness.report(args.out, "speed_dqn", rows, impls)


if __name__ == "__main__":
    main()

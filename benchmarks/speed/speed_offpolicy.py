"""canter's SAC and TD3 against rejax's on Pendulum-v1, in fresh processes, in turn.

Both sides run canter's CleanRL-style defaults on gymnax's Pendulum-v1 for 5e4 env steps: 1
env, buffer 1e5 filled with 1,000 steps first, batch 128, an update per env step, Polyak 0.995,
64x64 ReLU networks, 8 evaluation episodes every 5,000 env steps (benchmarks/speed/rejax_peer.py's
`offpolicy` says what rejax is given and where it differs: one learning rate), with 1 and 8
seeds. canter runs through its CLI runner (`canter`) and as `jit(vmap(train))`
(`canter-pure`), rejax as `jit(vmap(algo.train))`; speed_ppo.py's protocol: fresh processes
taking turns, ratios within a round (benchmarks/harness.py). `--one-core` adds canter's CLI
pinned to one core.

    pip install -e ".[bench]"
    python benchmarks/speed/speed_offpolicy.py --algo sac
    python benchmarks/speed/speed_offpolicy.py --algo td3

Writes benchmarks/results/speed_sac.md and .json, speed_td3.md and .json.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.speed import rejax_peer  # noqa: E402

SCRIPT = __file__


def canter_config(algo: str, num_seeds: int = 1):
    import importlib

    # CleanRL's SAC / TD3 settings (canter's defaults), Pendulum-v1, 5e4 env steps.
    module = importlib.import_module(f"canter.algorithms.{algo}")
    return module.Config(num_seeds=num_seeds, num_eval_envs=harness.EVAL_EPISODES)


def work(impl: str, num_seeds: int, algo: str) -> dict:
    """The worker: `--worker IMPL SEEDS ALGO`; `canter` (and `canter-1core`) through the CLI
    runner, `canter-pure` and `rejax` as `jit(vmap(train))`."""
    import importlib

    module = importlib.import_module(f"canter.algorithms.{algo}")
    config = canter_config(algo)
    if impl in ("canter", "canter-1core"):
        timing = harness.timed_cli(canter_config(algo, num_seeds), module.make_train, algo)
    elif impl == "canter-pure":
        train = module.make_train(config)
        timing = harness.timed_jit(train, harness.canter_final_return, num_seeds)
    else:
        timing = harness.timed_jit(*rejax_peer.offpolicy(algo, config), num_seeds)
    sizes = dict(
        num_envs=config.num_envs, num_steps=1, iterations=config.total_timesteps // config.num_envs
    )
    fields = dict(impl=impl, algo=algo, num_seeds=num_seeds, **sizes)
    return harness.record(timing, num_seeds * config.total_timesteps, **fields)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--algo", nargs="+", choices=["sac", "td3"], default=["sac", "td3"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--one-core", action="store_true", help="also canter's CLI pinned to one core (the bound)"
    )
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    impls = harness.impls("canter", "canter-pure", one_core=args.one_core)
    for algo in args.algo:
        print(f"{algo} head to head, {harness.machine()}", flush=True)
        rows = harness.head_to_head(SCRIPT, args.repeats, args.seeds, impls, (algo,))
        harness.report(args.out, f"speed_{algo}", rows, impls)


if __name__ == "__main__":
    main()

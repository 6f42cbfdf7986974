"""canter's DQN against rejax's DQN on PureJaxRL's CartPole config, in fresh processes, in turn.

Both sides run PureJaxRL's DQN CartPole config for 5e5 env steps: 10 envs, an update of 128
every 10 env steps, buffer 10,000 filled first, hard target copy every 500 env steps, epsilon
1 -> 0.05 over half the run, with rejax's fixed 64x64 ReLU network, 8 evaluation episodes every
25,000 env steps; with 1 and 8 seeds. canter runs through its CLI runner (`canter`) and as
`jit(vmap(train))` (`canter-pure`), rejax as `jit(vmap(algo.train))`
(benchmarks/speed/rejax_peer.py); speed_ppo.py's protocol: fresh processes taking turns, ratios
within a round (benchmarks/harness.py). `--one-core` adds canter's CLI pinned to one core.

`--minatar STEPS` instead measures canter's DQN MinAtar preset (Breakout-MinAtar; 1 env, an
update of 32 per env step after 5,000 warm-up steps, the CNN) through the CLI runner for STEPS
env steps, one seed, against random actions in one env (the environment's own ceiling): env
steps/s per seed, the figure that says how long the preset's 1e7 steps take; and where a step's
time goes, from a third run of the preset that only acts (every step but the last a warm-up
step: the network's action, the env step and the buffer write), run after the paired rounds:
per env step, the env, the acting and buffer write, and per update, the 32-sample update.

    pip install -e ".[bench]"
    python benchmarks/speed/speed_dqn.py
    python benchmarks/speed/speed_dqn.py --minatar 50000 --repeats 2

Writes benchmarks/results/speed_dqn.md and speed_dqn.json (`--minatar`: speed_dqn-minatar.md
and .json).
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.speed import rejax_peer  # noqa: E402

SCRIPT = __file__


STEPS = 500_000
MINATAR_ENV = "Breakout-MinAtar"


def canter_config(num_seeds: int = 1, steps: int = STEPS):
    from canter.algorithms import dqn

    # PureJaxRL's DQN CartPole config with rejax's fixed 64x64 network: 10 envs, one update of
    # 128 every 10 env steps, buffer 10,000 filled first, target copied every 500 env steps
    # (runs shorter than 5e5 steps keep these proportions: warm-up and evaluation at 2% and 5%).
    short = {} if steps == STEPS else dict(learning_starts=steps // 50, eval_every=steps // 20)
    return dqn.Config(
        num_seeds=num_seeds,
        total_timesteps=steps,
        hidden_sizes=(64, 64),
        num_eval_envs=harness.EVAL_EPISODES,
        **short,
    )


def minatar_config(steps: int, acting_only: bool = False):
    """canter's DQN MinAtar preset on Breakout for `steps` env steps, one evaluation at the end;
    `acting_only`: warm-up to the end (the last step's one update aside, no update)."""
    from canter.algorithms import dqn

    preset = dqn.PRESETS[MINATAR_ENV]
    warm_up = steps if acting_only else min(preset["learning_starts"], steps // 2)
    overrides = dict(total_timesteps=steps, eval_every=steps, learning_starts=warm_up)
    return dqn.Config(**{**preset, **overrides, "num_eval_envs": harness.EVAL_EPISODES})


def work(impl: str, num_seeds: int, steps: int, minatar: str = "") -> dict:
    """The worker: `--worker IMPL SEEDS STEPS [minatar]`; `canter` (and `canter-1core`) through
    the CLI runner, `canter-pure` and `rejax` as `jit(vmap(train))`; with `minatar`, canter's
    MinAtar preset (CLI runner), the preset without updates (`canter-acting`) or random actions
    in one env (`random`)."""
    from canter.algorithms import dqn

    if minatar:
        config = minatar_config(steps, acting_only=impl == "canter-acting")
        if impl in ("canter", "canter-acting"):
            timing = harness.timed_cli(config, dqn.make_train, "dqn")
        else:
            timing = harness.timed_jit(*harness.random_policy(MINATAR_ENV, 1, 1, steps), 1)
        sizes = dict(num_envs=1, num_steps=1, iterations=steps)
        fields = dict(impl=impl, algo="dqn-minatar", num_seeds=1, **sizes)
        return harness.record(timing, steps, **fields)
    config = canter_config(1, steps)
    if impl in ("canter", "canter-1core"):
        timing = harness.timed_cli(canter_config(num_seeds, steps), dqn.make_train, "dqn")
    elif impl == "canter-pure":
        timing = harness.timed_jit(dqn.make_train(config), harness.canter_final_return, num_seeds)
    else:
        timing = harness.timed_jit(*rejax_peer.dqn(config), num_seeds)
    iterations = config.total_timesteps // config.num_envs
    sizes = dict(num_envs=config.num_envs, num_steps=1, iterations=iterations)
    fields = dict(impl=impl, algo="dqn", num_seeds=num_seeds, **sizes)
    return harness.record(timing, num_seeds * config.total_timesteps, **fields)


def minatar(out: Path, repeats: int, steps: int) -> str:
    """canter's DQN MinAtar preset against random actions in one env: env steps/s, one seed;
    writes speed_dqn-minatar.md and .json, returns the text."""
    rows, lines = harness.ceiling(
        out,
        "speed_dqn-minatar",
        repeats,
        lambda impl: harness.spawn(SCRIPT, impl, 1, steps, "minatar"),
        ("canter DQN (CLI runner)", "random policy, 1 env", "DQN"),
    )
    speed = harness.median(rows, "canter", "steps_per_s")
    hours = 1e7 / speed / 3600
    run = lambda impl: harness.spawn(SCRIPT, impl, 1, steps, "minatar")  # noqa: E731
    acting = harness.rounds(repeats, ("canter-acting",), run, lambda r: f"{r['steps_per_s']:,.0f}")
    env_us = 1e6 / harness.median(rows, "random", "steps_per_s")
    acting_us = 1e6 / harness.median(acting, "canter-acting", "steps_per_s")
    updates = steps - minatar_config(steps).learning_starts
    update_us = (1e6 / speed - acting_us) * steps / updates
    record = {"machine": harness.machine(), "rounds": rows, "acting_rounds": acting}
    harness.write(out / "speed_dqn-minatar.json", json.dumps(record, indent=1))
    text = "\n".join(
        [
            f"DQN MinAtar preset on {MINATAR_ENV}, {steps:,} env steps, 1 seed (CLI runner).",
            "",
            *lines,
            "",
            f"At {speed:,.0f} env steps/s the preset's 1e7 env steps take {hours:.2f} h.",
            "",
            f"Where a step's time goes (medians; the preset without updates ran at "
            f"{1e6 / acting_us:,.0f} env steps/s): the env {env_us:.0f} us per env step, "
            f"acting and the buffer write {acting_us - env_us:.0f} us more, and each update of "
            f"32 samples {update_us:.0f} us ({updates:,} updates).",
            "",
            f"Machine: {harness.machine()}.",
        ]
    )
    harness.write(out / "speed_dqn-minatar.md", text + "\n")
    return text


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--one-core", action="store_true", help="also canter's CLI pinned to one core (the bound)"
    )
    parser.add_argument("--steps", type=int, default=STEPS, help="CartPole env steps per seed")
    parser.add_argument("--minatar", type=int, metavar="STEPS", help="the MinAtar preset instead")
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    if args.minatar:
        print(f"DQN MinAtar against the random-policy ceiling, {harness.machine()}", flush=True)
        return print(minatar(args.out, args.repeats, args.minatar))
    impls = harness.impls("canter", "canter-pure", one_core=args.one_core)
    print(f"head to head, {harness.machine()}", flush=True)
    rows = harness.head_to_head(SCRIPT, args.repeats, args.seeds, impls, (args.steps,))
    harness.report(args.out, "speed_dqn", rows, impls)


if __name__ == "__main__":
    main()

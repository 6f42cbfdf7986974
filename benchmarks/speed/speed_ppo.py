"""canter's PPO against rejax's PPO on PureJaxRL's CartPole config, in fresh processes, in turn.

Each measurement is one fresh Python process (the persistent compilation cache off, so every
compile is cold) running one implementation once to completion (benchmarks/harness.py):
- `canter`: what `python algorithms/ppo.py` runs: the host runner, seeds sharded over the CPU
  devices (one per core, see common/run/devices.py), nothing written to disk;
- `canter-pure`: `jax.jit(jax.vmap(train))` of canter's pure `train(key)`, one device;
- `rejax`: `jax.jit(jax.vmap(algo.train))`, rejax's own way (rejax 0.1.3, PyPI;
  benchmarks/speed/rejax_peer.py).
Ratios are taken within a round (the three runs back to back), then the median is reported.
All get the same work: PureJaxRL's CartPole config (4 envs x 128 steps, 4 epochs x 4
minibatches, lr 2.5e-4 annealed linearly, tanh 64x64 actor and critic) for 512,000 env steps =
1000 iterations, with an evaluation of 8 episodes every 50 iterations (rejax's default of 128
evaluation episodes is overridden to match), with 1 and 8 seeds. `--one-core` adds canter's
CLI on one device pinned to one core (`canter-1core`): half its run time bounds every
multi-device speed-up on a 2-core machine.

`--scaling` then measures env steps/s against `num_envs` (one seed; canter's CLI, rejax and
random actions in the same envs, the environment's own ceiling) and against `num_seeds` (4
envs), each point once, about `--scaling-steps` env steps per point.

    pip install -e ".[bench]"
    python benchmarks/speed/speed_ppo.py               # the ratios of docs/speed.md, 3 rounds
    python benchmarks/speed/speed_ppo.py --scaling     # also env steps/s vs num_envs, num_seeds

Writes benchmarks/results/speed.md and speed.json (with `--scaling`, scaling.md, scaling.json
and scaling.png).
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.speed import rejax_peer  # noqa: E402

SCRIPT = __file__
EVAL_EVERY = 50  # iterations (or every iteration of a shorter run)
# PureJaxRL's CartPole config, which both sides run; speed_dp.py and speed_minatar.py run others.
CARTPOLE = dict(
    env="CartPole-v1",
    num_envs=4,
    num_steps=128,
    iterations=1000,
    minibatches=4,
    learning_rate=2.5e-4,
    anneal_lr=True,
    gamma=0.99,
    activation="tanh",
    hidden=64,
)


def canter_config(setup: dict, num_seeds: int = 1):
    from canter.algorithms import ppo

    num_envs, num_steps, iterations = setup["num_envs"], setup["num_steps"], setup["iterations"]
    return ppo.Config(
        env=setup["env"],
        num_seeds=num_seeds,
        num_envs=num_envs,
        num_steps=num_steps,
        total_timesteps=iterations * num_envs * num_steps,
        eval_every=min(EVAL_EVERY, iterations) * num_envs * num_steps,
        num_eval_envs=harness.EVAL_EPISODES,
        num_minibatches=setup["minibatches"],
        learning_rate=setup["learning_rate"],
        anneal_lr=setup["anneal_lr"],
        gamma=setup["gamma"],
        activation=setup["activation"],
        hidden_size=setup["hidden"],
        rollout_unroll=setup.get("rollout_unroll", 1),  # canter's own; no effect on the CPU
    )


def measure(impl: str, setup: dict, num_seeds: int, algo: str) -> dict:
    """One run of `setup` by `impl`: `canter`, `canter-dp` (with --data-parallel) and
    `canter-1core` through the CLI runner; `canter-pure`, `rejax` and `random` (random actions
    in the same envs) as `jit(vmap(train))`. `algo` names the setup in the measurement."""
    sizes = {k: setup[k] for k in ("num_envs", "num_steps", "iterations")}
    if impl in ("canter", "canter-dp", "canter-1core"):
        from canter.algorithms import ppo

        dp = impl == "canter-dp"  # each seed's envs and minibatches over the devices
        timing = harness.timed_cli(canter_config(setup, num_seeds), ppo.make_train, "ppo", dp)
    elif impl == "canter-pure":
        from canter.algorithms import ppo

        train = ppo.make_train(canter_config(setup))
        timing = harness.timed_jit(train, harness.canter_final_return, num_seeds)
    elif impl == "rejax":
        eval_every = min(EVAL_EVERY, setup["iterations"])
        timing = harness.timed_jit(*rejax_peer.ppo(setup, eval_every), num_seeds)
    else:
        timing = harness.timed_jit(*harness.random_policy(setup["env"], *sizes.values()), num_seeds)
    env_steps = num_seeds * sizes["iterations"] * sizes["num_envs"] * sizes["num_steps"]
    return harness.record(timing, env_steps, impl=impl, algo=algo, num_seeds=num_seeds, **sizes)


def work(impl: str, num_seeds: int, num_envs: int, num_steps: int, iterations: int) -> dict:
    """The worker: `--worker IMPL SEEDS ENVS STEPS ITERATIONS`, CARTPOLE at those sizes."""
    setup = dict(CARTPOLE, num_envs=num_envs, num_steps=num_steps, iterations=iterations)
    return measure(impl, setup, num_seeds, "ppo")


def scaling(iterations_budget: int, env_counts: list[int], seed_counts: list[int]) -> dict:
    """Env steps/s against num_envs (one seed) and num_seeds (4 envs), each impl once."""
    points = {"num_envs": [], "num_seeds": []}
    for num_envs in env_counts:
        num_steps = max(16, 512 // num_envs)
        iterations = max(10, iterations_budget // (num_envs * num_steps))
        for impl in ("canter", "rejax", "random"):
            point = harness.spawn(SCRIPT, impl, 1, num_envs, num_steps, iterations)
            points["num_envs"].append(point)
            print(f"  {impl} envs {num_envs}: {point['steps_per_s']:,.0f} steps/s", flush=True)
    for num_seeds in seed_counts:
        iterations = max(10, iterations_budget // 512)
        for impl in ("canter", "rejax"):
            point = harness.spawn(SCRIPT, impl, num_seeds, 4, 128, iterations)
            points["num_seeds"].append(point)
            print(f"  {impl} seeds {num_seeds}: {point['steps_per_s']:,.0f} steps/s", flush=True)
    return points


def scaling_table(points: dict) -> str:
    lines = ["| sweep | value | canter steps/s | rejax steps/s | random-policy steps/s |"]
    lines.append("|---|---:|---:|---:|---:|")
    for axis in ("num_envs", "num_seeds"):
        values = sorted({p[axis] for p in points[axis]})
        for value in values:
            by_impl = {p["impl"]: p["steps_per_s"] for p in points[axis] if p[axis] == value}
            cells = [f"{by_impl[i]:,.0f}" if i in by_impl else "" for i in ("canter", "rejax")]
            ceiling = f"{by_impl['random']:,.0f}" if "random" in by_impl else ""
            lines.append(f"| {axis} | {value} | {cells[0]} | {cells[1]} | {ceiling} |")
    return "\n".join(lines)


def scaling_plot(points: dict, path: Path) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, axis in zip(axes, ("num_envs", "num_seeds"), strict=True):
        for impl in ("canter", "rejax", "random"):
            series = sorted((p[axis], p["steps_per_s"]) for p in points[axis] if p["impl"] == impl)
            if series:
                xs, ys = zip(*series, strict=True)
                ax.plot(xs, ys, marker="o", label="random policy" if impl == "random" else impl)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(axis + (" (1 seed)" if axis == "num_envs" else " (4 envs each)"))
        ax.set_ylabel("env steps / s")
        ax.grid(alpha=0.3)
        ax.legend()
    figure.suptitle(f"PPO CartPole-v1 throughput, {harness.machine()}")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    harness.write(path, buffer.getvalue())


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--one-core", action="store_true", help="also canter's CLI pinned to one core (the bound)"
    )
    parser.add_argument("--iterations", type=int, default=CARTPOLE["iterations"])
    parser.add_argument("--scaling", action="store_true", help="also the throughput sweeps")
    parser.add_argument("--scaling-steps", type=int, default=131_072, help="env steps per point")
    parser.add_argument("--envs", type=int, nargs="+", default=[4, 16, 64, 256, 1024])
    parser.add_argument("--scaling-seeds", type=int, nargs="+", default=[1, 4, 16, 64])
    args = parser.parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    impls = harness.impls("canter", "canter-pure", one_core=args.one_core)
    sizes = (CARTPOLE["num_envs"], CARTPOLE["num_steps"], args.iterations)
    print(f"head to head, {harness.machine()}", flush=True)
    rows = harness.head_to_head(SCRIPT, args.repeats, args.seeds, impls, sizes)
    harness.report(args.out, "speed", rows, impls)
    if args.scaling:
        print("scaling", flush=True)
        points = scaling(args.scaling_steps, args.envs, args.scaling_seeds)
        harness.write(args.out / "scaling.json", json.dumps(points, indent=1))
        harness.write(args.out / "scaling.md", scaling_table(points) + "\n")
        scaling_plot(points, args.out / "scaling.png")
        print(scaling_table(points))


if __name__ == "__main__":
    main()

"""canter's host-env adapter against a bare Gymnasium vector env: random actions, HalfCheetah-v5.

Random actions in HalfCheetah-v5 for 4,000 steps of 1 and 8 envs, in fresh processes taking
turns (benchmarks/harness.py): through canter's adapter (a `gymnasium:` env, one jitted scan of
vmapped steps, compile excluded) against Gymnasium's own sync vector env stepped from Python;
env steps/s, and the adapter's over the bare env's within each round (the `mujoco` extra).

    pip install -e ".[mujoco]"
    python benchmarks/speed/speed_host.py

Writes benchmarks/results/speed_host.md.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

SCRIPT = __file__
HOST_ENV, HOST_STEPS, HOST_ENVS = "HalfCheetah-v5", 4_000, (1, 8)


def work(impl: str, num_envs: int, steps: int) -> dict:
    """The worker, `--worker IMPL ENVS STEPS`: random-action env steps/s of HOST_ENV through
    canter's adapter (`adapter`: a jitted scan of vmapped steps, compile excluded) or a bare
    Gymnasium sync vector env (`bare`)."""
    import jax

    tic = time.perf_counter()
    if impl == "adapter":
        from canter.common.envs import make_env

        env, params = make_env(f"gymnasium:{HOST_ENV}")
        space = env.action_space(params)
        reset = jax.vmap(env.reset, in_axes=(0, None))
        step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

        def rollout(key: jax.Array) -> jax.Array:
            obs, state = reset(jax.random.split(key, num_envs), params)

            def one(state: object, key: jax.Array) -> tuple:
                action = jax.random.uniform(
                    key, (num_envs, *space.shape), minval=space.low, maxval=space.high
                )
                keys = jax.random.split(key, num_envs)
                _, state, reward, *_ = step(keys, state, action, params)
                return state, reward

            return jax.lax.scan(one, state, jax.random.split(key, steps))[1].sum()

        compiled = jax.jit(rollout).lower(jax.random.key(0)).compile()
        compile_s = time.perf_counter() - tic
        tic = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.key(0)))
    else:
        import gymnasium

        envs = gymnasium.make_vec(HOST_ENV, num_envs, vectorization_mode="sync")
        envs.reset(seed=0)
        envs.action_space.seed(0)
        compile_s = time.perf_counter() - tic
        tic = time.perf_counter()
        for _ in range(steps):
            envs.step(envs.action_space.sample())
    run_s = time.perf_counter() - tic
    return {
        "impl": impl,
        "num_envs": num_envs,
        "steps": steps,
        "run_s": run_s,
        "setup_s": compile_s,
        "steps_per_s": num_envs * steps / run_s,
    }


def host_overhead(repeats: int) -> str:
    """canter's host-env adapter against the bare Gymnasium vector env, fresh processes in turn."""
    pair = ("adapter", "bare")
    lines = [
        "| envs | adapter env steps/s | bare Gymnasium env steps/s "
        "| adapter / bare: median (per round) |",
        "|---:|---:|---:|---|",
    ]
    for num_envs in HOST_ENVS:
        rounds = harness.rounds(
            repeats,
            pair,
            lambda impl, n=num_envs: harness.spawn(SCRIPT, impl, n, HOST_STEPS),
            lambda r: f"{r['steps_per_s']:,.0f} steps/s",
            f"envs {num_envs} ",
        )
        cells = [harness.median(rounds, i, "steps_per_s") for i in pair]
        ratio = harness.ratio_cell(harness.ratios(rounds, "adapter", "bare", "steps_per_s"))
        lines.append(f"| {num_envs} | {cells[0]:,.0f} | {cells[1]:,.0f} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    args = harness.parser(__doc__).parse_args()
    if args.worker:
        return harness.worker(work, args.worker)

    print(f"host-env adapter against bare Gymnasium, {HOST_ENV}, {harness.machine()}", flush=True)
    table = host_overhead(args.repeats)
    harness.write(args.out / "speed_host.md", f"{table}\n\nMachine: {harness.machine()}.\n")
    print(table)


if __name__ == "__main__":
    main()

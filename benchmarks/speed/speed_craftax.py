"""What Craftax's resets cost: random actions in Craftax-Symbolic, episodes ending as they do.

Three ways of stepping `--envs` envs with uniformly random actions, `--steps` steps per
`lax.scan`, `--calls` scans in a row carrying the state (so that episodes end and reset at their
natural rate), all in one process, compile apart, ways taking turns over `--repeats` rounds:

- `canter`: `make_env("craftax:<game>")` stepped by `common.envs.vector_step`, what every
  algorithm runs (resets from spare worlds, common/envs/craftax.py);
- `craftax-auto-reset`: Craftax's own environment with `auto_reset=True`, vmapped (a world
  generated for every env at every step: `vmap` turns the reset branch into a select);
- `no-reset`: Craftax's `step_env` alone, vmapped, episodes never reset: the ceiling.

Reports env steps/s (median over rounds, per-round values beside it) and, for `canter`, the
episodes that ended per 1,000 env steps. Issue 25's target: `canter` >= 4,000 env steps/s on the
2-core CPU at 256 envs.

    python benchmarks/speed/speed_craftax.py                # 256 envs, 4 x 64 steps, 3 rounds
    python benchmarks/speed/speed_craftax.py --calls 2 --steps 8 --repeats 1 --out /tmp/craftax

Writes <out>/speed_craftax.md and .json (default out: benchmarks/results).
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

WAYS = ("canter", "craftax-auto-reset", "no-reset")


def make_runner(way: str, game: str, num_envs: int, num_steps: int):
    """(init(key) -> carry, run(carry, key) -> (carry, ended)) for one way of stepping."""
    import jax
    import jax.numpy as jnp

    if way == "canter":
        from canter.common.envs import make_env, vector_step

        env, params = make_env(f"craftax:{game}")
        reset = jax.vmap(env.reset, in_axes=(0, None))
        step = vector_step(env)
        num_actions = int(env.action_space(params).n)

        def one(state, key):
            action_key, step_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, num_actions)
            keys = jax.random.split(step_key, num_envs)
            _, state, _, terminated, truncated, _ = step(keys, state, actions, params)
            return state, jnp.sum(terminated | truncated)

    else:
        from craftax.craftax_env import make_craftax_env_from_name

        bare = make_craftax_env_from_name(game, way == "craftax-auto-reset")
        params = bare.default_params
        reset = jax.vmap(bare.reset, in_axes=(0, None))
        bare_step = bare.step if way == "craftax-auto-reset" else bare.step_env
        vstep = jax.vmap(bare_step, in_axes=(0, 0, 0, None))
        num_actions = int(bare.num_actions)

        def one(state, key):
            action_key, step_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, num_actions)
            _, state, _, done, _ = vstep(
                jax.random.split(step_key, num_envs), state, actions, params
            )
            return state, jnp.sum(done)

    def init(key):
        return reset(jax.random.split(key, num_envs), params)[1]

    @jax.jit
    def run(state, key):
        state, ended = jax.lax.scan(one, state, jax.random.split(key, num_steps))
        return state, ended.sum()

    return jax.jit(init), run


def measure(way: str, game: str, num_envs: int, num_steps: int, calls: int, repeats: int):
    """Per round: env steps/s over `calls` scans and the episodes that ended."""
    init, run = make_runner(way, game, num_envs, num_steps)
    return harness.scan_rounds(init, run, num_envs * num_steps, calls, repeats)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--game", default="Craftax-Symbolic-v1")
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--ways", nargs="+", choices=WAYS, default=list(WAYS))
    args = parser.parse_args()
    results = {}
    for way in args.ways:  # one way's rounds in a row: each way compiles once
        results[way] = measure(way, args.game, args.envs, args.steps, args.calls, args.repeats)
        speeds = [f"{r['steps_per_s']:,.0f}" for r in results[way]["rounds"]]
        print(f"  {way}: {', '.join(speeds)} env steps/s", flush=True)
    record = {"machine": harness.machine(), "args": vars(args) | {"out": str(args.out)}}
    harness.write(args.out / "speed_craftax.json", json.dumps(record | {"ways": results}, indent=1))
    lines = [
        f"| way ({args.game}, {args.envs} envs, random actions) | env steps/s: median (per "
        "round) | episodes ended per 1,000 env steps | compile (s) |",
        "|---|---|---:|---:|",
    ]
    for way, result in results.items():
        rounds = result["rounds"]
        speeds = [r["steps_per_s"] for r in rounds]
        per_round = ", ".join(f"{s:,.0f}" for s in speeds)
        ended = sum(r["ended"] for r in rounds) / sum(r["steps"] for r in rounds) * 1000
        ended_cell = "" if way == "no-reset" else f"{ended:.2f}"  # dead players stay done there
        lines.append(
            f"| {way} | {statistics.median(speeds):,.0f} ({per_round}) | {ended_cell} "
            f"| {result['compile_s']:.1f} |"
        )
    lines += [
        "",
        f"Machine: {record['machine']}. {args.calls} scans of {args.steps} steps per round, the "
        "state carried from scan to scan and round to round; one process, compile apart.",
    ]
    harness.write(args.out / "speed_craftax.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

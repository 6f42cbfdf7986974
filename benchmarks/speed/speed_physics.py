"""JAX physics on this machine: random-policy env steps/s of Playground and Brax envs across batch
widths, against MuJoCo on the host, and the continuous presets against that ceiling.

Ways of stepping `--envs` envs (each width in turn) with uniformly random actions, `--steps`
steps per `lax.scan`, `--calls` scans in a row carrying the state, compile apart:

- `canter`: `make_env(<env>)` stepped by `common.envs.vector_step`, what every algorithm runs
  (resets from spares, common/envs/spares.py), for each JAX env in `--envs-jax`;
- `no-reset`: the suite's own `step`, vmapped, episodes never reset: the simulator alone (a
  fallen Brax hopper goes on lying there, in contact, which can cost more than standing);
- `host`: `--env-host` (default `gymnasium:HalfCheetah-v5`, the `mujoco` extra) stepped on the
  host inside the compiled step, as canter's algorithms step it (common/envs/host.py).

With `--presets ALGO:PRESET[:FIELD=VALUE,...] ...`, each preset (with those fields changed, e.g.
`num_steps=30`: one unroll of a PPO preset's 16, the same work per env step) also trains for at
least `--iterations` iterations and `--seconds` (default 10; after one that compiles, and an
off-policy preset's warm-up) and its env steps/s is set against the `canter` ceiling of its env
and width, measured for it when `--widths` and `--envs-jax` leave that out.

    python benchmarks/speed/speed_physics.py                     # the table in docs/speed.md
    python benchmarks/speed/speed_physics.py --widths 16 --steps 4 --calls 1 --out /tmp/physics
    python benchmarks/speed/speed_physics.py --ways canter --envs-jax playground:CheetahRun \\
        --widths 128 1024 --steps 16 --out benchmarks/results/physics_presets --presets \\
        ppo_continuous:CheetahRun:num_steps=30,num_envs=1024 sac:CheetahRun ppo_continuous:ant

Writes <out>/speed_physics.md and .json (default out: benchmarks/results).
"""

import dataclasses
import importlib
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.returns import returns  # noqa: E402

JAX_ENVS = (
    "playground:CartpoleBalance",
    "playground:CheetahRun",
    "brax:hopper",
    "brax:halfcheetah",
)


def make_runner(way: str, name: str, num_envs: int, num_steps: int):
    """(init(key) -> state, run(state, key) -> (state, episodes ended)) for one way."""
    import jax
    import jax.numpy as jnp
    from canter.common.envs import make_env, vector_step

    env, params = make_env(name, action="continuous")
    space = env.action_space(params)
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    if way == "no-reset":  # the suite's own env and step (its reset through the adapter's)
        bare = env.unwrapped
        reset = jax.vmap(lambda key: bare.reset_inner(key, params)[1].inner)
        step = jax.vmap(bare.physics.step)

        def one(state, key):
            actions = jax.random.uniform(key, (num_envs, *low.shape), minval=low, maxval=high)
            state = step(state, actions)
            return state, jnp.sum(state.done > 0)

    else:
        reset = jax.vmap(lambda key: env.reset(key, params)[1])
        vstep = vector_step(env)

        def one(state, key):
            action_key, step_key = jax.random.split(key)
            actions = jax.random.uniform(
                action_key, (num_envs, *low.shape), minval=low, maxval=high
            )
            keys = jax.random.split(step_key, num_envs)
            _, state, _, terminated, truncated, _ = vstep(keys, state, actions, params)
            return state, jnp.sum(terminated | truncated)

    def init(key):
        return reset(jax.random.split(key, num_envs))

    def run(state, key):
        state, ended = jax.lax.scan(one, state, jax.random.split(key, num_steps))
        return state, ended.sum()

    return jax.jit(init), jax.jit(run)


def measure_preset(spec: str, iterations: int, seconds: float = 10.0) -> dict:
    """`ALGO:PRESET[:FIELD=VALUE,...]`'s training env steps/s over at least `iterations`
    iterations and `seconds`, after one that compiles and, for off-policy presets, the warm-up
    iterations that fill the buffer without updates."""
    import jax

    algo, preset, *rest = spec.split(":", 2)  # the fields may name an env: env=brax:ant
    module = importlib.import_module(f"canter.algorithms.{algo}")
    overrides = returns.parse_overrides(module.Config, rest[0].split(",") if rest else [])
    config = dataclasses.replace(module.Config(), **{**module.PRESETS[preset], **overrides})
    train = module.make_train(config)
    per_iteration = train.env_steps_per_iteration
    state = jax.block_until_ready(jax.jit(train.init)(jax.random.key(0)))
    step = jax.jit(train.step, donate_argnums=0)  # as the runner's interval: in place
    tic = time.perf_counter()
    state, _ = jax.block_until_ready(step(state, 0))  # compiles
    compile_s = time.perf_counter() - tic
    first = getattr(config, "learning_starts", 0) // per_iteration + 1  # every one updates
    first = max(first, getattr(config, "n_steps", 1))  # fast_td3: whole windows too
    for i in range(1, first):
        state, _ = step(state, i)
    state = jax.block_until_ready(state)  # the warm-up's queued work stays out of the timing
    done, tic = 0, time.perf_counter()
    while done < iterations or time.perf_counter() - tic < seconds:
        state, _ = jax.block_until_ready(step(state, first + done))
        done += 1
    seconds = time.perf_counter() - tic
    return {
        "env": config.env,
        "num_envs": config.num_envs,
        "overrides": overrides,
        "steps_per_s": done * per_iteration / seconds,
        "updates_per_s": done * updates_per_iteration(config) / seconds,
        "compile_s": compile_s,
        "iterations": done,
    }


def updates_per_iteration(config) -> int:
    """Gradient steps of an iteration: minibatches of every epoch (PPO), critic updates per
    step of the envs (sac, td3: `updates_per_iteration`; fast_td3: `num_updates`)."""
    if hasattr(config, "update_epochs"):
        return config.update_epochs * config.num_minibatches
    return getattr(config, "updates_per_iteration", getattr(config, "num_updates", 1))


def median(result: dict) -> float:
    return statistics.median(r["steps_per_s"] for r in result["rounds"])


def render(record: dict) -> str:
    from canter.common.run import cli  # each override as the flag that sets it

    args, results = record["args"], record["results"]
    widths = args["widths"]
    lines = [
        "| env (random actions) | way | "
        + " | ".join(f"{w} envs" for w in widths)
        + " | compile (s, widest) |",
        "|---|---|" + "---:|" * (len(widths) + 1),
    ]
    for key, by_width in results.items():
        if not any(str(w) in by_width for w in widths):
            continue  # only a preset's own ceiling, in the presets' table
        name, way = key.split(" | ")
        cells = [f"{median(by_width[str(w)]):,.0f}" if str(w) in by_width else "" for w in widths]
        widest = by_width[str(max(int(w) for w in by_width))]
        lines.append(f"| {name} | {way} | {' | '.join(cells)} | {widest['compile_s']:.0f} |")
    lines += [
        "",
        f"Env steps/s, median over {args['repeats']} rounds of {args['calls']} scans of "
        f"{args['steps']} steps. Machine: {record['machine']}.",
    ]
    if record.get("presets"):
        lines += [
            "",
            "| preset | env | envs | training env steps/s | updates/s | random-policy ceiling "
            "| share | compile (s) |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for spec, p in record["presets"].items():
            ceiling = results.get(f"{p['env']} | canter", {}).get(str(p["num_envs"]))
            cell = f"{median(ceiling):,.0f}" if ceiling else "not measured"
            ratio = p["steps_per_s"] / median(ceiling) if ceiling else None
            share = "" if ratio is None else f"{ratio:.2f}" if ratio >= 0.01 else f"{ratio:.4f}"
            algo, preset = spec.split(":")[:2]
            updates = f"{p['updates_per_s']:.3g}" if "updates_per_s" in p else "not measured"
            flags = "".join(f" {cli.flag(k, v)}" for k, v in p["overrides"].items())
            lines.append(
                f"| `{algo} --preset {preset}{flags}` | {p['env']} | {p['num_envs']} "
                f"| {p['steps_per_s']:,.0f} | {updates} | {cell} | {share} "
                f"| {p['compile_s']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--envs-jax", nargs="+", default=list(JAX_ENVS))
    parser.add_argument("--env-host", default="gymnasium:HalfCheetah-v5")
    parser.add_argument("--widths", nargs="+", type=int, default=[16, 64, 256, 1024])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--ways", nargs="+", choices=("canter", "no-reset", "host"))
    parser.add_argument("--presets", nargs="*", default=[], help="ALGO:PRESET ...")
    parser.add_argument("--iterations", type=int, default=1, help="timed, at least")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed, at least")
    args = parser.parse_args()
    ways = args.ways or ["canter", "no-reset", "host"]
    jobs = [(name, way) for name in args.envs_jax for way in ways if way != "host"]
    jobs += [(args.env_host, "host")] if "host" in ways else []
    results: dict = {}

    def measure(name: str, way: str, width: int) -> None:
        init, run = make_runner(way, name, width, args.steps)
        result = harness.scan_rounds(init, run, width * args.steps, args.calls, args.repeats)
        results.setdefault(f"{name} | {way}", {})[str(width)] = result
        print(f"  {name} {way} {width} envs: {median(result):,.0f} env steps/s", flush=True)

    for name, way in jobs:
        for width in args.widths:
            measure(name, way, width)
    presets = {spec: measure_preset(spec, args.iterations, args.seconds) for spec in args.presets}
    for spec, p in presets.items():
        print(f"  {spec}: {p['steps_per_s']:,.0f} env steps/s", flush=True)
        if str(p["num_envs"]) not in results.get(f"{p['env']} | canter", {}):
            measure(p["env"], "canter", p["num_envs"])  # its own ceiling, at its width
    record = {
        "machine": harness.machine(),
        "args": vars(args) | {"out": str(args.out)},
        "results": results,
        "presets": presets,
    }
    harness.write(args.out / "speed_physics.json", json.dumps(record, indent=1))
    harness.write(args.out / "speed_physics.md", render(record))
    print(render(record))


if __name__ == "__main__":
    main()

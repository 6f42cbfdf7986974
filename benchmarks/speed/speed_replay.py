"""fast_td3's replay buffer at FastTD3's scale: its memory per env step, what sampling a batch
costs beside the whole update, and whether the compiled step updates it in place.

For each fast_td3 preset of `--presets PRESET[:FIELD=VALUE,...]` (default CheetahRun: 1,024
envs x 10,240 rows per env, batches of 32,768 3-step windows, and the same with a quarter of the
rows), with those fields and `--set FIELD=VALUE`'s changed:

- bytes: the buffer's bytes per stored env step and in all, from the shapes alone
  (`jax.eval_shape`, nothing allocated);
- aliasing: the vector step as the runner compiles it (the state donated), XLA's memory
  analysis of it: the bytes of the state its outputs reuse in place, the outputs' bytes and the
  temporaries it allocates (a copied buffer would show as output or temporary bytes growing
  with the buffer; the second preset, a quarter of the rows, tells);
- time: after `--warm` vector steps (at least enough to pass learning_starts with whole
  n-step windows, so that every timed step updates), the median over `--repeats` of one vector
  step (a rollout step and `num_updates` updates, the actor's every `policy_frequency`-th), and
  of sampling one batch of windows alone (`sample_windows`, the same shapes) from rings marked
  full, every row a window start, as in a long run; sampling's share of an update is the
  second over the vector step's time per update (its rollout step included).

    python benchmarks/speed/speed_replay.py                              # docs/speed.md's rows
    python benchmarks/speed/speed_replay.py --presets CheetahRun --set num_envs=64 \\
        buffer_size=256 batch_size=2048 learning_starts=0 actor_hidden=64 critic_hidden=64 \\
        --out /tmp/replay

Writes <out>/speed_replay.md and .json (default out: benchmarks/results).
"""

import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.returns import returns  # noqa: E402


def nbytes(tree) -> int:
    import jax

    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(tree))


def timed(fn, args_of, repeats: int) -> tuple[list[float], object]:
    """`repeats` calls of `fn(*args_of(i, last output))`, each waited for: their seconds and
    the last output."""
    import jax

    times, out = [], None
    for i in range(repeats):
        args = args_of(i, out)
        tic = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - tic)
    return times, out


def measure(spec: str, overrides: list[str], warm: int, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp
    from canter.algorithms import fast_td3

    preset, *rest = spec.split(":", 1)
    overrides = overrides + (rest[0].split(",") if rest else [])
    fields = returns.parse_overrides(fast_td3.Config, overrides)
    config = dataclasses.replace(fast_td3.Config(), **{**fast_td3.PRESETS[preset], **fields})
    train = fast_td3.make_train(config)
    key = jax.random.key(0)
    shapes = jax.eval_shape(train.init, key)
    buffer_bytes = nbytes(shapes.buffer.data)
    step = jax.jit(train.step, donate_argnums=0)  # as the runner's interval: donated
    compiled = step.lower(shapes, 0).compile()
    analysis = compiled.memory_analysis()
    # Every timed step updates: past learning_starts, with whole n-step windows in the rings.
    warm = max(warm, config.learning_starts // config.num_envs + config.n_steps + 1)
    state = jax.block_until_ready(jax.jit(train.init)(key))
    for i in range(warm):
        state, _ = compiled(state, i)
    state = jax.block_until_ready(state)

    def next_step(i, out):
        return (out[0] if out else state), warm + i

    steps, (state, _) = timed(compiled, next_step, repeats)
    per_env = max(1, config.batch_size // config.num_envs)
    # Sampling from full rings (every row a window start), as a long run's updates do: the rows
    # the warm-up wrote are a sliver of the buffer, and would stay in cache.
    full = dataclasses.replace(state.buffer, size=jnp.asarray(config.buffer_size, jnp.int32))
    sample = jax.jit(fast_td3.sample_windows, static_argnums=(2, 3))
    keys = jax.random.split(key, repeats + 1)
    jax.block_until_ready(sample(full, keys[-1], per_env, config.n_steps))  # compiles
    samples, _ = timed(sample, lambda i, _: (full, keys[i], per_env, config.n_steps), repeats)
    step_s = statistics.median(steps)
    return {
        "preset": preset,
        "overrides": fields,
        "num_envs": config.num_envs,
        "buffer_size": config.buffer_size,
        "batch_size": per_env * config.num_envs,
        "n_steps": config.n_steps,
        "num_updates": config.num_updates,
        "buffer_bytes": buffer_bytes,
        "bytes_per_env_step": buffer_bytes / (config.num_envs * config.buffer_size),
        "argument_bytes": analysis.argument_size_in_bytes,
        "output_bytes": analysis.output_size_in_bytes,
        "alias_bytes": analysis.alias_size_in_bytes,
        "temp_bytes": analysis.temp_size_in_bytes,
        "step_s": steps,
        "sample_s": samples,
        "sample_share": statistics.median(samples) / (step_s / config.num_updates),
        "warm": warm,
    }


def size(count: float) -> str:
    """Bytes in GiB, or MiB below one GiB."""
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def render(record: dict) -> str:
    from canter.common.run import cli

    lines = [
        "| fast_td3 | envs x rows | batch (n-step) | buffer | bytes per env step | "
        "state aliased in place | outputs | temporaries | vector step | per update (its share) "
        "| sampling a batch | sampling's share of an update |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in record["results"]:
        flags = "".join(f" {cli.flag(k, v)}" for k, v in r["overrides"].items())
        step = statistics.median(r["step_s"])
        lines.append(
            f"| `--preset {r['preset']}{flags}` | {r['num_envs']:,} x {r['buffer_size']:,} "
            f"| {r['batch_size']:,} ({r['n_steps']}) | {size(r['buffer_bytes'])} "
            f"| {r['bytes_per_env_step']:.0f} B | {size(r['alias_bytes'])} of "
            f"{size(r['argument_bytes'])} | {size(r['output_bytes'])} | {size(r['temp_bytes'])} "
            f"| {step * 1e3:,.0f} ms | {step / r['num_updates'] * 1e3:,.0f} ms "
            f"| {statistics.median(r['sample_s']) * 1e3:,.1f} ms "
            f"| {r['sample_share']:.4f} |"
        )
    lines += [
        "",
        f"Medians over {record['args']['repeats']} vector steps, after at least "
        f"{record['args']['warm']} that pass learning_starts (every timed step updates), and "
        f"over as many batches drawn from full rings. A vector step is a rollout step and "
        f"`num_updates` updates; per update is its share. Machine: {record['machine']}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument(
        "--presets", nargs="+", default=["CheetahRun", "CheetahRun:buffer_size=2560"]
    )
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE")
    parser.add_argument("--warm", type=int, default=16, help="vector steps before timing, at least")
    args = parser.parse_args()
    results = []
    for preset in args.presets:
        result = measure(preset, args.set, args.warm, args.repeats)
        print(
            f"  {preset}: {result['bytes_per_env_step']:.0f} B per env step, "
            f"vector step {statistics.median(result['step_s']):.2f} s, sampling share "
            f"{result['sample_share']:.3f}",
            flush=True,
        )
        results.append(result)
    record = {
        "machine": harness.machine(),
        "args": vars(args) | {"out": str(args.out)},
        "results": results,
    }
    harness.write(args.out / "speed_replay.json", json.dumps(record, indent=1))
    harness.write(args.out / "speed_replay.md", render(record))
    print(render(record))


if __name__ == "__main__":
    main()

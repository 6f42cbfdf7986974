"""Where the CLI runner's extra run time goes: one process, one config, three ways in turn.

- `pure`: `jax.jit(jax.vmap(train))` of the whole run, one program;
- `plain`: `start` and one `interval` as plain `jax.jit(jax.vmap(...))` programs, called back to
  back (no shardings, no buffer donation, no finiteness check);
- `plain-single`: the same without `vmap` (one seed), as the runner compiles a single entry;
- `programs`: the runner's two compiled programs (`start`, then one `interval` per interval,
  common/run/programs.py) called back to back from a plain loop, nothing else;
- `runner`: `trainer.run` as the command line runs it, nothing written (`verbose=False`).

Each runs once first, then `--repeats` times in turn in this one process, so their difference
is not process start, compilation or first-call cost (the runner compiles its programs on
every call; its own `run_s`, which leaves that out, is what is compared). `programs` over `pure`
is the cost of splitting the run into intervals; `runner` over `programs` is the runner's own
host work (threads, metrics to the host, progress). On the H100 the CLI runner took 0.2-0.8 s
more than the pure program (docs/speed.md, "On a GPU"); this says which part.

    python benchmarks/speed/runner_split.py --setup minatar --iterations 100 --repeats 3
    python benchmarks/speed/runner_split.py --setup minatar cartpole --iterations 100 300

Writes benchmarks/results/runner_split.md (a row per setup, kept across runs) and .json.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402
from benchmarks.speed import speed_minatar, speed_ppo  # noqa: E402

WAYS = ("pure", "plain", "plain-single", "programs", "runner")
SETUPS = {"minatar": speed_minatar.PPO_SETUP, "cartpole": speed_ppo.CARTPOLE}


def timings(setup: dict, repeats: int) -> dict[str, list[float]]:
    """Run seconds of each way, `repeats` rounds in turn, after compiling all three."""
    import jax
    import jax.numpy as jnp
    from canter.algorithms import ppo, trainer
    from canter.common.run import programs
    from canter.common.run.batch import make_batch

    config = speed_ppo.canter_config(setup)
    keys = jax.random.split(jax.random.key(0), 1)
    pure = jax.jit(jax.vmap(ppo.make_train(config))).lower(keys).compile()
    split = programs.compile_programs(ppo.make_train, make_batch(config, None))
    train = ppo.make_train(config)
    plain_start = jax.jit(jax.vmap(train.start))
    plain_interval = jax.jit(jax.vmap(train.interval, in_axes=(0, 0, None)))
    single_start, single_interval = jax.jit(train.start), jax.jit(train.interval)

    def run_plain(start, interval, keys) -> float:
        tic = time.perf_counter()
        state, eval_keys = start(keys)
        for i in range(train.num_intervals):
            state, metrics = interval(state, eval_keys, jnp.int32(i))
            jax.device_get(metrics)
        jax.block_until_ready(state)
        return time.perf_counter() - tic

    def run_pure() -> float:
        tic = time.perf_counter()
        jax.block_until_ready(pure(keys))
        return time.perf_counter() - tic

    def run_programs() -> float:
        tic = time.perf_counter()
        state, eval_keys = split.start(split.configs, split.keys)
        for i in range(ppo.make_train(config).num_intervals):
            one = (jnp.int32(i), jnp.int32(1))  # one interval per call
            state, metrics, ok = split.intervals(split.configs, state, eval_keys, *one)
            jax.device_get((metrics, ok))
        jax.block_until_ready(state)
        return time.perf_counter() - tic

    def run_runner() -> float:  # its own run time: compiling its programs is left out
        return trainer.run(config, ppo.make_train, algo="ppo", verbose=False).summary["run_s"]

    ways = {
        "pure": run_pure,
        "plain": lambda: run_plain(plain_start, plain_interval, keys),
        "plain-single": lambda: run_plain(single_start, single_interval, keys[0]),
        "programs": run_programs,
        "runner": run_runner,
    }
    for way in ways.values():  # first calls apart
        way()
    out = {name: [] for name in ways}
    for _ in range(repeats):
        for name, way in ways.items():
            out[name].append(way())
    return out


def row(name: str, setup: dict, seconds: dict[str, list[float]]) -> str:
    """One table row; a way this row's run did not time (an older run) is left blank."""
    median = {k: statistics.median(v) for k, v in seconds.items()}
    intervals = -(-setup["iterations"] // min(speed_ppo.EVAL_EVERY, setup["iterations"]))

    def ratio(a: str, b: str) -> str:
        return f"{median[a] / median[b]:.3f}" if a in median and b in median else ""

    cells = [
        f"PPO {name}, {setup['iterations']} iterations, 1 seed",
        str(intervals),
        *(f"{median[k]:.3f}" if k in median else "" for k in WAYS),
        ratio("plain", "pure"),
        ratio("plain-single", "pure"),
        ratio("programs", "pure"),
        ratio("runner", "programs"),
        f"{1000 * (median['runner'] - median['pure']) / intervals:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--setup", nargs="+", choices=sorted(SETUPS), default=["minatar"])
    parser.add_argument(
        "--iterations", type=int, nargs="+", help="per setup, in order; default: each setup's own"
    )
    args = parser.parse_args()
    if args.iterations and len(args.iterations) != len(args.setup):
        parser.error(
            f"--iterations gives {len(args.iterations)} values for {len(args.setup)} setups"
        )
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    for i, name in enumerate(args.setup):
        setup = dict(SETUPS[name])
        if args.iterations:
            setup["iterations"] = args.iterations[i]
        seconds = timings(setup, args.repeats)
        path = args.out / "runner_split.json"
        record = json.loads(path.read_text()) if path.exists() else {"rows": {}}
        record["machine"] = harness.machine()
        record["rows"][name] = {"setup": setup, "seconds": seconds}
        harness.write(path, json.dumps(record, indent=1))
    print(render(args.out))


def render(directory: Path) -> str:
    """Write `directory`/runner_split.md from its runner_split.json; return the table."""
    record = json.loads((directory / "runner_split.json").read_text())
    lines = [
        "| work | intervals | pure (s) | plain (s) | plain-single (s) | programs (s) | runner (s) "
        "| plain / pure | plain-single / pure | programs / pure | runner / programs "
        "| runner - pure per interval (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *(row(name, r["setup"], r["seconds"]) for name, r in record["rows"].items()),
        "",
        f"Machine: {record['machine']}. Medians of the rounds in one process, after compiling "
        "(blank: a way that row's run did not time).",
    ]
    harness.write(directory / "runner_split.md", "\n".join(lines) + "\n")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

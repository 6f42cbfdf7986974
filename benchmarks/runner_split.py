"""Where the CLI runner's extra run time goes: one process, one config, three ways in turn.

- `pure`: `jax.jit(jax.vmap(train))` of the whole run, one program;
- `programs`: the runner's two compiled programs (`start`, then one `interval` per interval,
  common/run/programs.py) called back to back from a plain loop, nothing else;
- `runner`: `trainer.run` as the command line runs it, nothing written (`verbose=False`).

Each runs once first, then `--repeats` times in turn in this one process, so their difference
is not process start, compilation or first-call cost (the runner compiles its programs on
every call; its own `run_s`, which leaves that out, is what is compared). `programs` over `pure`
is the cost of splitting the run into intervals; `runner` over `programs` is the runner's own
host work (threads, metrics to the host, progress). On the H100 the CLI runner took 0.2-0.8 s
more than the pure program (docs/speed.md, "On a GPU"); this says which part.

    python benchmarks/runner_split.py --setup minatar --iterations 100 --repeats 3
    python benchmarks/runner_split.py --setup cartpole --iterations 1000 --repeats 3

Writes benchmarks/results/runner_split.md (a row per setup, kept across runs) and .json.
"""

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `benchmarks` from any directory

from benchmarks import harness, speed_minatar, speed_ppo  # noqa: E402

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

    def run_pure() -> float:
        tic = time.perf_counter()
        jax.block_until_ready(pure(keys))
        return time.perf_counter() - tic

    def run_programs() -> float:
        tic = time.perf_counter()
        state, eval_keys = split.start(split.configs, split.keys)
        for i in range(ppo.make_train(config).num_intervals):
            state, metrics, ok = split.interval(split.configs, state, eval_keys, jnp.int32(i))
            jax.device_get((metrics, ok))
        jax.block_until_ready(state)
        return time.perf_counter() - tic

    def run_runner() -> float:  # its own run time: compiling its programs is left out
        return trainer.run(config, ppo.make_train, algo="ppo", verbose=False).summary["run_s"]

    ways = {"pure": run_pure, "programs": run_programs, "runner": run_runner}
    for way in ways.values():  # first calls apart
        way()
    out = {name: [] for name in ways}
    for _ in range(repeats):
        for name, way in ways.items():
            out[name].append(way())
    return out


def row(name: str, setup: dict, seconds: dict[str, list[float]]) -> str:
    median = {k: statistics.median(v) for k, v in seconds.items()}
    intervals = -(-setup["iterations"] // min(speed_ppo.EVAL_EVERY, setup["iterations"]))
    extra_ms = 1000 * (median["runner"] - median["pure"]) / intervals
    cells = [
        f"PPO {name}, {setup['iterations']} iterations, 1 seed",
        str(intervals),
        *(f"{median[k]:.3f}" for k in ("pure", "programs", "runner")),
        f"{median['programs'] / median['pure']:.3f}",
        f"{median['runner'] / median['programs']:.3f}",
        f"{extra_ms:.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="minatar")
    parser.add_argument("--iterations", type=int, help="default: the setup's own")
    args = parser.parse_args()
    setup = dict(SETUPS[args.setup])
    if args.iterations:
        setup["iterations"] = args.iterations
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    seconds = timings(setup, args.repeats)
    path = args.out / "runner_split.json"
    record = json.loads(path.read_text()) if path.exists() else {"rows": {}}
    record["machine"] = harness.machine()
    line = row(args.setup, setup, seconds)
    record["rows"][args.setup] = {"setup": setup, "seconds": seconds, "line": line}
    harness.write(path, json.dumps(record, indent=1))
    lines = [
        "| work | intervals | pure (s) | programs (s) | runner (s) | programs / pure "
        "| runner / programs | runner - pure per interval (ms) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *(r["line"] for r in record["rows"].values()),
        "",
        f"Machine: {record['machine']}. Medians of {args.repeats} rounds in one process, after "
        "compiling.",
    ]
    harness.write(args.out / "runner_split.md", "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

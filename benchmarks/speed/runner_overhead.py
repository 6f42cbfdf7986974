"""What the host runner costs: the command a user types (`python algorithms/ppo.py ...` in its
own process, its run time from the summary.json it writes) and `trainer.run` in a process (a
run directory with metric files and checkpoints, progress printed), with the runner
overlapping host and device (the default) and without (`overlap=False`), each against the plain
program a user would write, `jax.jit(jax.vmap(train))` of the same config in a fresh process.

PPO on CartPole-v1 with PureJaxRL's sizes (canter's defaults: 4 envs x 128 steps), 1 seed,
200 iterations (102,400 env steps); intervals of 1 iteration (an evaluation after each: 200
intervals, where the runner's host work per interval shows) and of 50 (the default cadence).
Fresh processes take turns; run time excludes compilation; ratios are within each round. Host
work per interval is the runner's own count (`summary["host_s"]`: progress, divergence check
and metric files, after the metrics reach the host), work the overlap hides.

    python benchmarks/speed/runner_overhead.py --repeats 3
    python benchmarks/speed/runner_overhead.py --repeats 1 --iterations 4 --out /tmp/x  # smoke run

Writes benchmarks/results/runner_overhead.md and .json.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `benchmarks` from any directory

from benchmarks import harness  # noqa: E402

IMPLS = ("command", "runner", "runner-sequential", "pure")
ROOT = harness.ROOT
CADENCES = (1, 50)  # iterations per interval


def measure(impl: str, iterations: int, per_interval: int) -> dict:
    """One run of `impl` in this (fresh) process."""
    from canter.algorithms import ppo, trainer

    config = ppo.Config(total_timesteps=iterations * 512, eval_every=per_interval * 512)
    host_s = 0.0
    if impl == "command":
        timing, host_s = command(iterations, per_interval)
    elif impl == "pure":
        timing = harness.timed_jit(ppo.make_train(config), harness.canter_final_return, 1)
    else:
        with tempfile.TemporaryDirectory() as scratch:
            overlap = impl == "runner"
            run_dir = Path(scratch) / "r"
            result = trainer.run(
                config, ppo.make_train, algo="ppo", run_dir=run_dir, overlap=overlap, verbose=True
            )
            summary = result.summary
            timing = (summary["compile_s"], summary["run_s"], summary["eval_return"])
            host_s = summary["host_s"]
    record = harness.record(timing, iterations * 512, impl=impl, algo="ppo", num_seeds=1)
    intervals = -(-iterations // per_interval)
    return {**record, "intervals": intervals, "host_ms": 1000 * host_s / intervals}


def command(iterations: int, per_interval: int) -> tuple:
    """(compile_s, run_s, eval returns) and host_s of `python algorithms/ppo.py` as a user types
    it, in a process of its own with the environment this one has (the JAX compilation cache
    on, as the command's default, in a scratch directory so that it compiles cold)."""
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch) / "r"
        flags = [
            "--total-timesteps",
            str(iterations * 512),
            "--eval-every",
            str(per_interval * 512),
        ]
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(Path(scratch) / "cache")}
        env.pop("JAX_ENABLE_COMPILATION_CACHE", None)  # the command's own default
        done = subprocess.run(
            [
                sys.executable,
                str(ROOT / "algorithms" / "ppo.py"),
                *flags,
                "--run-dir",
                str(run_dir),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode != 0:
            sys.exit(f"algorithms/ppo.py {' '.join(flags)} failed:\n{done.stderr[-3000:]}")
        summary = json.loads((run_dir / "summary.json").read_text())
    return (summary["compile_s"], summary["run_s"], summary["eval_return"]), summary["host_s"]


def table(iterations: int, results: dict[int, list[dict]]) -> str:
    lines = [
        f"PPO CartPole-v1, 1 seed, {iterations} iterations of 512 env steps; run time without "
        "compilation, median of the rounds; ratios within each round (median (per round)).",
        "",
        "| iterations per interval | intervals | pure s | command s | command / pure "
        "| runner s | runner / pure | runner without overlap / pure | overlap gain "
        "| host work per interval (ms) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for per_interval, rounds in results.items():
        typed = harness.ratios(rounds, "command", "pure", "run_s")
        runner = harness.ratios(rounds, "runner", "pure", "run_s")
        sequential = harness.ratios(rounds, "runner-sequential", "pure", "run_s")
        gain = harness.ratios(rounds, "runner-sequential", "runner", "run_s")
        lines.append(
            f"| {per_interval} | {rounds[0]['pure']['intervals']} "
            f"| {harness.median(rounds, 'pure', 'run_s'):.2f} "
            f"| {harness.median(rounds, 'command', 'run_s'):.2f} | {harness.ratio_cell(typed)} "
            f"| {harness.median(rounds, 'runner', 'run_s'):.2f} "
            f"| {harness.ratio_cell(runner)} | {harness.ratio_cell(sequential)} "
            f"| {harness.ratio_cell(gain)} | {harness.median(rounds, 'runner', 'host_ms'):.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument(
        "--cadences",
        type=int,
        nargs="+",
        default=CADENCES,
        help="iterations per interval, one table row each",
    )
    args = parser.parse_args()
    if args.worker:
        return harness.worker(measure, args.worker)
    results = {}
    for per_interval in args.cadences:
        per_interval = min(per_interval, args.iterations)

        def run(impl: str, per_interval: int = per_interval) -> dict:
            return harness.spawn(__file__, impl, args.iterations, per_interval)

        results[per_interval] = harness.rounds(
            args.repeats, IMPLS, run, lambda r: f"{r['run_s']:.2f} s", f"{per_interval}/int "
        )
    text = table(args.iterations, results) + f"\n\nMachine: {harness.machine()}.\n"
    harness.write(args.out / "runner_overhead.md", text)
    record = {"machine": harness.machine(), "iterations": args.iterations, "cadences": results}
    harness.write(args.out / "runner_overhead.json", json.dumps(record, indent=1))
    print(text)


if __name__ == "__main__":
    main()

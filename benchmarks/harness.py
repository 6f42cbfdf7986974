"""What the speed comparisons share: fresh worker processes taking turns, ratios, tables.

Every measurement is one fresh Python process (the persistent compilation cache off, so every
compile is cold) running one implementation once to completion: a comparison script spawns
itself, `python benchmarks/speed/speed_<name>.py --worker IMPL ARG...`, and reads the JSON line the
worker prints last (`spawn`, `worker`). The implementations take turns within a round
(`rounds`); ratios are taken within a round, against the implementation measured last in it
(the peer), and reported as their median with the per-round values beside it (`ratio_cell`).

Worker side: `timed_cli` times what `python algorithms/<algo>.py` runs (the host runner, seeds
sharded over the CPU devices, nothing written), `timed_jit` times `jax.jit(jax.vmap(train))`
of a pure `train(key)` on one device, and `record` turns either into a measurement.

Driver side: `head_to_head` runs the rounds of canter against a peer over seed counts,
`speed_table` and `report` write them as `<name>.md` and `<name>.json` (atomically), and
`machine()` names the machine a table was measured on. `bootstrap_ci` is the interval of
benchmarks/returns/returns.py.
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
RESULTS = ROOT / "benchmarks" / "results"
EVAL_EPISODES = 8  # canter's and the peer's final evaluation, in every head-to-head
FIELDS = ("compile_s", "run_s", "steps_per_s", "peak_rss_mb")


def machine() -> str:
    """The CPU (core count, jax, `on cpu`) or the accelerator a measurement ran on."""
    import jax

    device = jax.devices()[0]
    if device.platform != "cpu":
        return f"1 {device.device_kind} ({device.platform}), jax {jax.__version__}"
    return f"{os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), " + (
        f"jax {jax.__version__} on {device.platform}"
    )


def write(path: Path, text: bytes | str) -> None:
    """Every result file is written atomically: a reader sees the old table or the new one."""
    from canter.common.run.files import atomic_write

    atomic_write(path, text)


def parser(doc: str) -> argparse.ArgumentParser:
    """The flags every comparison has: `--repeats`, `--out`, and the hidden `--worker`."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3, help="rounds, implementations in turn")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the results go")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    return parser


# --- one measurement, in a fresh process


def spawn(script: str, impl: str, *args: object) -> dict:
    """`script --worker IMPL ARG...` in a fresh process; its measurement. `rejax` and
    `canter-1core` get JAX's default of one CPU device (canter's runner makes one per core,
    common/run/devices.py); `canter-1core` is also pinned to one core (in `worker`). Compiles
    are cold unless BENCH_COMPILE_CACHE names a directory: then the workers share JAX's
    persistent cache there, and a program's second compile is a cache hit (benchmarks/gpu/gpu.sh
    uses it to fit its time; run times are the same either way)."""
    command = [sys.executable, str(script), "--worker", impl, *map(str, args)]
    cache = os.environ.get("BENCH_COMPILE_CACHE")
    env = {**os.environ, "JAX_ENABLE_COMPILATION_CACHE": "true" if cache else "false"}
    if impl in ("rejax", "canter-1core"):
        env["JAX_NUM_CPU_DEVICES"] = "1"
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def worker(measure: Callable[..., dict], args: Sequence[str]) -> None:
    """The worker side of `spawn`: `measure(IMPL, ARG...)` (whole numbers as ints), printed as
    one JSON line."""
    if args[0] == "canter-1core":  # before JAX starts, so XLA sizes its threads for one core
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import jax

    cache = os.environ.get("BENCH_COMPILE_CACHE")
    jax.config.update("jax_enable_compilation_cache", bool(cache))
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    values = [int(a) if a.isdigit() else a for a in args]
    print(json.dumps(measure(*values)))


def timed_cli(config, make_train: Callable, algo: str, data_parallel: bool = False) -> tuple:
    """(compile_s, run_s, final eval returns) of what `python algorithms/<algo>.py` runs: the
    host runner, seeds sharded over the CPU devices (or, `data_parallel`, each seed's envs and
    minibatches over them), nothing written to disk."""
    from canter.algorithms import trainer

    summary = trainer.run(
        config, make_train, algo=algo, verbose=False, data_parallel=data_parallel
    ).summary
    return summary["compile_s"], summary["run_s"], summary["eval_return"]


def timed_jit(train: Callable, final_return: Callable, num_seeds: int) -> tuple:
    """(compile_s, run_s, final returns) of `jax.jit(jax.vmap(train))` over `num_seeds` keys."""
    import jax

    keys = jax.random.split(jax.random.key(0), num_seeds)
    tic = time.perf_counter()
    compiled = jax.jit(jax.vmap(train)).lower(keys).compile()
    compile_s = time.perf_counter() - tic
    tic = time.perf_counter()
    outputs = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - tic
    return compile_s, run_s, [float(r) for r in final_return(outputs)]


def canter_final_return(outputs):
    """The last evaluation of each seed, from canter's pure `train`'s (state, metrics)."""
    _, metrics = outputs
    return metrics["eval"]["episodic_return"][:, -1]  # (seeds,)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def record(timing: tuple, env_steps: int, **fields: object) -> dict:
    """A measurement: `fields` (impl, algo, num_seeds, num_envs, num_steps, iterations), the
    timing of `timed_cli` or `timed_jit`, env steps/s over all seeds, peak RSS."""
    compile_s, run_s, returns = timing
    return {
        **fields,
        "compile_s": compile_s,
        "run_s": run_s,
        "steps_per_s": env_steps / run_s,
        "peak_rss_mb": peak_rss_mb(),
        "final_returns": [float(r) for r in returns],
    }


def random_policy(env_name: str, num_envs: int, num_steps: int, iterations: int):
    """Random actions in a gymnax env, `num_envs` wide: the environment's own ceiling, as a
    `train(key)` and a final-return reader (NaN: there is no policy to evaluate)."""
    import gymnax
    import jax
    import jax.numpy as jnp

    env, params = gymnax.make(env_name)
    num_actions = int(env.action_space(params).n)

    def train(key):
        reset_keys = jax.random.split(key, num_envs)
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, params)

        def step(carry, key):
            state, total = carry
            action_key, step_key = jax.random.split(key)
            actions = jax.random.randint(action_key, (num_envs,), 0, num_actions)
            step_keys = jax.random.split(step_key, num_envs)
            obs, state, reward, *_ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                step_keys, state, actions, params
            )
            return (state, total + reward.sum()), None

        keys = jax.random.split(key, iterations * num_steps)
        (_, total), _ = jax.lax.scan(step, (state, jnp.float32(0)), keys)
        return total

    return train, lambda outputs: outputs * jnp.nan


# --- rounds, ratios, tables


def scan_rounds(init: Callable, run: Callable, steps: int, calls: int, repeats: int) -> dict:
    """Time a stepping loop: `init(key) -> state`, then `run(state, key) -> (state, ended)` (a
    jitted scan of `steps` env steps, summed over its batch) once to compile, then `repeats`
    rounds of `calls` calls carrying the state. Per round: env steps/s and episodes ended."""
    import jax

    state = jax.block_until_ready(init(jax.random.key(0)))
    tic = time.perf_counter()
    state, _ = jax.block_until_ready(run(state, jax.random.key(1)))  # compiles
    compile_s = time.perf_counter() - tic
    out = []
    for r in range(repeats):
        ended, tic = 0, time.perf_counter()
        for c in range(calls):
            state, n = run(state, jax.random.fold_in(jax.random.key(2 + r), c))
            ended += int(n)
        seconds = time.perf_counter() - tic
        out.append({"steps_per_s": calls * steps / seconds, "ended": ended, "steps": calls * steps})
    return {"compile_s": compile_s, "rounds": out}


def rounds(
    repeats: int, impls: Sequence[str], run: Callable[[str], dict], say: Callable, label: str = ""
) -> list[dict]:
    """`repeats` rounds, each running every impl once in turn (`run(impl)`); one progress line
    per round, `say(measurement)` for each impl."""
    out = []
    for repeat in range(repeats):
        out.append({impl: run(impl) for impl in impls})
        said = ", ".join(f"{impl} {say(r)}" for impl, r in out[-1].items())
        print(f"  {label}round {repeat}: {said}", flush=True)
    return out


def median(rounds: list[dict], impl: str, field: str) -> float:
    return statistics.median(r[impl][field] for r in rounds)


def ratios(rounds: list[dict], impl: str, peer: str, field: str) -> list[float]:
    """`impl`'s `field` over `peer`'s, within each round."""
    return [r[impl][field] / r[peer][field] for r in rounds]


def ratio_cell(values: list[float], digits: int = 2) -> str:
    """`median (per round)`: `1.28 (1.24, 1.40, 1.28)`."""
    per_round = ", ".join(f"{x:.{digits}f}" for x in values)
    return f"{statistics.median(values):.{digits}f} ({per_round})"


def mean(values: list[float]) -> float:
    """The mean of the finite values (NaN where there are none)."""
    finite = [v for v in values if v == v]
    return sum(finite) / len(finite) if finite else float("nan")


def bootstrap_ci(values, statistic: Callable, samples: int = 2000, level: float = 0.95):
    """Percentile bootstrap interval of `statistic` over seeds (fixed resampling seed)."""
    import numpy as np

    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(values), size=(samples, len(values)))
    stats = np.array([statistic(values[p]) for p in picks])
    low, high = np.percentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Welch's two-sample t-test of mean(a) - mean(b) (unequal variances): (t, two-sided p).
    NaN where either side has fewer than two values or both have no spread."""
    import numpy as np
    from scipy import stats

    if len(a) < 2 or len(b) < 2 or np.var(a) + np.var(b) == 0:
        return float("nan"), float("nan")
    result = stats.ttest_ind(a, b, equal_var=False)
    return float(result.statistic), float(result.pvalue)


def ceiling(
    out: Path, name: str, repeats: int, run: Callable[[str], dict], heads: tuple[str, str, str]
) -> tuple[list[dict], list[str]]:
    """`repeats` rounds of canter (`run("canter")`) against random actions in the same envs
    (`run("random")`), written as `<out>/<name>.json`; (the rounds, the table's lines: env
    steps/s with canter / random per round, compile time). `heads`: the two columns' names and
    the algorithm's short name."""
    pair = ("canter", "random")
    rows = rounds(repeats, pair, run, lambda r: f"{r['steps_per_s']:,.0f} steps/s")
    write(out / f"{name}.json", json.dumps({"machine": machine(), "rounds": rows}, indent=1))
    speed = ratio_cell(ratios(rows, "canter", "random", "steps_per_s"), digits=3)
    lines = [
        f"| measure | {heads[0]} | {heads[1]} | {heads[2]} / random: median (per round) |",
        "|---|---:|---:|---|",
    ]
    for field, label, fmt, ratio in (
        ("steps_per_s", "env steps/s", "{:,.0f}", speed),
        ("compile_s", "compile time (s)", "{:.2f}", ""),
    ):
        cells = [fmt.format(median(rows, impl, field)) for impl in pair]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    return rows, lines


# --- canter against rejax over seed counts


LABELS = {
    "canter": "canter (CLI runner)",
    "canter-pure": "canter (pure jit)",
    "canter-dp": "canter (CLI, --data-parallel)",
    "canter-1core": "canter (CLI, 1 device pinned to 1 core)",
    "rejax": "rejax",
}
SHORT = {
    "canter": "CLI",
    "canter-pure": "pure",
    "canter-dp": "data-parallel",
    "canter-1core": "1 core",
}


def impls(*canter: str, one_core: bool = False) -> tuple[str, ...]:
    """The implementations of a head-to-head, rejax last. `canter-1core` is the CLI on one
    device pinned to one core: half its run time is what a perfect split over two cores could
    reach, the bound of any data-parallel or multi-device speed-up on a 2-core machine."""
    return canter + (("canter-1core",) if one_core else ()) + ("rejax",)


def head_to_head(
    script: str, repeats: int, seed_counts: list[int], impls: Sequence[str], args: Sequence = ()
) -> dict:
    """Per seed count, rounds of `impls` (`script --worker IMPL SEEDS *args`, fresh processes in
    turn); medians, and per-round ratios against the last impl (rejax) in the same round."""
    out = {}
    for num_seeds in seed_counts:
        measured = rounds(
            repeats,
            impls,
            lambda impl, n=num_seeds: spawn(script, impl, n, *args),
            lambda r: f"{r['run_s']:.2f} s (compile {r['compile_s']:.2f})",
            f"seeds {num_seeds} ",
        )
        row = {"num_seeds": num_seeds, "rounds": measured}
        for field in FIELDS:
            row[field] = {impl: median(measured, impl, field) for impl in impls}
            row[f"{field}_ratios"] = {
                impl: ratios(measured, impl, impls[-1], field) for impl in impls[:-1]
            }
        row["final_return"] = {
            impl: mean([x for r in measured for x in r[impl]["final_returns"]]) for impl in impls
        }
        out[num_seeds] = row
    return out


def speed_table(rows: dict, impls: Sequence[str]) -> str:
    peer = impls[-1]
    ratio_heads = [f"{SHORT[i]} / {peer}" for i in impls[:-1]]
    ratio_heads[0] += ": median (per round)"
    lines = [
        f"| seeds | measure | {' | '.join(LABELS[i] for i in impls)} | {' | '.join(ratio_heads)} |",
        "|---:|---|" + "---:|" * len(impls) + "---|" * len(ratio_heads),
    ]
    for num_seeds, row in rows.items():
        for field, label, fmt in (
            ("run_s", "run time (s)", "{:.2f}"),
            ("compile_s", "compile time (s)", "{:.2f}"),
            ("steps_per_s", "env steps/s", "{:,.0f}"),
            ("peak_rss_mb", "peak RSS (MiB)", "{:,.0f}"),
        ):
            cells = " | ".join(fmt.format(row[field][impl]) for impl in impls)
            cells_ratio = " | ".join(ratio_cell(row[f"{field}_ratios"][i]) for i in impls[:-1])
            lines.append(f"| {num_seeds} | {label} | {cells} | {cells_ratio} |")
        returns = " | ".join(f"{row['final_return'][impl]:.1f}" for impl in impls)
        blanks = " |" * len(impls[:-1])
        lines.append(f"| {num_seeds} | final eval return (mean over runs) | {returns} |{blanks}")
    return "\n".join(lines)


def two_core_bound(row: dict) -> str:
    """The run time of a perfect split of the 1-core run over two cores, against rejax's."""
    per_round = [r["canter-1core"]["run_s"] / 2 / r["rejax"]["run_s"] for r in row["rounds"]]
    rounds = ", ".join(f"{x:.2f}" for x in per_round)
    return (
        f"- {row['num_seeds']} seed(s): a perfect split of the 1-core run over 2 cores would take "
        f"{statistics.median(per_round):.2f}x rejax's run time (per round: {rounds})."
    )


def report(out: Path, name: str, rows: dict, impls: Sequence[str]) -> None:
    """`<out>/<name>.md` (the table, the machine, the 2-core bound where `canter-1core` ran, the
    cost of 8 seeds against 1) and `<out>/<name>.json` (every round); both printed."""
    table = speed_table(rows, impls)
    summary = [f"Machine: {machine()}.", ""]
    if "canter-1core" in impls:
        summary += [two_core_bound(row) for row in rows.values()]
    if 1 in rows and 8 in rows:
        for impl in impls:
            cost = rows[8]["run_s"][impl] / rows[1]["run_s"][impl]
            summary.append(f"- {impl}: 8 vmapped seeds cost {cost:.2f}x one seed (run time).")
    write(out / f"{name}.json", json.dumps({"machine": machine(), "rows": rows}, indent=1))
    write(out / f"{name}.md", "\n".join([table, "", *summary]) + "\n")
    print(table, *summary, sep="\n")
    first = next(iter(rows.values()))
    for impl in impls[:-1]:
        print(
            f"seeds {first['num_seeds']}: {impl} / {impls[-1]}, median of per-round ratios: run "
            f"time {statistics.median(first['run_s_ratios'][impl]):.2f}, compile time "
            f"{statistics.median(first['compile_s_ratios'][impl]):.2f}"
        )

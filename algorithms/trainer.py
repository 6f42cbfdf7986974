"""The outer loop every canter algorithm shares: the pure `train(key)`, the host runner, the CLI.

An algorithm supplies `init(key) -> state`, `step(state) -> (state, metrics)` (one iteration:
collect and update) and `evaluate(state, key) -> metrics`; `Train` composes them. Nothing here
can change a learning curve for a fixed seed (ARCHITECTURE.md, "the numbers test").
"""

import dataclasses
import datetime
import inspect
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import jax
import jax.numpy as jnp
import numpy as np
import tyro
from jaxtyping import Array, Int, Key, PRNGKeyArray

from common.config import ConfigError
from common.logging import write_csv, write_json

Metrics = dict[str, Array]


@dataclasses.dataclass(frozen=True)
class Train:
    """A whole run as pure functions: `Train(...)(key) -> (state, metrics)` is jittable.

    The run is `num_intervals` evaluation intervals of `eval_every` iterations, each followed by
    one `evaluate`. When `eval_every` does not divide `num_iterations`, the surplus iterations
    of the last interval are skipped with `lax.cond`, so every interval is the same program.
    """

    init: Callable[[PRNGKeyArray], Any]
    step: Callable[[Any], tuple[Any, Metrics]]
    evaluate: Callable[[Any, PRNGKeyArray], Metrics]
    num_iterations: int
    eval_every: int
    env_steps_per_iteration: int

    @property
    def num_intervals(self) -> int:
        return math.ceil(self.num_iterations / self.eval_every)

    def start(self, key: PRNGKeyArray) -> tuple[Any, PRNGKeyArray]:
        """The initial state and the key every evaluation of this seed derives from."""
        init_key, eval_key = jax.random.split(key)
        return self.init(init_key), eval_key

    def interval(
        self, state: Any, eval_key: PRNGKeyArray, index: Int[Array, ""]
    ) -> tuple[Any, dict[str, Metrics]]:
        """`eval_every` iterations then one evaluation; train metrics are interval means."""
        ragged = self.num_iterations % self.eval_every != 0
        if ragged:  # structure of the metrics, for the branch that skips an iteration
            _, shapes = jax.eval_shape(self.step, state)
            nan_metrics = jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes)

        def iteration(state: Any, offset: Int[Array, ""]) -> tuple[Any, Metrics]:
            if not ragged:
                return self.step(state)
            live = index * self.eval_every + offset < self.num_iterations
            return jax.lax.cond(live, self.step, lambda s: (s, nan_metrics), state)

        state, metrics = jax.lax.scan(iteration, state, jnp.arange(self.eval_every))
        # NaN marks skipped iterations and returns before the first finished episode.
        train_metrics = {name: jnp.nanmean(value, axis=0) for name, value in metrics.items()}
        eval_metrics = self.evaluate(state, jax.random.fold_in(eval_key, index))
        return state, {"train": train_metrics, "eval": eval_metrics}

    def __call__(self, key: PRNGKeyArray) -> tuple[Any, dict[str, Metrics]]:
        state, eval_key = self.start(key)

        def one_interval(state: Any, index: Int[Array, ""]) -> tuple[Any, dict[str, Metrics]]:
            return self.interval(state, eval_key, index)

        return jax.lax.scan(one_interval, state, jnp.arange(self.num_intervals))

    def env_steps(self, interval: int) -> int:
        """Env steps of one seed after `interval` + 1 intervals."""
        iterations = min((interval + 1) * self.eval_every, self.num_iterations)
        return iterations * self.env_steps_per_iteration


def seed_keys(seed: int, num_seeds: int) -> Key[Array, " num_seeds"]:
    """Keys for seeds `seed ... seed + num_seeds - 1`: seed i of a vmapped run is `key(seed+i)`."""
    return jax.vmap(jax.random.key)(jnp.arange(seed, seed + num_seeds))


@dataclasses.dataclass
class RunResult:
    """What the host runner returns: final vmapped state, metrics per interval, the summary."""

    state: Any
    metrics: dict[str, dict[str, np.ndarray]]  # [num_seeds, num_intervals] per metric
    summary: dict[str, Any]
    run_dir: Path | None


def run(
    config: Any,
    make_train: Callable[[Any], Train],
    *,
    algo: str,
    run_dir: Path | None = None,
    verbose: bool = True,
) -> RunResult:
    """Host runner: compile one interval (vmapped over seeds), call it in a Python loop.

    Gives the same numbers as `jax.jit(jax.vmap(train))(keys)`; between intervals it prints
    progress and rewrites the per-seed metric files. `run_dir=None` writes nothing.
    """
    if config.num_seeds < 1:
        raise ConfigError(f"num_seeds must be positive, got {config.num_seeds}.")
    train = make_train(config)  # validates the config; raises ConfigError before compiling
    say = print if verbose else lambda *_, **__: None
    seeds = list(range(config.seed, config.seed + config.num_seeds))
    keys = seed_keys(config.seed, config.num_seeds)

    start = jax.jit(jax.vmap(train.start))
    interval = jax.jit(jax.vmap(train.interval, in_axes=(0, 0, None)), donate_argnums=0)
    tic = time.perf_counter()
    start_compiled = start.lower(keys).compile()
    state_shape, key_shape = jax.eval_shape(start, keys)
    index_shape = jax.ShapeDtypeStruct((), jnp.int32)
    interval_compiled = interval.lower(state_shape, key_shape, index_shape).compile()
    compile_s = time.perf_counter() - tic
    say(f"{algo} on {config.env}: {len(seeds)} seed(s), compiled in {compile_s:.1f} s")

    if run_dir is not None:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / "config.json", {"algo": algo, **dataclasses.asdict(config)})
    history: list[dict[str, dict[str, np.ndarray]]] = []
    tic = time.perf_counter()
    state, eval_keys = start_compiled(keys)
    for i in range(train.num_intervals):
        state, metrics = interval_compiled(state, eval_keys, jnp.int32(i))
        history.append(jax.device_get(metrics))
        elapsed = time.perf_counter() - tic
        steps = train.env_steps(i)
        train_ret = np.nanmean(history[-1]["train"]["episodic_return"])
        eval_ret = np.mean(history[-1]["eval"]["episodic_return"])
        say(
            f"[{i + 1:>3}/{train.num_intervals}] env steps {steps:>10,}  "
            f"SPS {steps * len(seeds) / elapsed:>10,.0f}  return {train_ret:8.2f}  "
            f"eval {eval_ret:8.2f}",
            flush=True,
        )
        if run_dir is not None:
            _write_metrics(run_dir, seeds, history, train)
    run_s = time.perf_counter() - tic

    stacked = {
        group: {name: np.stack([h[group][name] for h in history], axis=1) for name in metrics}
        for group, metrics in history[-1].items()
    }
    env_steps = train.env_steps(train.num_intervals - 1)
    final_return = stacked["train"]["episodic_return"][:, -1]
    eval_return = stacked["eval"]["episodic_return"][:, -1]
    summary = {
        "env": config.env,
        "algo": algo,
        "num_seeds": len(seeds),
        "seeds": seeds,
        "total_timesteps": config.total_timesteps,
        "env_steps": env_steps,
        "compile_s": compile_s,
        "run_s": run_s,
        "env_steps_per_s": env_steps * len(seeds) / run_s,
        "final_return": final_return.tolist(),
        "final_return_mean": float(np.nanmean(final_return)),
        "final_return_std": float(np.nanstd(final_return)),
        "eval_return": eval_return.tolist(),
        "eval_return_mean": float(np.mean(eval_return)),
        "eval_return_std": float(np.std(eval_return)),
    }
    say(
        f"done: return {summary['final_return_mean']:.2f} +- {summary['final_return_std']:.2f}"
        f"  eval {summary['eval_return_mean']:.2f} +- {summary['eval_return_std']:.2f}"
        f"  ({len(seeds)} seeds, {env_steps:,} env steps each)\n"
        f"      compile {compile_s:.1f} s  run {run_s:.1f} s  "
        f"{summary['env_steps_per_s']:,.0f} env steps/s (all seeds)"
    )
    if run_dir is not None:
        write_json(run_dir / "summary.json", summary)
        say(f"      wrote {run_dir}")
    return RunResult(state, stacked, summary, run_dir)


def _write_metrics(run_dir: Path, seeds: list[int], history: list, train: Train) -> None:
    """Rewrite `seed_<n>/metrics.csv` for every seed: one row per finished interval."""
    for s, seed in enumerate(seeds):
        rows = []
        for i, metrics in enumerate(history):
            row: dict[str, Any] = {"interval": i + 1, "env_steps": train.env_steps(i)}
            for group, values in metrics.items():
                row.update({f"{group}/{k}": float(v[s]) for k, v in values.items()})
            rows.append(row)
        write_csv(run_dir / f"seed_{seed}" / "metrics.csv", rows)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Where the host runner writes; none of it changes the numbers."""

    run_dir: Path | None = None
    """Run directory (default: runs/<env>__<algo>__<seed>__<timestamp>)."""


def cli(config_cls: type, make_train: Callable[[Any], Train]) -> RunResult:
    """Parse every Config field as a flag (tyro), run, and turn bad input into exit code 2."""
    algo = Path(inspect.getfile(make_train)).stem
    doc = sys.modules[make_train.__module__].__doc__

    def main(
        config: Annotated[config_cls, tyro.conf.OmitArgPrefixes],
        options: Annotated[RunOptions, tyro.conf.OmitArgPrefixes],
    ) -> tuple[Any, RunOptions]:
        return config, options

    config, options = tyro.cli(main, description=doc)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    default_dir = Path("runs") / f"{config.env}__{algo}__{config.seed}__{stamp}"
    try:
        return run(config, make_train, algo=algo, run_dir=options.run_dir or default_dir)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None

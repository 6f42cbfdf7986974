"""The outer loop every canter algorithm shares: the pure `train(key)`, the host runner, the CLI.

An algorithm supplies `init(key) -> state`, `step(state) -> (state, metrics)` (one iteration:
collect and update) and `evaluate(state, key) -> metrics`; `Train` composes them. Nothing here
can change a learning curve for a fixed seed (ARCHITECTURE.md, "the numbers test").
"""

import concurrent.futures
import dataclasses
import datetime
import inspect
import itertools
import json
import math
import os
import sys
import time
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import tyro
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Int, Key, PRNGKeyArray

from common import checkpoint
from common.config import ConfigError
from common.logging import MetricsLog, plot_learning_curves, write_json

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
    # Optional: greedy actions for a batch of observations, for rendering (evaluate.py --gif).
    act: Callable[[Any, Array], Array] | None = None

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


def float_fields(config_cls: type) -> list[str]:
    """The dynamic (traced, sweepable) fields of a Config: those annotated `float`."""
    hints = typing.get_type_hints(config_cls)
    return [f.name for f in dataclasses.fields(config_cls) if hints[f.name] is float]


def parse_sweep(specs: Sequence[str], config_cls: type) -> dict[str, list[float]]:
    """`["learning_rate=1e-4,3e-4", "ent_coef=0,0.01"]` -> {name: values}; only float fields."""
    dynamic = float_fields(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls)]
    sweep: dict[str, list[float]] = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        name = name.strip().replace("-", "_")
        if name not in names:
            raise ConfigError(
                f"--sweep {spec}: no field '{name}'. Sweepable: {', '.join(dynamic)}."
            )
        if name not in dynamic:
            raise ConfigError(
                f"--sweep {spec}: '{name}' is static (it fixes shapes or the program), so it "
                f"cannot share one compiled program; run it separately. Sweepable (float) "
                f"fields: {', '.join(dynamic)}."
            )
        if name in sweep:
            raise ConfigError(f"--sweep names '{name}' twice; give all its values at once.")
        try:
            sweep[name] = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            message = f"--sweep {spec}: values must be numbers, e.g. {name}=1e-4,3e-4."
            raise ConfigError(message) from None
        if not sweep[name]:
            raise ConfigError(f"--sweep {spec}: give at least one value, e.g. {name}=1e-4,3e-4.")
    return sweep


def sweep_points(config: Any, sweep: dict[str, list[float]]) -> list[dict[str, float]]:
    """The grid: one dict of swept values per point (a single empty point without a sweep)."""
    return [dict(zip(sweep, values, strict=True)) for values in itertools.product(*sweep.values())]


def make_batch(config: Any, sweep: dict[str, list[float]], multiple: int = 1) -> tuple:
    """Configs and keys along one batch axis: (sweep points x seeds), point-major.

    Every point sees the same seeds; float fields become `[padded]` arrays (traced leaves).
    The axis is padded, by repeating the last entry, to a multiple of `multiple` (the device
    count). Returns (configs, keys, batch size without padding, padded size).
    """
    point_configs = [
        dataclasses.replace(config, **values) for values in sweep_points(config, sweep)
    ]
    entries = [c for c in point_configs for _ in range(config.num_seeds)]
    batch = len(entries)
    padded = math.ceil(batch / multiple) * multiple
    entries += entries[-1:] * (padded - batch)
    configs = jax.tree.map(lambda *xs: np.asarray(xs, np.float32), *entries)
    keys = jnp.tile(seed_keys(config.seed, config.num_seeds), len(point_configs))
    keys = jnp.concatenate([keys, jnp.repeat(keys[-1:], padded - batch)])
    return configs, keys, batch, padded


@dataclasses.dataclass
class RunResult:
    """What the host runner returns: final state, metrics per interval, the summary.

    Metrics are `[num_seeds, num_intervals]` per name, or `[points, num_seeds, num_intervals]`
    with a sweep; `state` has the same leading axes.
    """

    state: Any
    metrics: dict[str, dict[str, np.ndarray]]
    summary: dict[str, Any]
    run_dir: Path | None


def run(
    config: Any,
    make_train: Callable[[Any], Train],
    *,
    algo: str,
    run_dir: Path | None = None,
    sweep: dict[str, list[float]] | None = None,
    resume: bool = False,
    checkpoint_every: int = 5,
    track: tuple[str, ...] = (),
    stop_after: int | None = None,
    verbose: bool = True,
) -> RunResult:
    """Host runner: compile one interval (vmapped over sweep points x seeds), loop over it.

    Gives the same numbers as `jax.jit(jax.vmap(train))(keys)`. The batch axis (points x seeds)
    is sharded over all devices, padded to a multiple of the device count. Between intervals,
    on the host: progress, metric files, trackers, and every `checkpoint_every` intervals (and
    at the end) an atomic checkpoint. `resume=True` continues from `run_dir`'s checkpoint.
    `run_dir=None` writes nothing. `stop_after=k` stops (checkpointed) after k intervals in
    this call, as a preempted job would; the summary then covers the intervals done so far.
    """
    sweep = sweep or {}
    if config.num_seeds < 1:
        raise ConfigError(f"num_seeds must be positive, got {config.num_seeds}.")
    if checkpoint_every < 0:
        raise ConfigError(
            f"checkpoint_every must be >= 0 (0: only at the end), got {checkpoint_every}."
        )
    points = sweep_points(config, sweep)
    point_configs = [dataclasses.replace(config, **values) for values in points]
    train = make_train(config)  # validates the config; raises ConfigError before compiling
    for point_config in point_configs[1:]:
        make_train(point_config)
    if resume and run_dir is None:
        raise ConfigError("resume needs the run directory to resume from.")
    if not resume and run_dir is not None and (run_dir / "config.json").exists():
        raise ConfigError(
            f"{run_dir} already holds a run; continue it with --resume {run_dir}, or choose "
            "another --run-dir (nothing there was changed)."
        )
    for tracker, module in (("tensorboard", "tensorboardX"), ("wandb", "wandb")):
        if tracker in track and not _importable(module):
            raise ConfigError(f"--track {tracker} needs {module}: pip install -e '.[log]'.")
    main_process = jax.process_index() == 0  # under multi-host, the one that writes and prints
    verbose = verbose and main_process
    say = print if verbose else lambda *_, **__: None
    seeds = list(range(config.seed, config.seed + config.num_seeds))
    num_points, num_seeds = len(points), len(seeds)
    devices = jax.devices()  # every process's, under jax.distributed (multi-host)
    if jax.process_count() == 1:  # no device only computes padding: one seed keeps every core
        devices = devices[: num_points * num_seeds]
    configs, keys, batch, padded = make_batch(config, sweep, len(devices))
    mesh = Mesh(np.array(devices), ("batch",))
    sharded = NamedSharding(mesh, PartitionSpec("batch"))
    replicated = NamedSharding(mesh, PartitionSpec())

    def start_one(cfg: Any, key_data: Array) -> tuple[Any, PRNGKeyArray]:
        return make_train(cfg).start(jax.random.wrap_key_data(key_data))

    def interval_one(cfg: Any, state: Any, key: PRNGKeyArray, index: Array) -> tuple:
        return make_train(cfg).interval(state, key, index)

    start = jax.jit(jax.vmap(start_one), in_shardings=sharded, out_shardings=sharded)
    interval = jax.jit(
        jax.vmap(interval_one, in_axes=(0, 0, 0, None)),
        in_shardings=(sharded, sharded, sharded, replicated),
        out_shardings=sharded,
        donate_argnums=1,
    )
    # Inputs are built identically on every process, then laid out over all devices.
    configs = _place(configs, sharded)
    keys = _place(jax.random.key_data(keys), sharded)
    tic = time.perf_counter()
    start_compiled = start.lower(configs, keys).compile()
    state_shape, key_shape = jax.eval_shape(start, configs, keys)
    index_shape = jax.ShapeDtypeStruct((), jnp.int32)
    interval_compiled = interval.lower(configs, state_shape, key_shape, index_shape).compile()
    compile_s = time.perf_counter() - tic
    grid = f", {num_points} sweep points" if sweep else ""
    where = f"{len(devices)} device(s)"
    say(
        f"{algo} on {config.env}: {num_seeds} seed(s){grid}, {where}, compiled in {compile_s:.1f} s"
    )

    labels = [
        (f"point_{p}/" if sweep else "") + f"seed_{seed}"
        for p in range(num_points)
        for seed in seeds
    ]
    saved_config = {"algo": algo, "sweep": sweep, **dataclasses.asdict(config)}
    expect = {"algo": algo, "config": saved_config, "devices_batch": padded}
    history: list[dict[str, dict[str, np.ndarray]]] = []
    state, eval_keys = start_compiled(configs, keys)
    first, earlier_run_s = 0, 0.0
    if resume:
        path = run_dir / "checkpoint.eqx"
        loaded, header = checkpoint.load(path, {"state": state_shape}, expect)
        state = _place(loaded["state"], sharded)
        first, earlier_run_s = header["interval"], header["run_s"]
        history = [jax.tree.map(np.asarray, h) for h in header["history"]]
        say(f"resumed from {path} after interval {first}/{train.num_intervals}")
    log = None
    if run_dir is not None and main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_json(run_dir / "config.json", saved_config)
        log = MetricsLog(run_dir, labels, track, saved_config)
        log.restore([[_row(train, i, h, b) for i, h in enumerate(history)] for b in range(batch)])

    bar = _progress(train.num_intervals, first, verbose)
    writer, pending = concurrent.futures.ThreadPoolExecutor(max_workers=1), None
    host_s, tic = 0.0, time.perf_counter()
    end = (
        train.num_intervals if stop_after is None else min(first + stop_after, train.num_intervals)
    )
    for i in range(first, end):
        state, metrics = interval_compiled(configs, state, eval_keys, jnp.int32(i))
        metrics = jax.tree.map(lambda x: x[:batch], _gather(metrics))
        history.append(metrics)
        host_tic = time.perf_counter()
        elapsed = host_tic - tic
        steps = train.env_steps(i)
        done_steps = (steps - (train.env_steps(first - 1) if first else 0)) * batch
        line = (
            f"env steps {steps:>10,}  SPS {done_steps / elapsed:>10,.0f}  "
            f"return {np.nanmean(metrics['train']['episodic_return']):8.2f}  "
            f"eval {np.mean(metrics['eval']['episodic_return']):8.2f}"
        )
        bar(i, line)
        checkpoint_now = i + 1 == end or (checkpoint_every and (i + 1) % checkpoint_every == 0)
        if run_dir is not None and checkpoint_now:
            full_state = _gather(state)  # a collective under multi-host: every process calls it
        if log is not None:
            log.log([_row(train, i, metrics, b) for b in range(batch)])
            if checkpoint_now:
                header = {
                    **expect,
                    "interval": i + 1,
                    "run_s": earlier_run_s + time.perf_counter() - tic,
                    "history": jax.tree.map(lambda x: x.tolist(), history),
                }
                # Serialising and fsyncing happen on a writer thread while training goes on;
                # one write at a time, in order, and the run waits for the last one.
                if pending is not None:
                    pending.result()
                snap = checkpoint.snapshot({"state": full_state})
                pending = writer.submit(checkpoint.save, run_dir / "checkpoint.eqx", snap, header)
        host_s += time.perf_counter() - host_tic
    if pending is not None:
        pending.result()
    writer.shutdown()
    run_s = earlier_run_s + time.perf_counter() - tic
    bar(None, "")

    def arrange(x: Any) -> Any:  # [batch, ...] -> [(points,) seeds, ...], padding dropped
        x = x[:batch]
        return x.reshape((num_points, num_seeds) + x.shape[1:]) if sweep else x

    stacked = {
        group: {name: arrange(np.stack([h[group][name] for h in history], 1)) for name in values}
        for group, values in history[-1].items()
    }
    state = jax.tree.map(arrange, _gather(state) if jax.process_count() > 1 else state)
    summary = _summary(config, algo, train, seeds, points, stacked, sweep, compile_s, run_s, host_s)
    _report(say, summary, sweep)
    if log is not None:
        log.close()
        write_json(run_dir / "summary.json", summary)
        _plot(run_dir, train, stacked, points, sweep, f"{algo} on {config.env}")
        say(f"      wrote {run_dir}")
    return RunResult(state, stacked, summary, run_dir)


def _place(tree: Any, sharding: NamedSharding) -> Any:
    """Host values, the same on every process, as global arrays laid out by `sharding`."""

    def place(x: Any) -> Array:
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.wrap_key_data(place(jax.random.key_data(x)))
        x = np.asarray(x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree.map(place, tree)


def _gather(tree: Any) -> Any:
    """The whole of `tree` as NumPy on this process, whichever process holds each shard (a
    collective under multi-host: every process must call it)."""
    is_key = jax.tree.map(lambda x: jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key), tree)
    data = jax.tree.map(lambda x, k: jax.random.key_data(x) if k else x, tree, is_key)
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        data = multihost_utils.process_allgather(data, tiled=True)
    data = jax.device_get(data)
    return jax.tree.map(lambda d, k: jax.random.wrap_key_data(d) if k else d, data, is_key)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _row(train: Train, i: int, metrics: dict, b: int) -> dict[str, Any]:
    """One CSV row: interval i of batch entry b."""
    row: dict[str, Any] = {"interval": i + 1, "env_steps": train.env_steps(i)}
    for group, values in metrics.items():
        row.update({f"{group}/{k}": float(v[b]) for k, v in values.items()})
    return row


def _progress(total: int, first: int, verbose: bool) -> Callable[[int | None, str], None]:
    """A tqdm bar on a terminal, one plain line per interval otherwise; `(None, _)` closes."""
    if not verbose:
        return lambda *_: None
    if sys.stdout.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, initial=first, unit="interval", dynamic_ncols=True)

        def update(i: int | None, line: str) -> None:
            if i is None:
                bar.close()
            else:
                bar.set_postfix_str(line.replace("  ", " "), refresh=False)
                bar.update(1)

        return update

    def plain(i: int | None, line: str) -> None:
        if i is not None:
            print(f"[{i + 1:>3}/{total}] {line}", flush=True)

    return plain


def _summary(config, algo, train, seeds, points, stacked, sweep, compile_s, run_s, host_s) -> dict:
    intervals = stacked["train"]["episodic_return"].shape[-1]  # fewer if stopped early
    env_steps = train.env_steps(intervals - 1)
    final = stacked["train"]["episodic_return"][..., -1]
    final_eval = stacked["eval"]["episodic_return"][..., -1]
    per_point = [
        {
            **values,
            "final_return_mean": float(np.nanmean(f)),
            "final_return_std": float(np.nanstd(f)),
            "eval_return_mean": float(np.mean(e)),
            "eval_return_std": float(np.std(e)),
        }
        for values, f, e in zip(
            points, final.reshape(len(points), -1), final_eval.reshape(len(points), -1), strict=True
        )
    ]
    return {
        "env": config.env,
        "algo": algo,
        "num_seeds": len(seeds),
        "seeds": seeds,
        "sweep": sweep,
        "total_timesteps": config.total_timesteps,
        "env_steps": env_steps,
        "intervals": intervals,
        "complete": intervals == train.num_intervals,
        "compile_s": compile_s,
        "run_s": run_s,
        "host_s": host_s,
        "env_steps_per_s": env_steps * len(seeds) * len(points) / run_s,
        "final_return": final.tolist(),
        "eval_return": final_eval.tolist(),
        **(per_point[0] if not sweep else {}),
        "points": per_point,
    }


def _report(say: Callable, summary: dict, sweep: dict) -> None:
    if sweep:
        names = list(sweep)
        say("point  " + "  ".join(f"{n:>14}" for n in names) + "          return            eval")
        for p, point in enumerate(summary["points"]):
            say(
                f"{p:>5}  "
                + "  ".join(f"{point[n]:>14.6g}" for n in names)
                + f"  {point['final_return_mean']:8.2f} +- {point['final_return_std']:6.2f}"
                + f"  {point['eval_return_mean']:8.2f} +- {point['eval_return_std']:6.2f}"
            )
    else:
        say(
            f"done: return {summary['final_return_mean']:.2f} +- {summary['final_return_std']:.2f}"
            f"  eval {summary['eval_return_mean']:.2f} +- {summary['eval_return_std']:.2f}"
            f"  ({summary['num_seeds']} seeds, {summary['env_steps']:,} env steps each)"
        )
    say(
        f"      compile {summary['compile_s']:.1f} s  run {summary['run_s']:.1f} s  "
        f"{summary['env_steps_per_s']:,.0f} env steps/s (all seeds)"
    )


def _plot(run_dir: Path, train: Train, stacked: dict, points: list, sweep: dict, title: str):
    steps = [train.env_steps(i) for i in range(stacked["train"]["episodic_return"].shape[-1])]
    train_ret, eval_ret = stacked["train"]["episodic_return"], stacked["eval"]["episodic_return"]
    if not sweep:
        curves = {"": {"train": train_ret, "eval": eval_ret}}
    else:
        curves = {
            ", ".join(f"{k}={v:g}" for k, v in values.items()): {"train": t, "eval": e}
            for values, t, e in zip(points, train_ret, eval_ret, strict=True)
        }
    plot_learning_curves(run_dir / "learning_curve.png", steps, curves, title)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How the host runner runs and what it writes; none of it changes the numbers."""

    run_dir: Path | None = None
    """Run directory (default: runs/<env>__<algo>__<seed>__<timestamp>)."""
    resume: Path | None = None
    """Continue the run in this directory from its last checkpoint (its config is the default)."""
    checkpoint_every: int = 5
    """Evaluation intervals between checkpoints (0: only at the end); always one at the end."""
    track: tuple[Literal["tensorboard", "wandb"], ...] = ()
    """Also log to TensorBoard and/or W&B (pip install -e '.[log]'; WANDB_MODE=offline works)."""
    sweep: Annotated[tuple[str, ...], tyro.conf.UseAppendAction] = ()
    """Grid over float fields in one program, e.g. --sweep learning_rate=1e-4,3e-4 (repeatable)."""
    compile_cache: bool = True
    """Reuse compiled programs across runs (JAX's persistent cache, ~/.cache/canter/jax or
    $JAX_COMPILATION_CACHE_DIR); --no-compile-cache compiles cold."""


def use_compile_cache(enabled: bool) -> Path | None:
    """Turn JAX's persistent compilation cache on (in the user's cache directory unless
    JAX_COMPILATION_CACHE_DIR names one) or off; returns the directory in use."""
    if not enabled:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    if not jax.config.jax_compilation_cache_dir:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        jax.config.update("jax_compilation_cache_dir", str(base / "canter" / "jax"))
    jax.config.update("jax_enable_compilation_cache", True)
    return Path(jax.config.jax_compilation_cache_dir)


def cli(
    config_cls: type,
    make_train: Callable[[Any], Train],
    presets: dict[str, dict[str, Any]] | None = None,
) -> RunResult:
    """Parse every Config field as a flag (tyro), run, and turn bad input into exit code 2.

    `presets` name sets of field values; `--preset NAME` makes one the defaults that the other
    flags then override (listed in --help).
    """
    algo = Path(inspect.getfile(make_train)).stem
    doc = sys.modules[make_train.__module__].__doc__
    presets = presets or {}
    if presets:
        listed = "\n".join(
            f"  --preset {name}: " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in p.items())
            for name, p in presets.items()
        )
        doc = f"{doc}\nPresets (the defaults they set; other flags override them):\n{listed}"
    try:
        sys.argv, preset = _take_preset(sys.argv, presets)
        default, saved_sweep = _resume_default(config_cls, algo, sys.argv[1:])
        if preset is not None:
            default = config_cls(**preset)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None

    def main(
        config: Annotated[config_cls, tyro.conf.OmitArgPrefixes] = default,
        options: Annotated[RunOptions, tyro.conf.OmitArgPrefixes] = RunOptions(),  # noqa: B008
    ) -> tuple[Any, RunOptions]:
        return config, options

    config, options = tyro.cli(main, description=doc)
    use_compile_cache(options.compile_cache)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    default_dir = Path("runs") / f"{config.env}__{algo}__{config.seed}__{stamp}"
    try:
        sweep = parse_sweep(options.sweep, config_cls) if options.sweep else saved_sweep
        return run(
            config,
            make_train,
            algo=algo,
            run_dir=options.resume or options.run_dir or default_dir,
            sweep=sweep,
            resume=options.resume is not None,
            checkpoint_every=options.checkpoint_every,
            track=options.track,
        )
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _take_preset(argv: list[str], presets: dict[str, dict]) -> tuple[list[str], dict | None]:
    """`argv` without `--preset NAME`, and that preset's values (None without one)."""
    if "--preset" not in argv:
        return argv, None
    at = argv.index("--preset")
    name = argv[at + 1] if at + 1 < len(argv) else ""
    if name not in presets:
        valid = ", ".join(presets) or "none (this algorithm has no presets)"
        raise ConfigError(f"--preset '{name}' is unknown. Presets: {valid}.")
    if "--resume" in argv:
        raise ConfigError("--preset and --resume do not mix: a resumed run keeps its config.")
    return argv[:at] + argv[at + 2 :], presets[name]


def _resume_default(config_cls: type, algo: str, argv: list[str]) -> tuple[Any, dict]:
    """With `--resume DIR` on the command line, the saved config (and sweep) become defaults."""
    if "--resume" not in argv or argv.index("--resume") + 1 >= len(argv):
        return config_cls(), {}
    run_dir = Path(argv[argv.index("--resume") + 1])
    path = run_dir / "config.json"
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ConfigError(f"Cannot resume {run_dir}: no readable config.json there.") from None
    if saved.pop("algo", None) != algo:
        raise ConfigError(f"Cannot resume {run_dir} with {algo}.py: it is not a {algo} run.")
    sweep = saved.pop("sweep", {})
    names = {f.name for f in dataclasses.fields(config_cls)}
    if set(saved) != names:
        raise ConfigError(
            f"Cannot resume {run_dir}: its config.json does not match {algo}'s Config."
        )
    return config_cls(**saved), sweep

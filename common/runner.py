"""The host runner: one compiled interval over the batch axis, called in a Python loop.

Gives the same numbers as `jax.jit(jax.vmap(train))(keys)`. The batch axis (sweep points x
seeds, common/batch.py) is sharded over the devices (common/devices.py). Between intervals, on
the host: progress, metric files, trackers, and checkpoints (common/checkpoint.py) in the run
directory (common/rundir.py). `resume=True` continues from the directory's last checkpoint,
with any device count: checkpoints hold the batch without its device padding.
"""

import dataclasses
import importlib.util
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from common import checkpoint, report
from common.batch import Batch, make_batch
from common.config import ConfigError
from common.devices import batch_shardings, gather, pad, place, use_cpu_cores
from common.logging import MetricsLog
from common.rundir import RunDir, config_record


@dataclasses.dataclass
class RunResult:
    """What the runner returns: final state, metrics per interval, the summary.

    Metrics are `[num_seeds, num_intervals]` per name, or `[points, num_seeds, num_intervals]`
    with a sweep; `state` has the same leading axes.
    """

    state: Any
    metrics: dict[str, dict[str, np.ndarray]]
    summary: dict[str, Any]
    run_dir: Path | None


@dataclasses.dataclass
class Programs:
    """The two compiled programs of a run (start, interval) and their inputs, on the devices."""

    start: Any
    interval: Any
    configs: Any
    keys: Any
    state_shape: Any
    sharded: Any
    padded: int
    compile_s: float


def compile_programs(make_train: Callable, batch: Batch) -> Programs:
    """Compile `start` and one `interval` of `make_train`, vmapped over the batch and sharded.

    Inside the trace `make_train` sees float fields as tracers; it builds nothing static there
    (environments come from make_env's cache, ranges were checked when the configs were made).
    """
    sharded, replicated, padded = batch_shardings(batch.size)
    configs, keys = (place(pad(x, padded), sharded) for x in batch.inputs())
    start_jit = jax.jit(jax.vmap(lambda c, k: make_train(c).start(k)), out_shardings=sharded)
    interval_jit = jax.jit(
        jax.vmap(lambda c, s, k, i: make_train(c).interval(s, k, i), in_axes=(0, 0, 0, None)),
        in_shardings=(sharded, sharded, sharded, replicated),
        out_shardings=sharded,
        donate_argnums=1,
    )
    tic = time.perf_counter()
    start = start_jit.lower(configs, keys).compile()
    state_shape, key_shape = jax.eval_shape(start_jit, configs, keys)
    index = jax.ShapeDtypeStruct((), jnp.int32)
    interval = interval_jit.lower(configs, state_shape, key_shape, index).compile()
    compile_s = time.perf_counter() - tic
    return Programs(start, interval, configs, keys, state_shape, sharded, padded, compile_s)


def run(
    config: Any,
    make_train: Callable[[Any], Any],
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
    """Train `config` over its seeds (and `sweep` grid) with checkpoints and logs in `run_dir`.

    `run_dir=None` writes nothing. A checkpoint is written every `checkpoint_every` intervals
    (0: only at the end) and at the end. `stop_after=k` stops (checkpointed) after k intervals
    in this call, as a preempted job would; the summary then covers the intervals done so far.
    """
    use_cpu_cores()
    batch = make_batch(config, sweep)  # every point's Config is built, so ranges are checked
    # Every point validates the rest (a swept float can be refused, e.g. sticky actions where
    # the env has none) and builds its env; nothing is compiled yet.
    train = [make_train(point) for point in batch.point_configs][0]
    out = _check_options(run_dir, resume, checkpoint_every, track)
    main = jax.process_index() == 0  # under multi-host, the one process that writes and prints
    say = print if verbose and main else None
    programs = compile_programs(make_train, batch)
    grid = f", {len(batch.points)} sweep points" if batch.sweep else ""
    where = f"{programs.sharded.mesh.size} device(s), compiled in {programs.compile_s:.1f} s"
    _say(say, f"{algo} on {config.env}: {len(batch.seeds)} seed(s){grid}, {where}")
    record = config_record(algo, config, batch.sweep)
    state, eval_keys = programs.start(programs.configs, programs.keys)
    first, earlier_s, history = 0, 0.0, []
    if resume:
        state, first, earlier_s, history = _resume(out, programs, batch, record)
        _say(say, f"resumed from {out.checkpoint} after interval {first}/{train.num_intervals}")
    log = _open_log(out if main else None, batch, train, track, record, history)
    bar, writer = report.progress(train.num_intervals, first, say), checkpoint.Writer()
    end = (
        train.num_intervals if stop_after is None else min(first + stop_after, train.num_intervals)
    )
    host_s, tic = 0.0, time.perf_counter()
    for i in range(first, end):
        state, metrics = programs.interval(programs.configs, state, eval_keys, jnp.int32(i))
        history.append(jax.tree.map(lambda x: x[: batch.size], gather(metrics)))
        host_tic = time.perf_counter()
        bar(i, _line(train, history[-1], i, first, batch.size, host_tic - tic))
        if log is not None:
            log.log([_row(train, i, history[-1], b) for b in range(batch.size)])
        if out is not None and (
            i + 1 == end or checkpoint_every and (i + 1) % checkpoint_every == 0
        ):
            entries = jax.tree.map(lambda x: x[: batch.size], gather(state))  # a collective
            header = {
                "algo": algo,
                "config": record,
                "batch": batch.size,
                "interval": i + 1,
                "run_s": earlier_s + host_tic - tic,
                "history": _to_lists(history),
            }
            if main:
                writer.submit(out.checkpoint, {"state": entries}, header)
        host_s += time.perf_counter() - host_tic
    writer.close()
    bar(None, "")
    timings = {
        "compile_s": programs.compile_s,
        "run_s": earlier_s + time.perf_counter() - tic,
        "host_s": host_s,
    }
    return _finish(algo, batch, train, state, history, timings, log, out, say)


def _open_log(
    out: RunDir | None, batch: Batch, train: Any, track: tuple, record: dict, history: list
) -> MetricsLog | None:
    """The metric sinks of a run that writes (config.json first), with the CSVs rewritten
    from a resumed checkpoint's history."""
    if out is None:
        return None
    out.write_config(record)
    log = MetricsLog(out, batch.labels, track, record)
    log.restore([[_row(train, i, h, b) for i, h in enumerate(history)] for b in range(batch.size)])
    return log


def _finish(
    algo: str,
    batch: Batch,
    train: Any,
    state: Any,
    history: list,
    timings: dict,
    log: MetricsLog | None,
    out: RunDir | None,
    say: Callable | None,
) -> RunResult:
    """Arrange the results by (sweep point,) seed; report them; write summary and curve."""
    metrics = {
        group: {
            name: batch.arrange(np.stack([h[group][name] for h in history], 1)) for name in names
        }
        for group, names in history[-1].items()
    }
    state = jax.tree.map(batch.arrange, gather(state) if jax.process_count() > 1 else state)
    steps = [train.env_steps(i) for i in range(len(history))]
    complete = len(history) == train.num_intervals
    summary = report.summarize(
        algo=algo, batch=batch, metrics=metrics, env_steps=steps[-1], complete=complete, **timings
    )
    if say is not None:
        report.report(say, summary)
    if log is not None:
        log.close()
        out.write_summary(summary)
        title = f"{algo} on {batch.config.env}"
        report.plot_learning_curves(out.curve, batch, steps, metrics, title)
        _say(say, f"      wrote {out.path}")
    return RunResult(state, metrics, summary, out.path if out else None)


def _to_lists(tree: Any) -> Any:
    return jax.tree.map(lambda x: x.tolist(), tree)


def _say(say: Callable | None, line: str) -> None:
    if say is not None:
        say(line)


def _check_options(
    run_dir: Path | None, resume: bool, checkpoint_every: int, track: tuple[str, ...]
) -> RunDir | None:
    """The run directory to use, after refusing option combinations that cannot work."""
    if checkpoint_every < 0:
        raise ConfigError(
            f"checkpoint_every must be >= 0 (0: only at the end), got {checkpoint_every}."
        )
    for tracker, module in (("tensorboard", "tensorboardX"), ("wandb", "wandb")):
        if tracker in track and importlib.util.find_spec(module) is None:
            raise ConfigError(f"--track {tracker} needs {module}: pip install -e '.[log]'.")
    if run_dir is None:
        if resume:
            raise ConfigError("resume needs the run directory to resume from.")
        return None
    out = RunDir(run_dir)
    if not resume and out.holds_run():
        raise ConfigError(
            f"{run_dir} already holds a run; continue it with --resume {run_dir}, or choose "
            "another --run-dir (nothing there was changed)."
        )
    return out


def _resume(out: RunDir, programs: Programs, batch: Batch, record: dict) -> tuple:
    """(state, intervals done, run seconds so far, metric history) from `out`'s checkpoint,
    padded and placed for this run's devices, whatever device count wrote it."""
    like = jax.eval_shape(
        lambda s: jax.tree.map(lambda x: x[: batch.size], s), programs.state_shape
    )
    expect = {"algo": record["algo"], "config": record}
    loaded, header = checkpoint.load(out.checkpoint, {"state": like}, expect)
    state = place(pad(loaded["state"], programs.padded), programs.sharded)
    history = [jax.tree.map(np.asarray, h) for h in header["history"]]
    return state, header["interval"], header["run_s"], history


def _line(train: Any, metrics: dict, i: int, first: int, size: int, elapsed: float) -> str:
    """The progress line after interval i: env steps, speed, training and eval return."""
    steps = train.env_steps(i)
    done_steps = (steps - (train.env_steps(first - 1) if first else 0)) * size
    return (
        f"env steps {steps:>10,}  SPS {done_steps / elapsed:>10,.0f}  "
        f"return {np.nanmean(metrics['train']['episodic_return']):8.2f}  "
        f"eval {np.mean(metrics['eval']['episodic_return']):8.2f}"
    )


def _row(train: Any, i: int, metrics: dict, b: int) -> dict[str, Any]:
    """One CSV row: interval i of batch entry b."""
    row: dict[str, Any] = {"interval": i + 1, "env_steps": train.env_steps(i)}
    for group, values in metrics.items():
        row.update({f"{group}/{k}": float(v[b]) for k, v in values.items()})
    return row

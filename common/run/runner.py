"""The host runner: one compiled interval over the batch axis, called in a Python loop.

Gives the same numbers as `jax.jit(jax.vmap(train))(keys)`; the programs it calls (compiled in
common/run/programs.py) shard the batch axis (sweep points x seeds, common/run/batch.py) over the
devices (common/run/devices.py). Between intervals, on the host: progress, metric files, trackers,
and checkpoints (common/run/checkpoint.py) in the run directory (common/run/rundir.py).
`resume=True` continues from the directory's last checkpoint, with any device count:
checkpoints hold the batch without its device padding.
"""

import dataclasses
import importlib.util
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs import is_host_env
from canter.common.run import checkpoint, health, heartbeat, memory, report
from canter.common.run.batch import Batch, make_batch
from canter.common.run.cadence import Checkpoints, Pace
from canter.common.run.devices import (
    gather,
    pad,
    place,
    use_cpu_cores,
    wait_for_processes,
)
from canter.common.run.interrupts import Pending, Preemption
from canter.common.run.logging import MetricsLog
from canter.common.run.programs import Programs, compile_claimed
from canter.common.run.resume import check_resume, done_iterations, resumed_train
from canter.common.run.rundir import RunDir, algorithm_source, config_record


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


@dataclasses.dataclass(frozen=True)
class Interval:
    """What a callback sees after each interval, on the host.

    `metrics` are `{"train": {name: values}, "eval": {...}}`, values `[num_seeds]` (or
    `[points, num_seeds]` with a sweep) for this interval; `diverged` labels the entries whose
    state went non-finite so far. `state()` gathers the batch's state to the host on demand
    (under multi-host a collective: every process calls it, or none).
    """

    index: int
    num_intervals: int
    env_steps: int
    metrics: dict[str, dict[str, np.ndarray]]
    diverged: list[str]
    gather_state: Callable[[], Any]

    def state(self) -> Any:
        return self.gather_state()


Callback = Callable[[Interval], bool | None]


def run(
    config: Any,
    make_train: Callable[[Any], Any],
    *,
    algo: str,
    run_dir: Path | None = None,
    sweep: dict[str, list[float]] | None = None,
    resume: bool = False,
    checkpoint_every: int = 0,
    checkpoint_minutes: float = 1.0,
    track: tuple[str, ...] = (),
    stop_after: int | None = None,
    stop_on_divergence: bool = False,
    callbacks: tuple[Callback, ...] | list[Callback] = (),
    data_parallel: bool = False,
    verbose: bool = True,
    overlap: bool = True,
    extend: bool = False,
) -> RunResult:
    """Train `config` over its seeds (and `sweep` grid) with checkpoints and logs in `run_dir`.

    `run_dir=None` writes nothing. A checkpoint is written once `checkpoint_minutes` of run
    time have passed since the last (0: not by time), every `checkpoint_every` intervals (0:
    not by count), at the end and whenever the run stops (common/run/cadence.py). It stops
    early, checkpointed, after `stop_after` intervals in this call (as a preempted job would),
    on SIGTERM or SIGINT (common/run/interrupts.py), when a callback returns True, and with
    `stop_on_divergence` when a seed diverges (common/run/health.py); `summary["stopped"]`
    says why, and the summary covers the intervals done. Each callback is called after every
    interval with an `Interval`. `data_parallel` splits each seed's envs and minibatches over
    the devices when there are fewer seeds (x sweep points) than devices; the numbers stay those
    of one device. `overlap` computes each interval while the host handles the previous one
    (off: one after the other, as multi-host always runs); the numbers are the same.
    `extend` lets a resumed run continue to a larger budget whatever its schedules
    (common/run/resume.py); config.json's `extended` records each change of budget.
    """
    batch, train, host, _ = _checked(config, make_train, sweep, data_parallel)
    out = _check_options(run_dir, resume, (checkpoint_every, checkpoint_minutes), track, stop_after)
    try:
        wait_for_processes("checked")  # every process saw the directory before process 0 claims it
        main = jax.process_index() == 0  # under multi-host, the one process that writes and prints
        say = print if verbose and main else None
        record = config_record(algo, config, batch.sweep)
        saved, skip = _prepare_dir(out, resume, main, say, record, make_train, batch, extend)
        claim = out if out is not None and main and not resume else None
        written = {**record, "source": algorithm_source(make_train)}
        compiled = resumed_train(make_train, skip)
        with heartbeat.compiling(say):  # a line while a long compile goes on
            programs = compile_claimed(claim, written, compiled, batch, data_parallel, host)
        wait_for_processes("compiled")  # every process compiled before the first collective
        where = f"{programs.layout}, compiled in {programs.compile_s:.1f} s"
        _say(say, f"{_what(algo, config, batch)}, {where}")
        _say(say, _evaluations_line(config, train))
        state, eval_keys = programs.start(programs.configs, programs.keys)
        loop = _Loop(algo, batch, train, out, main, say, record, programs.compile_s)
        first = 0
        if resume:
            state, first = loop.resume(out, programs, saved, skip, host)
        loop.open(track, algorithm_source(make_train))
        total = train.num_intervals
        end = total if stop_after is None else min(first + stop_after, total)
        # Under multi-host the intervals run one after the other (collectives keep one order on
        # every process); with host simulators, a discarded interval would step them past the
        # checkpoint, so a run that may stop early (callbacks, a divergence stop) does too.
        stops_early = bool(callbacks) or stop_on_divergence
        overlap = overlap and jax.process_count() == 1 and not (host and stops_early)
        checks = (callbacks, stop_on_divergence, Checkpoints(checkpoint_every, checkpoint_minutes))
        try:
            state, stopped = _intervals(
                loop, programs, state, eval_keys, first, end, checks, overlap
            )
        finally:
            # The last checkpoint is on disk before the run returns, or raises (a callback's error
            # leaves the checkpoints written so far whole); under multi-host the others wait for it
            # at the collective in `finish`, which process 0 reaches after this.
            loop.writer.close()
        return loop.finish(state, stopped)
    finally:
        if out is not None:
            out.unlock()  # the run directory's lock, held since its claim or resume


def _prepare_dir(
    out: RunDir | None,
    resume: bool,
    main: bool,
    say: Callable | None,
    record: dict,
    make_train: Callable,
    batch: Batch,
    extend: bool,
) -> tuple[dict | None, int]:
    """Before compiling: (the saved record, the iterations of a cut interval to skip) of a
    resumed run, its directory locked (two processes never run one directory) and its
    checkpoint checked against `record` (common/run/resume.py); (None, 0) for a new run, which
    is told when it replaces one that ended before its first checkpoint."""
    if not resume:
        if out is not None and main and out.abandoned():
            _say(
                say, f"{out.path}: its earlier run ended before its first checkpoint; replacing it"
            )
        return None, 0
    if main and out is not None:
        out.lock()
    done, saved = check_resume(out, record, make_train, batch, extend)
    return saved, done_iterations(make_train, batch.config, saved, done)


def check(
    config: Any,
    make_train: Callable[[Any], Any],
    *,
    algo: str,
    sweep: dict[str, list[float]] | None = None,
    data_parallel: bool = False,
) -> str:
    """`run`'s checks of the config before anything compiles, alone (the CLI's --dry-run):
    every sweep point's Config and `make_train` (ranges, sizes, the env built) and what the
    env's stepping refuses; not the run directory's or a resume's. Raises ConfigError as `run`
    would; returns what `run` would train, and the memory it would need."""
    batch, train, _, need = _checked(config, make_train, sweep, data_parallel)
    return f"{_what(algo, config, batch)}\n{_evaluations_line(config, train)}\n{need}"


def _checked(config: Any, make_train: Callable, sweep: dict | None, data_parallel: bool) -> tuple:
    """(the batch, the first point's Train, whether the env steps on the host, the memory the
    run needs in words), checked."""
    use_cpu_cores()
    batch = make_batch(config, sweep)  # every point's Config is built, so ranges are checked
    _check_mjx_on_cpu(config, batch)  # before Playground builds its model (about 20 s)
    # Every point validates the rest (a swept float can be refused, e.g. sticky actions where
    # the env has none) and builds its env; nothing is compiled yet.
    train = [make_train(point) for point in batch.point_configs][0]
    need = memory.check(train, batch, make_train)  # one seed's interval traced: run/memory.py
    return batch, train, _check_host(train, data_parallel), need


# The most MJX envs one program steps on a CPU: above it jaxlib 0.10.2's batched Cholesky can
# deadlock XLA's thread pool (docs/environments.md, "On a CPU, keep an MJX task's batch...").
MJX_CPU_ENVS = 1024


def _check_mjx_on_cpu(config: Any, batch: Batch) -> None:
    """Refuse a Playground (MJX) program wider than `MJX_CPU_ENVS` envs on a CPU: such a run
    (`ppo_continuous.py --preset CheetahRun`, 2,048 envs: a GPU's preset) can hang."""
    import jaxlib
    from canter.common.envs.registry import PLAYGROUND_PREFIX

    release = tuple(int(x) for x in re.findall(r"\d+", jaxlib.__version__)[:3])
    fixed = release >= (0, 11, 2)  # jax 0.11.2 builds the deadlocking path out
    if not config.env.startswith(PLAYGROUND_PREFIX) or jax.default_backend() != "cpu" or fixed:
        return
    widest = max(config.num_envs, config.num_eval_envs)  # evaluation steps its envs at once
    envs = widest * batch.size  # the whole program: every CPU device shares XLA's threads
    if envs > MJX_CPU_ENVS:
        most = MJX_CPU_ENVS // batch.size
        fewer = f"--num-envs and --num-eval-envs {most} or fewer" if most else "fewer seeds"
        raise ConfigError(
            f"{config.env} with {envs:,} envs in one program (num_envs {config.num_envs} or "
            f"num_eval_envs {config.num_eval_envs}, x {batch.size} seeds and sweep points) on a "
            f"CPU: MJX above {MJX_CPU_ENVS:,} can hang with jaxlib {jaxlib.__version__} "
            f"(docs/environments.md); this is a GPU's size. On a CPU use {fewer}, and a "
            "--total-timesteps a CPU trains in (benchmarks/returns/cpu_physics.sh has the CPU "
            "rows' settings)."
        )


def _what(algo: str, config: Any, batch: Batch) -> str:
    grid = f", {len(batch.points)} sweep points" if batch.sweep else ""
    seeds = f"{len(batch.seeds)} seed" + ("s" if len(batch.seeds) != 1 else "")
    return f"{algo} on {config.env}: {seeds}{grid}"


def _intervals(
    loop: "_Loop",
    programs: Programs,
    state: Any,
    eval_keys: Any,
    first: int,
    end: int,
    checks: tuple,
    overlap: bool,
) -> tuple[Any, str | None]:
    """Intervals `first` to `end` - 1 with their host work: (the state of the last interval
    handled, why the run stopped or None).

    Each call computes a chunk of intervals (`Pace`): one when the host may act after every
    interval (callbacks, a divergence stop, multi-host), else as many as fill about
    `Pace.target_s` and reach no further than the next checkpoint due by count. With
    `overlap`, the next chunk computes while this chunk's host work (metrics, progress, checks,
    logs, callbacks, checkpoint) runs. It takes (donates) the state, so a state the host work may
    still need (a checkpoint due, callbacks, a divergence stop) is copied first. A stop decided
    after interval i saves i and discards the chunk in flight, computed but never written; a
    signal instead lets the chunk in flight finish and saves it.
    """
    callbacks, stop_on_divergence, checkpoints = checks
    saving = loop.out is not None
    each = bool(callbacks) or stop_on_divergence or jax.process_count() > 1
    pace = Pace(programs.chunk if not each else 1, checkpoints.every if saving else 0)

    def start(state: Any, i: int) -> tuple[int, int, Pending]:
        """(first interval, count, the call computing them off the main thread, so that
        signals are seen meanwhile)."""
        count = pace.count(i, end)
        args = (programs.configs, state, eval_keys, jnp.int32(i), jnp.int32(count))
        return i, count, Pending(programs.intervals, *args)

    kept, stopped, pending = state, None, None
    notice = "stopping after the interval in flight is saved; a second signal stops at once"
    with Preemption(notice) as preemption:
        try:
            pending = start(state, first) if first < end else None
            while pending is not None:
                i, count, computing = pending
                state, metrics, ok = computing.result(tick=loop.heartbeat)
                pace.took(computing.seconds, count)
                done = i + count  # intervals done after this chunk
                due = saving and checkpoints.due(done)
                kept, pending = state, None
                if overlap and done < end and not preemption.signal:
                    if due or callbacks or stop_on_divergence:
                        kept = jax.block_until_ready(jax.tree.map(lambda x: x.copy(), state))
                    pending = start(state, done)
                these = gather((metrics, ok))  # a collective under multi-host
                these = jax.tree.map(lambda x, n=count: x[: loop.batch.size, :n], these)
                loop.after(i, first, kept, *these)
                stopped = _stop_reason(preemption, callbacks, stop_on_divergence, loop, done - 1)
                if stopped and stopped == preemption.signal and pending is not None:
                    continue  # the chunk in flight finishes, then is saved
                if saving and (stopped or done == end or due):
                    loop.save(done - 1, kept)
                    checkpoints.saved()
                if stopped:
                    break
                if pending is None and done < end:
                    pending = start(state, done)
        finally:
            if pending is not None:  # discarded (a stop, an error above): never written
                pending[2].wait()
    return kept, stopped


@dataclasses.dataclass
class _Loop:
    """What the interval loop keeps on the host: the metric history, divergence, the log and
    the checkpoint writer, and the timings (host work between intervals apart)."""

    algo: str
    batch: Batch
    train: Any
    out: RunDir | None  # None: the run writes nothing
    main: bool  # the process that writes and prints (the only one unless multi-host)
    say: Callable | None
    record: dict
    compile_s: float
    history: list = dataclasses.field(default_factory=list)
    diverged: health.Divergence = None  # type: ignore[assignment]
    earlier_s: float = 0.0
    host_s: float = 0.0
    log: MetricsLog | None = None
    writer: Any = dataclasses.field(default_factory=checkpoint.Writer)
    extended: list = dataclasses.field(default_factory=list)  # changes of budget, in order
    bar: Callable = lambda i, line: None  # noqa: E731
    heartbeat: Callable[[], None] = lambda: None  # noqa: E731
    gather_state: Callable[[], Any] = lambda: None  # noqa: E731
    tic: float = 0.0

    def __post_init__(self) -> None:
        self.diverged = health.Divergence.none(self.batch)
        self.writes = self.out if self.main else None

    def resume(self, out: RunDir, programs: Programs, saved: dict, skip: int, host: bool) -> tuple:
        """The checkpoint's state and intervals done; a larger budget is recorded, and a cut
        last interval (`skip` iterations trained) is re-entered, its row kept in the record."""
        state, first, self.earlier_s, self.history, self.diverged.first, self.extended = _resume(
            out, programs, self.batch, saved
        )
        was, now = saved["total_timesteps"], self.record["total_timesteps"]
        if now != was:
            entry = {"from_total_timesteps": was, "to_total_timesteps": now, "at_interval": first}
            if skip:
                first -= 1
                entry["cut_interval"] = _to_lists(self.history.pop())
            self.extended = [*self.extended, entry]
        _say(self.say, _resumed_line(out, first, self.train.num_intervals, skip))
        if host:
            restart = "the episodes in flight restart (their last step reads as truncated)"
            _say(
                self.say, f"host simulators cannot be saved: {restart}, seeded from the checkpoint"
            )
        return state, first

    def open(self, track: tuple, source: dict[str, Any]) -> None:
        """config.json (with the file, and module, `make_train` comes from, so evaluate.py
        finds a fork's code wherever it lives), the logs, the progress bar."""
        first = len(self.history)
        if self.writes is not None:
            extended = {"extended": self.extended} if self.extended else {}
            self.writes.write_config({**self.record, "source": source, **extended})
        self.log = _open_log(self.writes, self.batch, self.train, track, self.record, self.history)
        self.bar = report.progress(self.train.num_intervals, first, self.say)
        self.tic = time.perf_counter()
        size, pulse = self.batch.size, self.bar.pulse  # a line while a long interval computes
        self.heartbeat = heartbeat.Heartbeat(self.train, size, first, pulse, tic=self.tic)

    def after(self, i: int, first: int, state: Any, metrics: Any, ok: Any) -> None:
        """Host work after intervals i, i + 1, ... (metrics and divergence flags on the host,
        `[batch, intervals]` without the batch's padding): history, progress, divergence, logs.
        """
        batch, train = self.batch, self.train
        host_tic = time.perf_counter()
        rows = []
        for j in range(ok.shape[1]):
            self.history.append(jax.tree.map(lambda x, j=j: x[:, j], metrics))
            elapsed = time.perf_counter() - self.tic
            self.bar(i + j, _line(train, self.history[-1], i + j, first, batch.size, elapsed))
            for b in self.diverged.update(i + j + 1, ok[:, j]):
                at = f"at interval {i + j + 1} ({train.env_steps(i + j):,} env steps)"
                why = "a NaN or inf in its state or metrics; the other seeds go on"
                _say(self.say, f"diverged: {self.diverged.describe(b)} {at}: {why}")
            rows.append([_row(train, i + j, self.history[-1], b) for b in range(batch.size)])
        statistic = _mean(self.history[-1]["train"]["episodic_return"]).strip()
        self.heartbeat.done(len(self.history), host_tic, statistic)
        if self.log is not None:
            self.log.log(rows)
        self.gather_state = lambda: jax.tree.map(batch.arrange, gather(state))
        self.host_s += time.perf_counter() - host_tic

    def save(self, i: int, state: Any) -> None:
        """Checkpoint after interval i (written on a background thread)."""
        entries = jax.tree.map(lambda x: x[: self.batch.size], gather(state))  # a collective
        if self.writes is None:
            return
        header = {
            "algo": self.algo,
            "config": self.record,
            "batch": self.batch.size,
            "interval": i + 1,
            "run_s": self.earlier_s + time.perf_counter() - self.tic,
            "history": _to_lists(self.history),
            "diverged": self.diverged.first,
            "extended": self.extended,
        }
        self.writer.submit(self.writes.checkpoint, {"state": entries}, header)

    def finish(self, state: Any, stopped: str | None) -> RunResult:
        self.bar(None, "")
        if stopped is None and len(self.history) < self.train.num_intervals:
            stopped = "stop_after"
        if stopped:
            total = self.train.num_intervals
            _say(self.say, _stopped_line(stopped, len(self.history), total, self.out))
        timings = {
            "compile_s": self.compile_s,
            "run_s": self.earlier_s + time.perf_counter() - self.tic,
            "host_s": self.host_s,
        }
        return _finish(self, state, timings, stopped)


def _stop_reason(
    preemption: Preemption, callbacks: Any, stop_on_divergence: bool, loop: _Loop, i: int
) -> str | None:
    """Why the run stops after interval i, or None: a signal, a divergence, a callback."""
    if preemption.signal:
        return preemption.signal
    diverged = loop.diverged.first
    if stop_on_divergence and any(at is not None for at in diverged):
        return "divergence"
    if not callbacks:
        return None
    batch, train = loop.batch, loop.train
    arranged = jax.tree.map(batch.arrange, loop.history[-1])
    labels = [batch.labels[b] for b, at in enumerate(diverged) if at is not None]
    event = Interval(
        i, train.num_intervals, train.env_steps(i), arranged, labels, loop.gather_state
    )
    asked = [getattr(hook, "__name__", type(hook).__name__) for hook in callbacks if hook(event)]
    return f"callback {asked[0]}" if asked else None


def _evaluations_line(config: Any, train: Any) -> str:
    """How many evaluations the run makes and how often, in env steps per seed."""
    total = train.num_iterations * train.env_steps_per_iteration
    count = f"{train.num_intervals} evaluation" + ("s" if train.num_intervals != 1 else "")
    line = f"{count}, every {train.eval_every:,} env steps of {total:,}"
    asked, per = config.eval_every, train.env_steps_per_iteration
    if asked >= total and train.num_intervals == 1:
        line += f" (eval_every {asked:,} covers the run: one evaluation, at its end)"
    elif train.eval_every != asked:
        line += f" (eval_every {asked:,} in whole iterations of {per:,})"
    return line


def _stopped_line(stopped: str, done: int, total: int, out: RunDir | None) -> str:
    """What to tell the user when a run stops before its last interval."""
    saved = f"checkpoint {out.checkpoint}" if out is not None else "nothing saved (no run dir)"
    line = f"stopped ({stopped}) after interval {done}/{total}: {saved}"
    if out is None or done == total:
        return line
    script = sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else None
    again = f"python {script} --resume {out.path}" if script else "run(..., resume=True)"
    return f"{line}; continue with: {again}"


def _open_log(
    out: RunDir | None, batch: Batch, train: Any, track: tuple, record: dict, history: list
) -> MetricsLog | None:
    """The metric sinks of a run that writes, with the CSVs rewritten from a resumed
    checkpoint's history."""
    if out is None:
        return None
    log = MetricsLog(out, batch.labels, track, record)
    log.restore([[_row(train, i, h, b) for i, h in enumerate(history)] for b in range(batch.size)])
    return log


def _finish(loop: _Loop, state: Any, timings: dict, stopped: str | None) -> RunResult:
    """Arrange the results by (sweep point,) seed; report them; write summary and curve."""
    batch, train, history, say = loop.batch, loop.train, loop.history, loop.say
    metrics = {
        group: {
            name: batch.arrange(np.stack([h[group][name] for h in history], 1)) for name in names
        }
        for group, names in history[-1].items()
    }
    state = jax.tree.map(batch.arrange, gather(state) if jax.process_count() > 1 else state)
    steps = [train.env_steps(i) for i in range(len(history))]
    summary = report.summarize(
        algo=loop.algo,
        batch=batch,
        metrics=metrics,
        env_steps=steps[-1],
        complete=len(history) == train.num_intervals,
        stopped=stopped,
        diverged=loop.diverged.records(train.env_steps),
        **timings,
    )
    if say is not None:
        report.report(say, summary)
    if loop.log is not None:
        loop.log.close()
        loop.writes.write_summary(summary)
        title = f"{loop.algo} on {batch.config.env}"
        report.plot_learning_curves(loop.writes.curve, batch, steps, metrics, title)
        _say(say, f"      wrote {loop.writes.path}")
    return RunResult(state, metrics, summary, loop.out.path if loop.out else None)


def _to_lists(tree: Any) -> Any:
    return jax.tree.map(lambda x: x.tolist(), tree)


def _say(say: Callable | None, line: str) -> None:
    if say is not None:
        say(line)


def _check_host(train: Any, data_parallel: bool) -> bool:
    """Whether the env steps on the host (common/envs/host.py), refusing what it cannot do: its
    simulators live in one process and its callback runs on one device."""
    if not is_host_env(train.env):
        return False
    name = train.env.unwrapped.name
    if jax.process_count() > 1:
        raise ConfigError(f"{name} steps on this host: it runs in one process, not multi-host.")
    if data_parallel:
        raise ConfigError(
            f"{name} steps on the host, on one device: --data-parallel has nothing to split."
        )
    return True


def _check_options(
    run_dir: Path | None,
    resume: bool,
    cadence: tuple[int, float],
    track: tuple[str, ...],
    stop_after: int | None = None,
) -> RunDir | None:
    """The run directory to use, after refusing option combinations that cannot work."""
    every, minutes = cadence
    if every < 0:
        raise ConfigError(f"checkpoint_every must be >= 0 (0: not by count), got {every}.")
    if not minutes >= 0:  # NaN too
        raise ConfigError(f"checkpoint_minutes must be >= 0 (0: not by time), got {minutes}.")
    if stop_after is not None and stop_after < 1:
        raise ConfigError(f"stop_after must be at least 1 interval, got {stop_after}.")
    check_trackers(track)
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


def check_trackers(track: tuple[str, ...]) -> None:
    """Refuse a tracker that would fail once the run starts logging: not installed, or W&B
    without credentials (`run` checks this before compiling; the CLI's --dry-run too)."""
    for tracker, module in (("tensorboard", "tensorboardX"), ("wandb", "wandb")):
        if tracker in track and importlib.util.find_spec(module) is None:
            raise ConfigError(f"--track {tracker} needs {module}: pip install -e '.[log]'.")
    if "wandb" in track:
        _check_wandb_credentials()


WANDB_MODES = ("online", "offline", "disabled", "dryrun", "run", "shared")


def _check_wandb_credentials() -> None:
    """Refuse `--track wandb` before compiling where W&B would refuse it at its first log: an
    unknown WANDB_MODE, or an online run without an API key (WANDB_API_KEY, or `wandb login`'s
    netrc entry for the W&B host)."""
    import netrc
    import os
    from urllib.parse import urlparse

    mode = os.environ.get("WANDB_MODE")
    if mode is not None and mode not in WANDB_MODES:
        raise ConfigError(f"WANDB_MODE={mode!r} is not a W&B mode: use one of {WANDB_MODES}.")
    if mode in ("offline", "disabled", "dryrun") or os.environ.get("WANDB_API_KEY"):
        return
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    path = Path(os.environ.get("NETRC") or Path.home() / ".netrc")
    try:
        if netrc.netrc(path).authenticators(host):
            return
    except (OSError, netrc.NetrcParseError):
        pass
    raise ConfigError(
        f"--track wandb has no W&B credentials for {host} (no WANDB_API_KEY, no entry in "
        f"{path}): run `wandb login` first, or log offline with WANDB_MODE=offline "
        "(`wandb sync` uploads it later)."
    )


def _resume(out: RunDir, programs: Programs, batch: Batch, record: dict) -> tuple:
    """(state, intervals done, run seconds so far, metric history) from `out`'s checkpoint,
    padded and placed for this run's devices, whatever device count wrote it."""
    like = jax.eval_shape(
        lambda s: jax.tree.map(lambda x: x[: batch.size], s), programs.state_shape
    )
    expect = {"algo": record["algo"], "config": record}
    loaded, header = checkpoint.load(out.checkpoint, {"state": like}, expect)
    state = place(pad(loaded["state"], programs.padded), programs.state_sharding)
    history = [jax.tree.map(np.asarray, h) for h in header["history"]]
    diverged = header.get("diverged") or [None] * batch.size
    extended = header.get("extended", [])
    return state, header["interval"], header["run_s"], history, diverged, extended


def _resumed_line(out: RunDir, first: int, total: int, skip: int) -> str:
    if not skip:
        return f"resumed from {out.checkpoint} after interval {first}/{total}"
    cut = f"it continues at iteration {skip + 1} (the {skip} trained before are skipped)"
    return f"resumed from {out.checkpoint}: interval {first + 1}/{total} was cut short; {cut}"


def _line(train: Any, metrics: dict, i: int, first: int, size: int, elapsed: float) -> str:
    """The progress line after interval i: env steps, speed, training and eval return."""
    steps = train.env_steps(i)
    done_steps = (steps - (train.env_steps(first - 1) if first else 0)) * size
    return (
        f"env steps {steps:>10,}  SPS {done_steps / elapsed:>10,.0f}  "
        f"return {_mean(metrics['train']['episodic_return'])}  "
        f"eval {_mean(metrics['eval']['episodic_return'])}"
    )


def _mean(values: Any) -> str:
    """The mean over seeds of the finite values, 8 wide; "-" where there is none (no episode
    ended in the interval, or every seed diverged)."""
    values = np.asarray(values)
    values = values[np.isfinite(values)]
    return f"{values.mean():8.2f}" if values.size else f"{'-':>8}"


def _row(train: Any, i: int, metrics: dict, b: int) -> dict[str, Any]:
    """One CSV row: interval i of batch entry b."""
    row: dict[str, Any] = {"interval": i + 1, "env_steps": train.env_steps(i)}
    for group, values in metrics.items():
        row.update({f"{group}/{k}": float(v[b]) for k, v in values.items()})
    return row

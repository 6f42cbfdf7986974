"""Runs that tell the truth: preemption by signal, diverged seeds, --debug, callbacks."""

import dataclasses
import json
import signal
import subprocess
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import ppo, trainer
from canter.common.config import ConfigError
from canter.common.run import checkpoint
from canter.common.run.cli import EXIT_DIVERGED, EXIT_PREEMPTED
from canter.common.run.debug import first_non_finite, run_debug
from canter.common.run.health import finite

from tests.checks import cli_in_process, training_env

# 5 intervals of 2 iterations, 2 seeds (as in test_run_management).
SMALL = ppo.Config(
    total_timesteps=4 * 16 * 10,
    num_envs=4,
    num_steps=16,
    num_minibatches=2,
    update_epochs=2,
    eval_every=4 * 16 * 2,
    num_eval_envs=2,
    num_seeds=2,
)
# A learning rate that sends PPO's parameters to NaN within the first interval.
EXPLODES = 1e30


def run(config=SMALL, **kwargs):
    return trainer.run(config, ppo.make_train, algo="ppo", verbose=False, **kwargs)


def test_finite_ignores_nan_metrics_but_not_nan_state_or_inf():
    state = {"w": jnp.ones(3), "step": jnp.int32(1)}
    one, nan, inf = jnp.float32(1), jnp.float32(jnp.nan), jnp.float32(jnp.inf)
    nan_train = {"train": {"episodic_return": nan}, "eval": {"episodic_return": one}}
    assert finite(state, nan_train)  # "no episode ended yet"
    assert not finite({"w": jnp.array([1.0, jnp.nan])}, nan_train)
    assert not finite(state, {"train": {"loss": inf}, "eval": {"r": one}})
    assert not finite(state, {"train": {"loss": one}, "eval": {"r": nan}})


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_a_diverged_sweep_point_is_named_and_the_others_are_untouched(tmp_path, capsys):
    config = dataclasses.replace(SMALL, learning_rate=2.5e-4)
    result = trainer.run(
        config,
        ppo.make_train,
        algo="ppo",
        run_dir=tmp_path,
        sweep={"learning_rate": [2.5e-4, EXPLODES]},
    )
    out = capsys.readouterr().out
    diverged = result.summary["diverged"]
    assert {d["seed"] for d in diverged} == {0, 1}
    assert all(d["point"] == {"learning_rate": EXPLODES} for d in diverged)
    assert "diverged: seed 0 at learning_rate=1e+30 at interval 1" in out
    assert "RuntimeWarning" not in out
    assert json.loads((tmp_path / "summary.json").read_text())["diverged"] == diverged
    assert result.summary["points"][1]["finite_seeds"] == 0
    assert result.summary["points"][0]["finite_seeds"] == 2
    # The healthy point trained on, exactly as it does alone.
    alone = run(config)
    np.testing.assert_allclose(
        result.metrics["eval"]["episodic_return"][0], alone.metrics["eval"]["episodic_return"]
    )
    assert result.summary["complete"] and result.summary["stopped"] is None


def test_stop_on_divergence_stops_at_the_first_and_checkpoints(tmp_path):
    config = dataclasses.replace(SMALL, learning_rate=EXPLODES)
    result = run(config, run_dir=tmp_path, stop_on_divergence=True, checkpoint_every=0)
    assert result.summary["stopped"] == "divergence"
    assert result.summary["intervals"] == 1 and not result.summary["complete"]
    assert checkpoint.read_header(tmp_path / "checkpoint.eqx")[0]["interval"] == 1


def test_callbacks_see_every_interval_and_can_stop_the_run(tmp_path):
    seen = []

    def stop_at_three(interval: trainer.Interval) -> bool:
        seen.append(interval)
        return interval.index == 2

    result = run(run_dir=tmp_path, callbacks=[stop_at_three], checkpoint_every=0)
    assert [s.index for s in seen] == [0, 1, 2]
    assert seen[-1].num_intervals == 5 and seen[-1].env_steps == 3 * 2 * 64
    assert seen[-1].metrics["eval"]["episodic_return"].shape == (2,)
    np.testing.assert_array_equal(
        seen[-1].metrics["eval"]["episodic_return"],
        result.metrics["eval"]["episodic_return"][:, -1],
    )
    state = seen[-1].state()  # gathered on demand: the state after interval 3
    assert jax.tree.structure(state) == jax.tree.structure(result.state)
    assert result.summary["stopped"] == "callback stop_at_three"
    assert checkpoint.read_header(tmp_path / "checkpoint.eqx")[0]["interval"] == 3
    resumed = run(run_dir=tmp_path, resume=True)  # and the run goes on from there
    assert resumed.summary["complete"] and resumed.summary["intervals"] == 5


@pytest.mark.slow  # several runs of the runner: 10-30 s on 2 busy cores
def test_the_next_interval_computes_during_the_host_work_and_a_stop_discards_it(
    tmp_path, monkeypatch
):
    from canter.common.run import runner

    started = []

    class Counted(runner.Pending):
        def __init__(self, fn, *args):
            started.append(int(args[-2]))  # the first interval of the call
            super().__init__(fn, *args)

    monkeypatch.setattr(runner, "Pending", Counted)
    seen = []

    def stop_at_three(interval: trainer.Interval) -> bool:
        seen.append((interval.index, list(started)))
        return interval.index == 2

    whole = run()
    started.clear()
    result = run(run_dir=tmp_path, callbacks=[stop_at_three], checkpoint_every=1)
    # While the host handles interval i, interval i + 1 is already computing...
    assert seen == [(0, [0, 1]), (1, [0, 1, 2]), (2, [0, 1, 2, 3])]
    # ...and when the run stops after interval 3, the fourth is computed but never written:
    # not in the results, the metric files or the checkpoint, which holds interval 3's state.
    assert result.metrics["eval"]["episodic_return"].shape == (2, 3)
    rows = (tmp_path / "seed_0" / "metrics.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in rows] == [1, 2, 3]
    assert checkpoint.read_header(tmp_path / "checkpoint.eqx")[0]["interval"] == 3
    resumed = run(run_dir=tmp_path, resume=True)
    for name, value in whole.metrics["train"].items():  # as if never stopped
        np.testing.assert_array_equal(resumed.metrics["train"][name], value, err_msg=name)
    leaves = [jax.tree.leaves(eqx.filter(r.state, eqx.is_inexact_array)) for r in (resumed, whole)]
    for mine, theirs in zip(*leaves, strict=True):
        np.testing.assert_array_equal(mine, theirs)


def test_a_discarded_interval_that_fails_loses_nothing(tmp_path, monkeypatch):
    from canter.common.run import runner

    def broken(*args):
        raise RuntimeError("the discarded interval failed")

    class Failing(runner.Pending):
        def __init__(self, fn, *args):
            super().__init__(broken if int(args[-2]) == 3 else fn, *args)

    monkeypatch.setattr(runner, "Pending", Failing)
    result = run(run_dir=tmp_path, callbacks=[lambda interval: interval.index == 2])
    assert result.summary["intervals"] == 3  # stopped after interval 3, as asked, no error
    assert checkpoint.read_header(tmp_path / "checkpoint.eqx")[0]["interval"] == 3


@pytest.mark.slow  # several runs of the runner: 10-30 s on 2 busy cores
def test_runs_with_and_without_overlap_are_bit_equal(tmp_path):
    overlapped = run(run_dir=tmp_path / "a", checkpoint_every=2)
    sequential = run(run_dir=tmp_path / "b", checkpoint_every=2, overlap=False)
    for group, metrics in overlapped.metrics.items():
        for name, value in metrics.items():
            np.testing.assert_array_equal(sequential.metrics[group][name], value, err_msg=name)
    a, b = (
        checkpoint.read_header(p / "checkpoint.eqx")[1] for p in (tmp_path / "a", tmp_path / "b")
    )
    assert a == b  # the saved payloads too


@pytest.mark.slow  # several runs of the runner: 10-30 s on 2 busy cores
def test_chunks_of_intervals_stop_at_checkpoints_and_change_no_number(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard", reason="the log extra: pip install -e '.[log]'")
    from canter.common.run import runner
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    calls = []

    class Counted(runner.Pending):
        def __init__(self, fn, *args):
            calls.append((int(args[-2]), int(args[-1])))  # (first interval, count)
            super().__init__(fn, *args)

    monkeypatch.setattr(runner, "Pending", Counted)
    monkeypatch.setattr(runner.Pace, "target_s", 0.0)  # one interval per call
    single = run(run_dir=tmp_path / "single", checkpoint_every=2)
    assert calls == [(i, 1) for i in range(5)]
    calls.clear()
    monkeypatch.setattr(runner.Pace, "target_s", 1e9)  # as many as may share a call
    chunked = run(run_dir=tmp_path / "chunked", checkpoint_every=2, track=("tensorboard",))
    # The first call measures the pace; then calls end where a checkpoint is due (2, 4, 5).
    assert calls == [(0, 1), (1, 1), (2, 2), (4, 1)]
    events = EventAccumulator(str(tmp_path / "chunked" / "tensorboard" / "seed_1"))
    events.Reload()
    points = events.Scalars("eval/episodic_return")  # one per interval, in order
    assert [p.step for p in points] == [4 * 16 * 2 * k for k in range(1, 6)]
    expected = chunked.metrics["eval"]["episodic_return"][1]
    np.testing.assert_allclose([p.value for p in points], expected, rtol=1e-6)
    for group, metrics in single.metrics.items():
        for name, value in metrics.items():
            np.testing.assert_array_equal(chunked.metrics[group][name], value, err_msg=name)
    rows = [(tmp_path / d / "seed_1" / "metrics.csv").read_text() for d in ("single", "chunked")]
    assert rows[0] == rows[1]  # every interval's row, in order
    a, b = (checkpoint.read_header(tmp_path / d / "checkpoint.eqx") for d in ("single", "chunked"))
    assert a[1] == b[1] and a[0]["history"] == b[0]["history"]
    calls.clear()
    run(checkpoint_every=2)  # writing nothing, nothing is due: one call after the first
    assert calls == [(0, 1), (1, 4)]


def test_checkpoints_are_due_by_run_time_and_by_count(monkeypatch):
    from canter.common.run import cadence

    now = [100.0]
    monkeypatch.setattr(cadence.time, "perf_counter", lambda: now[0])
    by_time = cadence.Checkpoints(every=0, minutes=1.0)
    assert not by_time.due(1)
    now[0] += 59.0
    assert not by_time.due(7)
    now[0] += 1.0
    assert by_time.due(8)  # a minute since the start
    by_time.saved()
    assert not by_time.due(9)  # the clock restarts at each checkpoint
    both = cadence.Checkpoints(every=3, minutes=1.0)
    assert [both.due(done) for done in range(1, 7)] == [False, False, True] * 2
    assert not cadence.Checkpoints(every=0, minutes=0.0).due(1)  # only at the end


def test_a_run_checkpoints_by_run_time(tmp_path, monkeypatch):
    from canter.common.run import runner

    saved = []
    save = runner._Loop.save

    def counted(self, i, state):
        saved.append(i + 1)
        return save(self, i, state)

    monkeypatch.setattr(runner._Loop, "save", counted)
    monkeypatch.setattr(runner.Pace, "target_s", 0.0)  # one interval per call
    run(run_dir=tmp_path / "often", checkpoint_minutes=1e-9)
    assert saved == [1, 2, 3, 4, 5]  # the minute (here a nanosecond) passes in every interval
    saved.clear()
    run(run_dir=tmp_path / "end", checkpoint_minutes=0.0)
    assert saved == [5]
    with pytest.raises(ConfigError, match="checkpoint_minutes must be >= 0"):
        run(run_dir=tmp_path / "bad", checkpoint_minutes=-1.0)


# One minibatch step per iteration: each eager op is a dispatch (the CLI test's sizes below).
EAGER = dataclasses.replace(
    SMALL, num_envs=2, num_steps=4, update_epochs=1, num_minibatches=1, num_eval_envs=1
)


@pytest.mark.slow  # eager PPO iterations: 30-50 s on 2 busy cores
def test_debug_runs_eagerly_with_concrete_values_and_names_a_nan(capsys):
    seen = []

    def make_train(config):
        train = ppo.make_train(config)

        def step(state, iteration):
            leaves = jax.tree.leaves(state)
            seen.append(all(not isinstance(x, jax.core.Tracer) for x in leaves))
            return train.step(state, iteration)

        return dataclasses.replace(train, step=step)

    config = dataclasses.replace(EAGER, num_seeds=3)
    history = run_debug(config, make_train, algo="ppo", say=print)
    out = capsys.readouterr().out
    assert "jit off" in out and "NaN/inf check" in out and "seed 0 only" in out
    assert "debug: iteration 1 runs eagerly" in out.splitlines()[1]  # before its tens of seconds
    assert len(history) == 2 and seen == [True, True]  # one seed, real arrays inside step
    assert np.isfinite(history[-1]["eval"]["episodic_return"])

    def poisoned(config):
        train = ppo.make_train(config)

        def step(state, iteration):
            state, metrics = train.step(state, iteration)
            return jax.tree.map(
                lambda x: x * jnp.nan if x.dtype == jnp.float32 else x, state
            ), metrics

        return dataclasses.replace(train, step=step)

    with pytest.raises(FloatingPointError, match="iteration 1: the state's .* holds a NaN"):
        run_debug(EAGER, poisoned, algo="ppo", say=print)
    assert first_non_finite({"a": jnp.ones(2), "b": {"c": jnp.array([jnp.inf])}}) == "['b']['c']"


@pytest.mark.slow  # a fresh interpreter: --debug turns jit off for the whole process
def test_debug_cli_says_what_it_turned_on(repo_root, monkeypatch, capsys):
    # One minibatch step per iteration: each eager op is a dispatch (16 took 100 s of CI).
    args = ["--debug", "--num-envs", "2", "--num-steps", "4", "--update-epochs", "1"]
    args += ["--num-minibatches", "1", "--num-eval-envs", "1"]
    command = [sys.executable, str(repo_root / "algorithms" / "ppo.py"), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "jit off (jax_disable_jit)" in done.stdout and "[2/2]" in done.stdout
    # Refused before anything is turned off, so in this process.
    sweep = ["--sweep", "learning_rate=1e-3,1e-4"]
    code, _, err = cli_in_process("ppo", monkeypatch, capsys, *args, *sweep)
    assert code == 2 and "--debug runs one configuration" in err, err
    assert not jax.config.jax_disable_jit


def cli(repo_root, *args, training=False):
    """ppo.py ARGS in a fresh process; `training`: a run long enough to be signalled, whose time
    goes to training (tests/checks.py, training_env)."""
    command = [sys.executable, str(repo_root / "algorithms" / "ppo.py"), *args]
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.Popen(command, env=training_env() if training else None, **pipes)


def wait_for_rows(path, rows, process, timeout=600):
    """Wait until `path` (a metrics.csv) has `rows` data rows while `process` runs."""
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) > rows:
            return
        time.sleep(0.02)
    raise AssertionError(f"the run ended (or stalled) before {rows} intervals: {process.poll()}")


# 40 intervals of 20 iterations: long enough to be signalled mid-run, and each call of the
# interval program (as many intervals as fill about half a second) far from the whole run.
LONG = [
    "--total-timesteps",
    str(512 * 800),
    "--eval-every",
    str(512 * 20),
    "--num-eval-envs",
    "2",
    "--checkpoint-every",
    "1000",
]


@pytest.mark.slow
def test_a_signal_checkpoints_the_interval_and_resume_equals_the_whole_run(repo_root, tmp_path):
    # SIGTERM here, SIGINT in the compile test below: one handler takes both
    # (common/run/interrupts.py), each checked once end to end.
    sig = signal.SIGTERM
    whole = cli(repo_root, *LONG, "--run-dir", str(tmp_path / "whole"), training=True)
    assert whole.wait(timeout=600) == 0, whole.stderr.read()
    cut = tmp_path / "cut"
    victim = cli(repo_root, *LONG, "--run-dir", str(cut), training=True)
    wait_for_rows(cut / "seed_0" / "metrics.csv", 3, victim)
    victim.send_signal(sig)
    out, err = victim.communicate(timeout=600)
    assert victim.returncode == EXIT_PREEMPTED, err
    saved = checkpoint.read_header(cut / "checkpoint.eqx")[0]["interval"]
    assert 3 <= saved < 40  # the interval in flight was finished and saved, not the whole run
    assert f"stopped ({sig.name}) after interval {saved}/40" in out
    assert f"--resume {cut}" in out
    resumed = cli(repo_root, "--resume", str(cut), training=True)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    a = json.loads((tmp_path / "whole" / "summary.json").read_text())
    b = json.loads((cut / "summary.json").read_text())
    # Bit for bit, in fresh processes on the device count that saved it (docs/running.md).
    assert b["eval_return"] == a["eval_return"] and b["final_return"] == a["final_return"]
    rows = (cut / "seed_0" / "metrics.csv").read_text()
    assert [int(r.split(",")[0]) for r in rows.splitlines()[1:]] == list(range(1, 41))
    assert rows == (tmp_path / "whole" / "seed_0" / "metrics.csv").read_text()


@pytest.mark.slow
def test_a_second_signal_exits_at_once_and_keeps_the_previous_checkpoint(repo_root, tmp_path):
    cut = tmp_path / "cut"
    # Intervals of 2M env steps (seconds each), so the second signal lands inside one.
    slow = [
        "--total-timesteps",
        str(512 * 40000),
        "--eval-every",
        str(512 * 4000),
        "--num-eval-envs",
        "2",
        "--checkpoint-every",
        "1",
    ]
    victim = cli(repo_root, *slow, "--run-dir", str(cut), training=True)
    wait_for_rows(cut / "seed_0" / "metrics.csv", 1, victim)
    while not (cut / "checkpoint.eqx").exists():
        time.sleep(0.02)
    victim.send_signal(signal.SIGTERM)
    # The second signal only once the first was handled (it says so on stderr at once): two
    # sent together could reach Python's handler as one.
    notice = ""
    for notice in victim.stderr:  # earlier lines may be warnings; at the process's end: EOF
        if notice.startswith("SIGTERM:"):
            break
    assert notice.startswith("SIGTERM: stopping after the interval in flight"), notice
    sent = time.time()
    victim.send_signal(signal.SIGTERM)
    victim.wait(timeout=60)
    assert time.time() - sent < 5  # at once, not after the interval in flight
    assert victim.returncode == -signal.SIGTERM
    header, _ = checkpoint.read_header(cut / "checkpoint.eqx")
    assert header["interval"] >= 1


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_cli_exit_code_of_a_diverged_run(repo_root, tmp_path):
    args = [
        "--total-timesteps",
        "1280",
        "--num-envs",
        "4",
        "--num-steps",
        "16",
        "--eval-every",
        "128",
        "--num-eval-envs",
        "2",
        "--learning-rate",
        str(EXPLODES),
        "--run-dir",
        str(tmp_path / "r"),
    ]
    process = cli(repo_root, *args)
    out, err = process.communicate(timeout=600)
    assert process.returncode == EXIT_DIVERGED, err
    assert "DIVERGED: seed 0 from interval 1" in out and "RuntimeWarning" not in err


@pytest.mark.slow  # a CNN compile, cold
def test_a_signal_while_compiling_exits_in_one_line(repo_root, tmp_path):
    sig = signal.SIGINT  # Ctrl-C; SIGTERM goes through the same handler in the test above
    run_dir = tmp_path / "run"
    args = ["--env", "Breakout-MinAtar", "--network", "cnn", "--no-compile-cache"]
    victim = cli(repo_root, *args, "--run-dir", str(run_dir))
    while not (run_dir / "config.json").exists():  # claimed just before compiling
        assert victim.poll() is None, victim.stderr.read()
        time.sleep(0.01)
    # The handler is installed right after the claim, before a cold CNN compile of 10 s or
    # more: 0.3 s leaves it time to be installed and the compile time to be under way.
    time.sleep(0.3)
    sent = time.time()
    victim.send_signal(sig)
    out, err = victim.communicate(timeout=120)
    assert time.time() - sent < 5  # at once, not after the compilation
    assert victim.returncode == EXIT_PREEMPTED, err
    line = f"stopped ({sig.name}) while compiling: nothing trained, nothing saved"
    assert err.strip().splitlines()[-1] == line, err
    assert "Traceback" not in err and "compiled" not in out
    assert not run_dir.exists()  # the claim is undone: the directory can be used again


def test_a_callback_that_raises_leaves_the_checkpoints_written_so_far_whole(tmp_path, monkeypatch):
    """The error reaches the caller after the checkpoint writer has finished: the checkpoint
    of interval 1 is on disk, whole, and the run resumes from it. Each write is slowed down so
    that it is still in flight when the callback raises after interval 2."""
    from canter.common.run import checkpoint as checkpoint_module

    save = checkpoint_module.save

    def slow_save(*args):
        time.sleep(0.5)
        save(*args)

    monkeypatch.setattr(checkpoint_module, "save", slow_save)

    def fail_at_two(interval: trainer.Interval) -> bool:
        if interval.index == 1:
            raise RuntimeError("the callback failed")
        return False

    with pytest.raises(RuntimeError, match="the callback failed"):
        run(run_dir=tmp_path, callbacks=[fail_at_two], checkpoint_every=1)
    header, _ = checkpoint.read_header(tmp_path / "checkpoint.eqx")
    assert header["interval"] == 1  # the write of interval 1 finished before the error came out
    resumed = run(run_dir=tmp_path, resume=True)
    assert resumed.summary["complete"] and resumed.summary["intervals"] == 5


def test_stop_after_zero_is_refused_before_compiling(tmp_path):
    from canter.common.config import ConfigError

    with pytest.raises(ConfigError, match="stop_after must be at least 1 interval, got 0"):
        run(run_dir=tmp_path, stop_after=0)
    assert not (tmp_path / "config.json").exists()

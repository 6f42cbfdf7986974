"""Run management: checkpoints and exact resume, damaged checkpoints, sweeps, devices, sinks."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from canter.algorithms import evaluate, ppo, trainer
from canter.common.config import ConfigError
from canter.common.run import checkpoint, memory
from canter.common.run.batch import parse_sweep

from tests.checks import cli_in_process, two_processes

# 5 intervals of 2 iterations, 2 seeds: long enough to interrupt, short enough to compile once.
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


def run(config=SMALL, **kwargs):
    return trainer.run(config, ppo.make_train, algo="ppo", verbose=False, **kwargs)


def max_difference(a, b) -> float:
    def as_float(x):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x, np.float64)

    diffs = [
        np.nanmax(np.abs(as_float(x) - as_float(y)))
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    ]
    return float(max(diffs))


def csv_rows(path):
    lines = path.read_text().splitlines()
    return lines[0], [list(map(float, line.split(","))) for line in lines[1:]]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    return run(run_dir=tmp_path_factory.mktemp("whole"), checkpoint_every=1)


def test_resume_equals_uninterrupted_run(uninterrupted, tmp_path):
    first = run(run_dir=tmp_path, checkpoint_every=1, stop_after=2)
    assert first.summary["intervals"] == 2 and not first.summary["complete"]
    header, _ = checkpoint.read_header(tmp_path / "checkpoint.eqx")
    assert header["interval"] == 2
    resumed = run(run_dir=tmp_path, resume=True)
    assert resumed.summary["complete"]
    difference = max(
        max_difference(resumed.state, uninterrupted.state),
        max_difference(resumed.metrics, uninterrupted.metrics),
    )
    # Bit for bit on the device count that saved it (docs/running.md; in fresh processes too,
    # tests/test_robustness.py's signal test); on another count, equal to float rounding
    # (test_multihost_run_resumes_there_and_on_one_or_four_devices_equal_to_one_process).
    assert difference == 0, f"largest difference, resumed vs uninterrupted: {difference:.3g}"
    for seed in (0, 1):
        head, rows = csv_rows(tmp_path / f"seed_{seed}" / "metrics.csv")
        whole_head, whole_rows = csv_rows(uninterrupted.run_dir / f"seed_{seed}" / "metrics.csv")
        assert head == whole_head
        assert [r[0] for r in rows] == [1, 2, 3, 4, 5]  # no gaps, no duplicates
        np.testing.assert_allclose(rows, whole_rows, rtol=1e-4, atol=1e-4)


def test_run_directory_contents(uninterrupted):
    run_dir = uninterrupted.run_dir
    png = (run_dir / "learning_curve.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["complete"] and summary["intervals"] == 5 and len(summary["final_return"]) == 2
    assert summary["points"][0]["eval_return_mean"] == pytest.approx(summary["eval_return_mean"])
    assert 0 <= summary["host_s"] < summary["run_s"]


def test_damaged_checkpoints_fail_clearly_and_stay_untouched(uninterrupted, tmp_path):
    path = uninterrupted.run_dir / "checkpoint.eqx"
    blob = path.read_bytes()
    like = {"state": jax.eval_shape(lambda: uninterrupted.state)}
    expect = {"algo": "ppo"}
    cases = {
        "truncated": (blob[:-100], "truncated or corrupted"),
        "flipped": (blob[:-50] + bytes([blob[-50] ^ 0xFF]) + blob[-49:], "truncated or corrupted"),
        "not a checkpoint": (b"hello", "not a canter checkpoint"),
        "header cut": (blob[:40], "damaged header"),
    }
    for name, (content, message) in cases.items():
        damaged = tmp_path / f"{name}.eqx"
        damaged.write_bytes(content)
        with pytest.raises(checkpoint.CheckpointError, match=message):
            checkpoint.load(damaged, like, expect)
        assert damaged.read_bytes() == content
    with pytest.raises(checkpoint.CheckpointError, match="different algo: saved 'ppo', now 'dqn'"):
        checkpoint.load(path, like, {"algo": "dqn"})
    wrong_shape = {
        "state": jax.eval_shape(lambda: jax.tree.map(lambda x: x[:1], uninterrupted.state))
    }
    with pytest.raises(checkpoint.CheckpointError, match="differently shaped"):
        checkpoint.load(path, wrong_shape, expect)
    assert path.read_bytes() == blob


def test_resume_with_a_different_config_names_the_field(uninterrupted):
    before = (uninterrupted.run_dir / "checkpoint.eqx").read_bytes()
    changed = dataclasses.replace(SMALL, clip_coef=0.3)
    with pytest.raises(ConfigError, match="clip_coef: saved 0.2, now 0.3"):
        run(changed, run_dir=uninterrupted.run_dir, resume=True)
    assert (uninterrupted.run_dir / "checkpoint.eqx").read_bytes() == before


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_sweep_compiles_once_and_each_point_equals_a_plain_run(monkeypatch):
    traces = []  # who traced the step: the memory estimate (one seed) or the run's program
    tracer = ["run"]
    estimate = memory.estimate

    def marked_estimate(train):
        tracer[0] = "estimate"
        try:
            return estimate(train)
        finally:
            tracer[0] = "run"

    monkeypatch.setattr(memory, "estimate", marked_estimate)

    def counting_make_train(config):
        train = ppo.make_train(config)

        def step(state, iteration):
            traces.append(tracer[0])
            return train.step(state, iteration)

        return dataclasses.replace(train, step=step)

    sweep = {"learning_rate": [1e-3, 3e-3], "ent_coef": [0.0, 0.05]}
    result = trainer.run(SMALL, counting_make_train, algo="ppo", sweep=sweep, verbose=False)
    # One program for the whole grid; before it, the memory check traced one seed's interval
    # once (run/memory.py), not once a point.
    assert traces == ["estimate", "run"]
    assert result.metrics["eval"]["episodic_return"].shape == (4, 2, 5)
    assert [p["learning_rate"] for p in result.summary["points"]] == [1e-3, 1e-3, 3e-3, 3e-3]
    plain = run(dataclasses.replace(SMALL, learning_rate=3e-3, ent_coef=0.05))
    for group in ("train", "eval"):
        for name, value in plain.metrics[group].items():
            np.testing.assert_allclose(result.metrics[group][name][3], value, rtol=1e-4, atol=1e-4)
    # The points really differ: a sweep that ignored its values would fail here.
    losses = result.metrics["train"]["entropy"][:, 0, -1]
    assert len(set(np.round(losses, 6))) == 4


def test_sweep_rejects_static_and_unknown_fields():
    with pytest.raises(ConfigError, match="'num_envs' is static"):
        parse_sweep(["num_envs=4,8"], ppo.Config)
    with pytest.raises(ConfigError, match="no field 'lr'.*learning_rate"):
        parse_sweep(["lr=1e-3"], ppo.Config)
    with pytest.raises(ConfigError, match="must be numbers"):
        parse_sweep(["gamma=high"], ppo.Config)
    assert parse_sweep(["gamma=0.9,0.99"], ppo.Config) == {"gamma": [0.9, 0.99]}


RESUME_SCRIPT = """
import json, sys
from pathlib import Path
import jax
import tests.test_run_management as t
devices, run_dir = int(sys.argv[1]), Path(sys.argv[2])
assert jax.device_count() == devices, jax.devices()
result = t.run(t.DEVICES_CONFIG, run_dir=run_dir, resume=True)
print(json.dumps({k: v.tolist() for k, v in result.metrics["train"].items()}))
"""
# 3 seeds: padded to 4 on 2 devices, 3 devices used of 4; no clipping (inf in config.json).
DEVICES_CONFIG = dataclasses.replace(SMALL, num_seeds=3, max_grad_norm=float("inf"))


def resumed_on(repo_root, devices, run_dir):
    """The run in `run_dir` resumed in a fresh process with `devices` CPU devices: its metrics."""
    count = f"--xla_force_host_platform_device_count={devices}"
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {count}"}
    done = subprocess.run(
        [sys.executable, "-c", RESUME_SCRIPT, str(devices), str(run_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=repo_root,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


MULTIHOST_SCRIPT = """
import json, shutil, sys, time
from pathlib import Path
import jax
port, process_id, run_dir = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.config.update("jax_num_cpu_devices", 1)  # one device per process
jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=process_id)
import tests.test_run_management as t  # imports gymnax: after initialize
from canter.common.run import checkpoint, memory
assert jax.process_count() == 2 and jax.device_count() == 2, jax.devices()
# Process 1 late, as on a loaded host: process 0 reaches the run first and waits for it before
# claiming the directory. The delay is the scenario, not a synchronisation: the outcome is the
# same whichever process arrives first.
if process_id == 1:
    time.sleep(5)
# 3 seeds over 2 processes, padded to 4.
first = t.run(t.DEVICES_CONFIG, run_dir=run_dir, checkpoint_every=1, stop_after=2)
header, _ = checkpoint.read_header(run_dir / "checkpoint.eqx")  # on disk, from process 0 only
if process_id == 0:  # copies of the stopped run, for the test to resume on 1 and 4 devices
    for copy in ("one", "four"):
        shutil.copytree(run_dir, run_dir.with_name(copy))
result = t.run(t.DEVICES_CONFIG, run_dir=run_dir, resume=True)  # reads that file back
metrics = lambda m: {k: v.tolist() for k, v in m.items()}
# One seed's envs and minibatches split over the two processes (--data-parallel).
split = t.run(t.SPLIT_CONFIG, data_parallel=True)
print(json.dumps({
    "process": process_id, "first": first.summary["intervals"], "saved": header["interval"],
    "stopped": metrics(first.metrics["train"]), "intervals": result.summary["intervals"],
    "train": metrics(result.metrics["train"]),
    "split": {g: metrics(m) for g, m in split.metrics.items()},
}))
"""
# Two intervals of 2 iterations, 8 envs: each process steps 4 and takes half of each minibatch.
SPLIT_CONFIG = dataclasses.replace(
    SMALL, total_timesteps=8 * 16 * 4, num_envs=8, eval_every=8 * 16 * 2, num_seeds=1
)


def assert_close(a, b, **names):
    for name, value in b.items():
        np.testing.assert_allclose(a[name], value, rtol=1e-4, atol=1e-4, err_msg=f"{name} {names}")


@pytest.mark.slow  # four processes: two together, then one after the other
def test_multihost_run_resumes_there_and_on_one_or_four_devices_equal_to_one_process(
    repo_root, tmp_path
):
    """Two processes of one device each stop after two intervals (a checkpoint on disk, written
    by process 0), resume from it together, then split one seed over both (data parallel across
    hosts: gradients averaged through gloo). Copies of the stopped run resume in one process on
    one device and on four. Every way ends with the numbers of one uninterrupted process."""
    run_dir = tmp_path / "run"
    outputs = two_processes(repo_root, MULTIHOST_SCRIPT, str(run_dir))
    results = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert [(r["first"], r["saved"]) for r in results] == [(2, 2), (2, 2)]
    assert not list(run_dir.glob(".*.tmp"))
    single = run(DEVICES_CONFIG)
    whole = single.metrics["train"]
    for result in results:  # every process ends with the whole batch of metrics
        assert_close(result["stopped"], {k: v[:, :2] for k, v in whole.items()}, stopped=True)
        assert result["intervals"] == single.summary["intervals"]
        assert_close(result["train"], whole)
    _, rows = csv_rows(run_dir / "seed_2" / "metrics.csv")
    assert [row[0] for row in rows] == list(range(1, single.summary["intervals"] + 1))
    for devices, copy in ((1, "one"), (4, "four")):
        assert_close(resumed_on(repo_root, devices, tmp_path / copy), whole, devices=devices)
    assert json.loads((tmp_path / "four" / "config.json").read_text())["max_grad_norm"] == "inf"
    one_device = run(SPLIT_CONFIG)
    for result in results:  # both processes report the whole run
        for group, metrics in one_device.metrics.items():
            assert_close(result["split"][group], metrics, group=group)


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_trackers_write_tensorboard_and_offline_wandb(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    config = dataclasses.replace(SMALL, total_timesteps=4 * 16 * 4, num_seeds=2)
    run(config, run_dir=tmp_path, track=("tensorboard", "wandb"))
    for seed in (0, 1):
        events = list((tmp_path / "tensorboard" / f"seed_{seed}").glob("events.out.tfevents.*"))
        assert events and events[0].stat().st_size > 0
    offline = list((tmp_path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert offline and offline[0].stat().st_size > 0


def cli(repo_root, *args, **kwargs):
    command = [sys.executable, str(repo_root / "algorithms" / "ppo.py"), *args]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs
    )


def test_cli_resume_with_changed_flag_and_static_sweep_fail_cleanly(
    uninterrupted, monkeypatch, capsys, tmp_path
):
    monkeypatch.chdir(tmp_path)  # a refusal that failed to refuse would write runs/ here
    args = ["--resume", str(uninterrupted.run_dir), "--num-envs", "8"]
    code, out, err = cli_in_process("ppo", monkeypatch, capsys, *args)
    assert code == 2 and "num_envs: saved 4, now 8" in err, err
    assert "compiled" not in out  # refused before compiling
    args = ["--sweep", "num_steps=8,16", "--total-timesteps", "1024"]
    code, _, err = cli_in_process("ppo", monkeypatch, capsys, *args)
    assert code == 2 and "'num_steps' is static" in err, err
    # --run-dir beside --resume names another directory: refused, not silently ignored.
    args = ["--resume", str(uninterrupted.run_dir), "--run-dir", str(tmp_path / "elsewhere")]
    code, _, err = cli_in_process("ppo", monkeypatch, capsys, *args)
    assert code == 2 and "drop --run-dir" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_evaluate_cli_reports_and_renders(repo_root, uninterrupted, tmp_path):
    gif = tmp_path / "episode.gif"
    command = [
        sys.executable,
        str(repo_root / "algorithms" / "evaluate.py"),
        str(uninterrupted.run_dir),
        "--episodes",
        "4",
        "--gif",
        str(gif),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "seed_1: mean return" in done.stdout and "mean over entries" in done.stdout
    assert gif.read_bytes().startswith(b"GIF8")
    missing = subprocess.run(
        command[:2] + [str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert missing.returncode == 2 and "config.json" in missing.stderr


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_cli_resume_checks_the_flags_and_a_finished_run_before_compiling(repo_root, tmp_path):
    run_dir = tmp_path / "run"
    run(run_dir=run_dir, checkpoint_every=1, stop_after=2)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    bad = cli(repo_root, "--resume", str(run_dir), "--learning-rate", "0.1")
    out, err = bad.communicate(timeout=300)
    assert bad.returncode == 2 and "learning_rate: saved 0.00025, now 0.1" in err, err
    assert "compiled" not in out and "Traceback" not in err
    longer = cli(repo_root, "--resume", str(run_dir), "--total-timesteps", str(4 * 16 * 20))
    out, err = longer.communicate(timeout=300)
    # The one cause that holds for this run, with the flag that avoids it.
    assert longer.returncode == 2, err
    assert "anneal_lr = True anneals the learning rate over the budget" in err
    assert "Either continue anyway with --extend" in err
    assert "cut short" not in err and "covered the whole run" not in err
    assert "continuing its --total-timesteps 640 to 1280 is refused" in err
    assert "compiled" not in out
    assert before == {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    run(run_dir=run_dir, resume=True)  # now finished
    done = cli(repo_root, "--resume", str(run_dir))
    out, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert f"{run_dir} is finished (5/5 intervals): nothing to resume." in out
    assert "compiled" not in out


@pytest.mark.slow  # five runs train (two resumed): about a minute on 2 cores
def test_train_longer_equals_a_run_started_with_the_larger_budget(tmp_path):
    flat = dataclasses.replace(SMALL, anneal_lr=False)  # nothing in the program counts the budget
    longer = dataclasses.replace(flat, total_timesteps=2 * flat.total_timesteps)
    whole = run(longer, run_dir=tmp_path / "whole")
    for name, first in (("finished", {}), ("unfinished", {"stop_after": 2})):
        run_dir = tmp_path / name
        run(flat, run_dir=run_dir, checkpoint_every=1, **first)
        resumed = run(longer, run_dir=run_dir, resume=True)
        assert resumed.summary["complete"] and resumed.summary["env_steps"] == 1280
        difference = max(
            max_difference(resumed.state, whole.state),
            max_difference(resumed.metrics, whole.metrics),
        )
        assert difference < 1e-4, (name, difference)
        _, rows = csv_rows(run_dir / "seed_0" / "metrics.csv")
        assert [r[0] for r in rows] == list(range(1, 11))
        assert json.loads((run_dir / "config.json").read_text())["total_timesteps"] == 1280
    with pytest.raises(ConfigError, match="a run cannot be shortened"):
        run(flat, run_dir=tmp_path / "finished", resume=True)


def test_train_longer_refusal_names_each_cause_that_holds_and_the_two_ways_on():
    from types import SimpleNamespace

    from canter.common.run.resume import refusal, why_not_longer

    def train(iterations, per_interval, steps=512):
        return SimpleNamespace(
            num_iterations=iterations,
            interval_iterations=per_interval,
            num_intervals=-(-iterations // per_interval),
            eval_every=per_interval * steps,
            env_steps_per_iteration=steps,
        )

    plain = SimpleNamespace(anneal_lr=False)
    ragged = why_not_longer(train(976, 50), plain)  # PPO's default budget: 500,000 env steps
    assert ragged == [
        "its last interval was cut short (976 iterations are not whole intervals of 50)"
    ]
    one = why_not_longer(train(40, 40), plain)
    assert one == ["its one evaluation interval covered the whole run"]
    annealed = why_not_longer(train(1000, 50), SimpleNamespace(anneal_lr=True))
    assert annealed == ["anneal_lr = True anneals the learning rate over the budget"]
    both = why_not_longer(train(976, 50), SimpleNamespace(anneal_lr=True, exploration_fraction=0.2))
    assert len(both) == 3 and "exploration_fraction = 0.2 decays epsilon" in both[2]
    # The case: a default PPO run (976 iterations) asked for 512,000 env steps (1,000).
    message = refusal(both, train(976, 50), train(1000, 50))
    assert message.startswith("the continued run would not equal one started with the new budget")
    assert "Either continue anyway with --extend" in message
    assert message.endswith("or start a new run with --total-timesteps 512000")
    # A whole-interval run without schedules, continued to a part interval: whole intervals
    # above the run's own budget are the other way on, never the run's own budget.
    ragged_new = why_not_longer(train(1000, 50), plain, train(1010, 50))
    assert ragged_new == [
        "the new budget ends in a part interval (evaluations come every 25,600 env steps)"
    ]
    message = refusal(ragged_new, train(1000, 50), train(1010, 50))
    assert "or continue to whole intervals (--total-timesteps 537600 or 563200)" in message


@pytest.mark.slow  # three short runs train: about 30 s on 2 cores
def test_extend_continues_a_cut_annealed_run_on_the_new_budgets_schedule(
    tmp_path, monkeypatch, capsys
):
    cut = dataclasses.replace(SMALL, total_timesteps=4 * 16 * 9)  # 9 iterations: the 5th cut
    longer = dataclasses.replace(SMALL, total_timesteps=4 * 16 * 12)  # 6 whole intervals of 2
    run_dir = tmp_path / "run"
    first = run(cut, run_dir=run_dir)
    with pytest.raises(ConfigError, match="anneal_lr = True anneals the learning rate"):
        run(longer, run_dir=run_dir, resume=True)
    assert first.summary["env_steps"] == 4 * 16 * 9
    _, cut_rows = csv_rows(run_dir / "seed_0" / "metrics.csv")
    # Preempted once on the new budget, then resumed without the flag: the record carries on.
    run(longer, run_dir=run_dir, resume=True, extend=True, stop_after=1)
    extended = run(longer, run_dir=run_dir, resume=True)
    assert extended.summary["complete"] and extended.summary["env_steps"] == 4 * 16 * 12
    header, rows = csv_rows(run_dir / "seed_0" / "metrics.csv")
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r[1] for r in rows] == [128 * k for k in range(1, 7)]
    assert rows[:4] == cut_rows[:4]  # the whole intervals stand; the cut one was re-entered
    record = json.loads((run_dir / "config.json").read_text())
    assert record["total_timesteps"] == 768
    [entry] = record["extended"]
    assert (entry["from_total_timesteps"], entry["to_total_timesteps"]) == (576, 768)
    assert entry["at_interval"] == 5
    eval_at = header.split(",").index("eval/episodic_return")
    assert entry["cut_interval"]["eval"]["episodic_return"][0] == cut_rows[4][eval_at]
    # Every iteration trained exactly once: 12 iterations of 2 epochs x 2 minibatches.
    counts = [
        np.asarray(leaf)
        for path, leaf in jax.tree_util.tree_leaves_with_path(extended.state.opt_state)
        if "count" in jax.tree_util.keystr(path)
    ]
    assert counts and all((c == 12 * 4).all() for c in counts)
    # From the resume point (iteration 9) on, the learning rate is the new budget's schedule's:
    # 3/12 of its start where the old budget's had reached 0.
    updates = 9 * 4
    assert float(ppo.learning_rate_schedule(cut)(updates)) == 0.0
    expected = SMALL.learning_rate * 3 / 12
    assert float(ppo.learning_rate_schedule(longer)(updates)) == pytest.approx(expected)
    # config.json's record of the extension is read back by the CLI's --resume and evaluate.py.
    code, out, err = cli_in_process("ppo", monkeypatch, capsys, "--resume", str(run_dir))
    assert code == 0 and f"{run_dir} is finished (6/6 intervals)" in out, err
    assert len(evaluate.main(run_dir, episodes=2)["returns"]) == 2


def abandoned_run(path: Path) -> Path:
    """A run directory as a run killed before its first checkpoint leaves it."""
    (path / "seed_0").mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"algo": "ppo", "format": 3}))
    (path / "seed_0" / "metrics.csv").write_text("interval\n1\n")
    (path / "notes.txt").write_text("not canter's")
    return path


HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_run_killed_before_its_first_checkpoint_leaves_a_reusable_directory(tmp_path):
    from canter.common.run.rundir import RunDir

    out = RunDir(abandoned_run(tmp_path / "run"))
    assert out.abandoned() and not out.holds_run()
    with pytest.raises(ConfigError, match="holds no checkpoint: its run stopped before"):
        out.check_resume({}, None)
    # While another process holds the lock, the directory is that process's.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(out.path / "run.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not out.abandoned() and out.holds_run()
        with pytest.raises(ConfigError, match="another process is running it"):
            out.check_resume({}, None)
        with pytest.raises(ConfigError, match="is in use"):
            RunDir(out.path).claim({"algo": "ppo", "format": 3})
    finally:
        holder.kill()
        holder.wait()
    assert out.abandoned()
    created = out.claim({"algo": "ppo", "format": 3, "new": True})
    assert not created and json.loads(out.config_file.read_text())["new"]
    assert not (out.path / "seed_0").exists()  # the dead run's files go
    assert (out.path / "notes.txt").read_text() == "not canter's"  # anything else stays
    with pytest.raises(ConfigError, match="is in use"):  # this process holds it now
        RunDir(out.path).lock()
    out.unlock()
    assert not (out.path / "run.lock").exists()  # the killed holder's file went with the lock


def test_run_lock_goes_with_its_holder_and_a_late_opener_never_shares_the_directory(
    tmp_path, monkeypatch
):
    # run.lock is unlinked by its holder as it lets go (common/run/rundir.py): a process that
    # opened the file before the unlink and locks it after must see that it holds a file no
    # longer in the directory, and try the one there now, which a third process may hold.
    # (flock locks of two opens conflict within one process as between two.)
    import fcntl

    from canter.common.run import rundir

    holder, late, third = (rundir.RunDir(tmp_path) for _ in range(3))
    holder.lock()
    assert (tmp_path / "run.lock").exists()
    real, interleaved = fcntl.flock, []

    def flock(fd: int, operation: int) -> None:
        if not interleaved:  # between the late opener's open and its flock
            interleaved.append(fd)
            holder.unlock()  # the holder ends...
            assert not (tmp_path / "run.lock").exists()
            third.lock()  # ...and a third process takes the directory
        real(fd, operation)

    monkeypatch.setattr(rundir.fcntl, "flock", flock)
    with pytest.raises(ConfigError, match="is in use"):
        late.lock()
    assert interleaved and late._lock is None and third._lock is not None
    monkeypatch.setattr(rundir.fcntl, "flock", real)
    third.unlock()
    assert not (tmp_path / "run.lock").exists()
    late.lock()  # free again: taken, on a new run.lock
    late.unlock()


def test_a_foreign_config_json_is_never_taken_for_an_abandoned_run(tmp_path):
    from canter.common.run.rundir import RunDir

    (tmp_path / "config.json").write_text('{"model": "not canter"}')
    out = RunDir(tmp_path)
    assert not out.abandoned() and out.holds_run()
    with pytest.raises(ConfigError, match="already holds a run"):
        out.claim({"algo": "ppo", "format": 3})
    assert json.loads((tmp_path / "config.json").read_text()) == {"model": "not canter"}


def test_the_runner_takes_an_abandoned_directory_and_says_so(tmp_path, capsys):
    run_dir = abandoned_run(tmp_path / "run")
    result = trainer.run(SMALL, ppo.make_train, algo="ppo", run_dir=run_dir)
    assert (
        "its earlier run ended before its first checkpoint; replacing it" in capsys.readouterr().out
    )
    assert (run_dir / "checkpoint.eqx").is_file() and result.summary["complete"]
    assert len((run_dir / "seed_0" / "metrics.csv").read_text().splitlines()) > 2

"""Evaluation cadence: `eval_every` counts env steps per seed in every algorithm; the run says
how many evaluations it makes; an interval's training return is its last iteration's with ended
episodes; a short run's curve still shows its points; older run directories, whose eval_every
counted iterations, are refused with that reason."""

import dataclasses
import json
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import (
    dqn,
    ppo,
    ppo_atari,
    ppo_continuous,
    ppo_rnd,
    ppo_rnn,
    ppo_trxl,
    pqn,
    pqn_rnn,
    sac,
    td3,
    trainer,
)
from canter.algorithms.trainer import interval_metrics
from canter.common.config import ConfigError
from canter.common.run import checkpoint
from canter.common.run.batch import make_batch
from canter.common.run.report import learning_curve_figure
from canter.common.run.rundir import RunDir

from tests.checks import needs

MODULES = [ppo, ppo_continuous, ppo_rnn, ppo_rnd, ppo_trxl, ppo_atari, dqn, pqn, pqn_rnn, sac, td3]
# ppo_atari's default env is an Atari game: its case needs the atari extra.
CASES = [pytest.param(m, marks=needs("ale_py", "atari")) if m is ppo_atari else m for m in MODULES]


@pytest.mark.parametrize("module", CASES, ids=lambda m: m.__name__.split(".")[-1])
def test_the_same_eval_every_means_the_same_env_steps_in_every_algorithm(module):
    default = module.make_train(module.Config())
    per = default.env_steps_per_iteration
    # 61,440 env steps is whole iterations for every default (512, 1,024, 4,096, 2,048, 10, 1).
    config = dataclasses.replace(module.Config(), total_timesteps=8 * 61_440, eval_every=61_440)
    train = module.make_train(config)
    assert 61_440 % per == 0
    assert train.eval_every == 61_440 and train.num_intervals == 8
    assert [train.env_steps(i) for i in range(8)] == [61_440 * (i + 1) for i in range(8)]
    # Every default eval_every is whole iterations, so rounding down leaves it as the flag says.
    assert module.Config().eval_every % per == 0
    assert default.eval_every == module.Config().eval_every


def test_eval_every_is_rounded_down_to_whole_iterations_and_capped_at_the_run():
    config = ppo.Config(total_timesteps=512 * 10, eval_every=1_000)  # 512 env steps per iteration
    assert ppo.make_train(config).eval_every == 512
    assert ppo.make_train(config).num_intervals == 10
    longer = dataclasses.replace(config, eval_every=10**9)
    assert ppo.make_train(longer).num_intervals == 1
    assert ppo.make_train(longer).interval_iterations == 10  # no skipped iterations


def test_eval_every_under_one_iteration_evaluates_after_every_iteration():
    # A larger iteration (`--num-envs 256`) under the default eval_every is not an error.
    train = ppo.make_train(ppo.Config(eval_every=100, total_timesteps=512 * 3))
    assert train.interval_iterations == 1 and train.eval_every == 512


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_the_cli_says_how_many_evaluations_and_how_often(repo_root, tmp_path):
    command = [
        sys.executable,
        str(repo_root / "algorithms" / "ppo.py"),
        "--total-timesteps",
        "2048",
        "--eval-every",
        "1000",
        "--num-eval-envs",
        "2",
        "--run-dir",
        str(tmp_path / "run"),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = "4 evaluations, every 512 env steps of 2,048 (eval_every 1,000 in whole iterations"
    assert line in done.stdout, done.stdout
    rows = (tmp_path / "run" / "seed_0" / "metrics.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[1]) for row in rows] == [512, 1024, 1536, 2048]


@pytest.mark.parametrize("points", [1, 2])
def test_a_curve_with_one_or_two_points_shows_them(points):
    import matplotlib.pyplot as plt

    config = ppo.Config(num_seeds=2)
    steps = [200_000 * (i + 1) for i in range(points)]
    curve = np.arange(2 * points, dtype=float).reshape(2, points)
    metrics = {group: {"episodic_return": curve} for group in ("train", "eval")}
    fig = learning_curve_figure(make_batch(config), steps, metrics, "ppo on CartPole-v1")
    fig.canvas.draw()
    for ax in fig.axes:
        (line,) = ax.lines
        assert line.get_marker() == "o"  # a single point is drawn, not an invisible line
        low, high = ax.get_xlim()
        assert low == 0 and high > steps[-1]
        labels = [label.get_text() for label in ax.get_xticklabels()]
        assert "200k" in labels and all(len(label) <= 5 for label in labels), labels
    plt.close(fig)


@pytest.mark.slow  # 20-30 s on 2 busy cores: CLI processes or benchmark runs
def test_a_run_directory_from_before_env_step_eval_every_is_not_resumed(tmp_path):
    config = ppo.Config(total_timesteps=4 * 16 * 2, num_envs=4, num_steps=16, eval_every=64)
    result = trainer.run(
        config,
        ppo.make_train,
        algo="ppo",
        run_dir=tmp_path / "run",
        verbose=False,
    )
    config_file = result.run_dir / "config.json"
    record = json.loads(config_file.read_text())
    assert record["format"] == 3
    assert RunDir(result.run_dir).load_config(ppo.Config)[1] == config  # evaluate.py reads it
    del record["format"]  # what a run written before the change holds
    config_file.write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="format 1 counted eval_every in iterations"):
        RunDir(result.run_dir).load_config(ppo.Config)  # its checkpoint would not load
    saved = result.run_dir / "checkpoint.eqx"
    header, payload = checkpoint.read_header(saved)
    del header["config"]["format"]
    head = json.dumps(header).encode()
    saved.write_bytes(checkpoint.MAGIC + len(head).to_bytes(8, "little") + head + payload)
    with pytest.raises(ConfigError, match="format 1 counted eval_every in iterations"):
        trainer.run(config, ppo.make_train, algo="ppo", run_dir=result.run_dir, resume=True)


def test_an_interval_reports_its_last_iteration_with_ended_episodes():
    nan = np.nan
    iterations = {
        "episodic_return": jnp.array([5.0, 7.0, nan, nan]),
        "episodic_length": jnp.array([50.0, 70.0, nan, nan]),
        "episodes": jnp.array([2.0, 3.0, 0.0, nan]),  # the last iteration skipped (`when`)
        "value_loss": jnp.array([1.0, 2.0, 3.0, nan]),
    }
    got = interval_metrics(iterations)
    assert float(got["episodic_return"]) == 7.0 and float(got["episodic_length"]) == 70.0
    assert float(got["episodes"]) == 5.0
    assert float(got["value_loss"]) == 2.0
    none = interval_metrics({**iterations, "episodes": jnp.array([0.0, 0.0, 0.0, nan])})
    assert np.isnan(none["episodic_return"]) and float(none["episodes"]) == 0.0

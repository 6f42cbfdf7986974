"""QR-DQN: the target samples and the loss against loops, the run's invariants, probes,
resume, CLI, CartPole learning (the quantile Huber loss itself: tests/test_distributional.py)."""

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import qr_dqn, trainer

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_resume_equals_whole_run,
    cli_run,
)
from tests.test_distributional import quantile_loss_loop
from tests.test_invariants import assert_trees_close, counting

# --- math against loops


def test_target_takes_the_greedy_valid_actions_quantiles():
    rng = np.random.default_rng(0)
    quantiles = rng.normal(size=(4, 3, 5)).astype(np.float32)
    reward = np.array([1.0, -0.5, 0.3, 2.0], np.float32)
    terminated = np.array([False, True, False, False])
    mask = np.array([[True, True, True], [True, False, True], [False, True, True], [False] * 3])
    got = qr_dqn.quantile_target(*map(jnp.asarray, (reward, terminated, quantiles, mask)), 0.9)
    expected = np.zeros((4, 5))
    for b in range(4):
        means = [quantiles[b, a].mean() if mask[b, a] else -np.inf for a in range(3)]
        bootstrap = not terminated[b] and mask[b].any()
        expected[b] = reward[b] + 0.9 * bootstrap * quantiles[b, int(np.argmax(means))]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


# --- invariants

TINY = qr_dqn.Config(
    total_timesteps=4 * 60,
    num_envs=4,
    train_frequency=2,
    gradient_steps=3,
    buffer_size=64,
    batch_size=8,
    learning_starts=40,
    target_network_frequency=16,
    eval_every=4 * 20,
    num_eval_envs=2,
    num_quantiles=7,
    hidden_sizes=(16,),
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(qr_dqn.make_train(TINY))
    result = jax.jit(jax.vmap(train))(trainer.seed_keys(0, 3))
    assert counts == {"step": 1, "act": 1}  # traced once
    return result


def test_leaves_metrics_schedules_and_seeds(vmapped):
    state, metrics = vmapped
    assert_episodes_read_and_cleared(state, metrics)
    assert {"loss", "q_values", "episodic_return", "epsilon"} <= set(metrics["train"])
    assert metrics["train"]["loss"].shape == (3, 3)
    assert np.all(np.isfinite(metrics["train"]["loss"]))  # warm-up ends inside interval 1
    # 60 iterations of 4 env steps; 2 training phases of 3 updates each once 40 env steps are
    # reached (iteration 10).
    assert int(state.opt_state[0].count[0]) == 2 * 3 * (60 - 9)
    assert_trees_close(state.target_network, state.quantile_network, rtol=0, atol=0)
    weights = state.quantile_network.layers[0].weight
    assert not np.allclose(weights[0], weights[1])  # seeds differ


def test_the_loss_is_the_papers_at_the_midpoint_fractions():
    # The update's loss on a batch, recomputed pair by pair with the fractions (2i + 1) / 2N.
    config = dataclasses.replace(TINY, kappa=2.0)
    network = qr_dqn.QuantileNetwork((4,), 2, config, jax.random.key(0))
    obs = jax.random.normal(jax.random.key(1), (5, 4))
    taken = np.asarray(jax.vmap(network)(obs)[:, 1])
    target = np.asarray(jax.random.normal(jax.random.key(2), (5, 7)))
    taus = np.tile((2 * np.arange(7) + 1) / 14, (5, 1))
    got = qr_dqn.quantile_huber_loss(
        jnp.asarray(taken), jnp.asarray(target), qr_dqn.quantile_midpoints(7)[None], 2.0
    )
    assert float(got) == pytest.approx(quantile_loss_loop(taken, target, taus, 2.0), rel=1e-5)


# --- probes, resume, command line


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_probe_discount_learns_the_discounted_value():
    config = dataclasses.replace(
        TINY,
        env="ProbeDiscount",
        total_timesteps=4 * 1500,
        eval_every=4 * 1500,
        train_frequency=4,
        gradient_steps=1,
        buffer_size=1000,
        batch_size=64,
        learning_starts=200,
        target_network_frequency=100,
        learning_rate=1e-3,
        end_e=1.0,
        gamma=0.5,
        hidden_sizes=(32, 32),
    )
    state, _ = jax.jit(qr_dqn.make_train(config))(jax.random.key(0))
    q = jax.vmap(state.quantile_network.q_values)(jnp.array([[0.0], [1.0]]))
    np.testing.assert_allclose(q[:, 0], [0.5, 1.0], atol=0.05)  # 0.5 * 1, then 1


@pytest.mark.slow  # three runs compile
def test_resume_equals_the_whole_run(tmp_path):
    config = dataclasses.replace(TINY, num_seeds=2)
    assert_resume_equals_whole_run(config, qr_dqn.make_train, "qr_dqn", tmp_path)


@pytest.mark.slow  # 30-45 s on 2 busy cores: a CLI run and evaluation
def test_cli_preset_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = ["--preset", "Acrobot-v1", "--total-timesteps", "400", "--learning-starts", "100"]
    args += ["--eval-every", "200", "--num-quantiles", "5", "--hidden-sizes", "32"]
    run_dir = tmp_path / "run"
    done = cli_run(
        "qr_dqn", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(run_dir)
    )
    assert done.returncode == 0, done.stderr
    config = json.loads((run_dir / "config.json").read_text())
    assert config["env"] == "Acrobot-v1" and config["num_quantiles"] == 5
    assert config["target_network_frequency"] == 250  # the preset's, under the flags
    assert_evaluates_and_renders(run_dir, tmp_path / "episode.gif", 2)


# --- learning


@pytest.mark.learning_extra
def test_qr_dqn_cartpole_reaches_reference_return():
    # rl-baselines3-zoo's tuned CartPole-v1 configuration (the defaults), 5e4 env steps, 4 seeds;
    # the zoo's benchmark.md: 500.0 +- 0.0 (one agent). Measured 2026-12-07, final greedy
    # evaluation: seeds 0-7 by returns.py 494.4 +- 14.8 (seven at 500); seeds 0-3 here, under
    # the test tiers' XLA flags, 500, 500, 219, 340 (mean 390); a 2-seed run 253 and 500. The
    # zoo's lr 2.3e-3 with 128 updates a burst is unstable late: seeds at 500 by 2.6e4 fall back
    # and recover. The claim: half the seeds end solved, the mean far above a random policy's 22.
    result = trainer.run(
        qr_dqn.Config(num_seeds=4), qr_dqn.make_train, algo="qr_dqn", verbose=False
    )
    returns = result.metrics["eval"]["episodic_return"][:, -1]
    assert (returns >= 475).sum() >= 2 and returns.mean() >= 350, returns

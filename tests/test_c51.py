"""C51: the target distribution against a loop, the run's invariants, probes, resume, CLI,
CartPole learning (the projection itself: tests/test_distributional.py)."""

import dataclasses
import json

import jax
import numpy as np
import pytest
from canter.algorithms import c51, trainer
from canter.common.config import ConfigError

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_resume_equals_whole_run,
    cli_run,
)
from tests.test_distributional import cleanrl_projection
from tests.test_invariants import assert_trees_close, counting

# --- math against a loop


def test_target_projects_the_greedy_valid_actions_distribution():
    rng = np.random.default_rng(0)
    support = np.linspace(-5.0, 5.0, 11)
    logits = rng.normal(size=(4, 3, 11)).astype(np.float32)
    reward = np.array([1.0, -0.5, 0.3, 2.0], np.float32)
    terminated = np.array([False, True, False, False])
    mask = np.array([[True, True, True], [True, False, True], [False, True, True], [False] * 3])
    got = c51.categorical_target(
        *map(jax.numpy.asarray, (reward, terminated, logits, mask, support)), 0.9
    )
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    expected = []
    for b in range(4):
        means = [probs[b, a] @ support if mask[b, a] else -np.inf for a in range(3)]
        best = int(np.argmax(means))
        # Terminated, or no valid next action: nothing bootstraps, the mass sits on the reward.
        discount = 0.0 if terminated[b] or not mask[b].any() else 0.9
        expected.append(cleanrl_projection(probs[b, best][None], [reward[b]], [discount], support))
    np.testing.assert_allclose(got, np.concatenate(expected), atol=1e-6)


def test_cross_entropy_is_minimal_at_the_target():
    target = jax.nn.softmax(jax.numpy.array([[0.3, -1.0, 2.0]]))
    at_target = c51.cross_entropy(jax.numpy.log(target), target)
    assert float(at_target) < float(c51.cross_entropy(jax.numpy.zeros((1, 3)), target))
    assert float(at_target) == pytest.approx(float(-(target * np.log(target)).sum()), rel=1e-5)


# --- invariants

TINY = c51.Config(
    total_timesteps=4 * 60,
    num_envs=4,
    train_frequency=2,
    buffer_size=64,
    batch_size=8,
    learning_starts=40,
    target_network_frequency=16,
    eval_every=4 * 20,
    num_eval_envs=2,
    num_atoms=11,
    v_min=-10.0,
    v_max=10.0,
    hidden_sizes=(16,),
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(c51.make_train(TINY))
    result = jax.jit(jax.vmap(train))(trainer.seed_keys(0, 3))
    assert counts == {"step": 1, "act": 1}  # traced once
    return result


def test_leaves_metrics_schedules_and_seeds(vmapped):
    state, metrics = vmapped
    assert_episodes_read_and_cleared(state, metrics)
    assert {"loss", "q_values", "episodic_return", "epsilon"} <= set(metrics["train"])
    assert metrics["train"]["loss"].shape == (3, 3)
    assert np.all(np.isfinite(metrics["train"]["loss"]))  # warm-up ends inside interval 1
    # 60 iterations of 4 env steps, 2 updates each once 40 env steps are reached (iteration 10).
    assert int(state.opt_state[0].count[0]) == 2 * (60 - 9)
    # Last env step 240 is a multiple of 16: the hard target copy just happened.
    assert_trees_close(state.target_network, state.q_network, rtol=0, atol=0)
    weights = state.q_network.layers[0].weight
    assert not np.allclose(weights[0], weights[1])  # seeds differ
    # The atoms are never trained: every seed's are those it started with.
    support = np.asarray(state.q_network.support)
    np.testing.assert_allclose(support[1], np.linspace(-10, 10, 11), atol=1e-5)
    assert (support == support[0]).all()


def test_bad_support_is_refused_before_tracing():
    with pytest.raises(ConfigError, match="v_min = 5.0 must be below v_max = -5.0"):
        c51.make_train(dataclasses.replace(TINY, v_min=5.0, v_max=-5.0))
    with pytest.raises(ConfigError, match="num_atoms = 1"):
        c51.make_train(dataclasses.replace(TINY, num_atoms=1))


# --- probes, resume, command line


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_probe_action_dependent_reward_learns_both_distributions():
    config = dataclasses.replace(
        TINY,
        env="ProbeAction",
        total_timesteps=4 * 1500,
        eval_every=4 * 1500,
        buffer_size=1000,
        batch_size=64,
        learning_starts=200,
        target_network_frequency=100,
        learning_rate=1e-3,
        end_e=1.0,
        v_min=-2.0,
        v_max=2.0,
        hidden_sizes=(32, 32),
    )
    state, metrics = jax.jit(c51.make_train(config))(jax.random.key(0))
    obs = jax.numpy.array([[0.0], [1.0]])
    q = jax.vmap(state.q_network.q_values)(obs)
    np.testing.assert_allclose(q, [[1.0, 0.0], [0.0, 1.0]], atol=0.1)  # one-step rewards 0 or 1
    assert float(metrics["eval"]["episodic_return"][-1]) == 1.0


@pytest.mark.slow  # three runs compile
def test_resume_equals_the_whole_run(tmp_path):
    assert_resume_equals_whole_run(
        dataclasses.replace(TINY, num_seeds=2), c51.make_train, "c51", tmp_path
    )


@pytest.mark.slow  # 30-45 s on 2 busy cores: a CLI run and evaluation
def test_cli_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = ["--total-timesteps", "400", "--learning-starts", "100", "--eval-every", "200"]
    args += ["--num-atoms", "21", "--v-min", "-20", "--v-max", "20", "--hidden-sizes", "32"]
    done = cli_run(
        "c51", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 0, done.stderr
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["num_atoms"] == 21 and config["v_min"] == -20.0
    assert_evaluates_and_renders(tmp_path / "run", tmp_path / "episode.gif", 2)


# --- learning


@pytest.mark.learning
def test_c51_cartpole_reaches_reference_return():
    # CleanRL's c51.py CartPole settings (the defaults) on 10 envs, 5e5 env steps, 4 seeds; CleanRL
    # publishes 481.20 +- 20.53 (c51.py) and 491.07 +- 9.70 (c51_jax.py), docs/rl-algorithms/c51.md.
    # One evaluation, at the end, every seed checked.
    config = c51.Config(num_seeds=4, eval_every=500_000)
    result = trainer.run(config, c51.make_train, algo="c51", verbose=False)
    returns = result.metrics["eval"]["episodic_return"][:, -1]
    assert np.all(returns >= 450), returns
    assert result.summary["eval_return_mean"] >= 475, result.summary

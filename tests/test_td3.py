"""TD3: smoothed targets, delayed updates, probes, invariants, CLI, Pendulum learning."""

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import td3, trainer
from canter.common.config import ConfigError

from tests.checks import (
    assert_episodes_read_and_cleared,
    assert_evaluates_and_renders,
    assert_refused_before_compiling,
    cli_run,
)
from tests.test_invariants import assert_trees_close, counting

# --- math against NumPy


def test_smoothed_target_action_matches_reference():
    rng = np.random.default_rng(0)
    target_action = rng.uniform(-2, 2, size=(64, 2)).astype(np.float32)
    noise = rng.normal(size=(64, 2)).astype(np.float32)
    scale, low, high = np.array([2.0, 0.5]), np.array([-2.0, 0.0]), np.array([2.0, 1.0])
    args = map(jnp.array, (target_action, noise, 0.5, scale, low, high))
    smoothed = td3.smoothed_target_action(*args)
    expected = np.clip(target_action + np.clip(noise, -0.5, 0.5) * scale, low, high)
    np.testing.assert_allclose(smoothed, expected, rtol=1e-6)
    assert np.any(np.abs(noise) > 0.5) and np.any(expected == high)  # both clips exercised


def test_td3_target_matches_reference():
    rng = np.random.default_rng(1)
    reward, next_q = rng.normal(size=16), rng.normal(size=(16, 2))
    terminated = rng.random(16) < 0.3
    target = td3.td3_target(*map(jnp.array, (reward, terminated, next_q)), 0.9)
    expected = reward + 0.9 * (~terminated) * next_q.min(axis=1)
    np.testing.assert_allclose(target, expected, rtol=1e-5, atol=1e-6)


# --- probes and replay contents


def probe_config(env: str, **overrides) -> td3.Config:
    config = td3.Config(
        env=env,
        total_timesteps=4 * 750,
        num_envs=4,
        train_frequency=4,
        buffer_size=3000,
        batch_size=64,
        learning_starts=200,
        learning_rate=3e-3,
        tau=0.05,
        eval_every=4 * 750,
        num_eval_envs=4,
        hidden_size=32,
    )
    return dataclasses.replace(config, **overrides)


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_probe_action_dependent_reward_uses_the_action_scale():
    # Best actions +-1.5 lie outside [-1, 1]: reachable only through the action scale 2.
    train = td3.make_train(probe_config("ProbeContinuousAction"))
    state, metrics = jax.jit(train)(jax.random.key(0))
    out = jax.vmap(state.agent.actor)(jnp.array([[-1.5], [1.5]]))
    np.testing.assert_allclose(2.0 * jnp.tanh(out[:, 0]), [-1.5, 1.5], atol=0.1)
    assert float(metrics["eval"]["episodic_return"][-1]) > -0.02


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_probe_time_limit_is_not_a_termination():
    # Reward 1 forever, cut by a 3-step limit the observation does not show; gamma 0.5.
    config = probe_config("ProbeContinuousTimeLimit", gamma=0.5)
    state, _ = jax.jit(td3.make_train(config))(jax.random.key(0))
    q = jax.vmap(state.agent.critic)(jnp.zeros((3, 1)), jnp.array([[-1.0], [0.0], [1.0]]))
    # Bootstrapping through the limit: Q = 1 / (1 - 0.5) = 2; cutting it: about 1.42.
    np.testing.assert_allclose(q, 2.0, atol=0.1)


# --- invariants

# On ProbeContinuousClock (observation time / 3, a 3-step limit), so the replay test can see
# which observation was stored after a truncation.
TINY = td3.Config(
    env="ProbeContinuousClock",
    total_timesteps=2 * 60,
    num_envs=2,
    train_frequency=1,
    buffer_size=128,
    batch_size=8,
    learning_starts=40,
    eval_every=2 * 20,
    num_eval_envs=2,
    hidden_size=16,
)


@pytest.fixture(scope="module")
def vmapped():
    train, counts = counting(td3.make_train(TINY))
    compiled = jax.jit(jax.vmap(train))
    compiled(trainer.seed_keys(7, 3))
    result = compiled(trainer.seed_keys(0, 3))
    assert counts == {"step": 1, "act": 1}  # traced once, whatever the keys
    return result


def test_every_leaf_is_an_array_and_metrics_have_their_shape(vmapped):
    state, metrics = vmapped
    assert_episodes_read_and_cleared(state, metrics)
    for leaf in jax.tree.leaves((state, metrics)):
        assert isinstance(leaf, jax.Array), type(leaf)
    expected = {"value_loss", "actor_loss", "q_values", "episodic_return"}
    assert expected <= set(metrics["train"])
    assert metrics["train"]["actor_loss"].shape == (3, 3)
    assert np.all(np.isfinite(metrics["train"]["actor_loss"]))


def test_delayed_updates_count_critic_updates(vmapped):
    state, _ = vmapped
    # 60 iterations of 2 env steps, 2 updates each once 40 env steps are reached (iteration 20):
    # 82 critic updates, and the actor (and targets) every second one.
    assert int(state.agent.critic_opt_state[0].count[0]) == 82
    assert int(state.agent.actor_opt_state[0].count[0]) == 41
    online = state.agent.critic.nets.layers[0].weight[0]
    assert not np.allclose(state.agent.target_critic.nets.layers[0].weight[0], online)


def test_replay_stores_the_final_observation_of_truncated_episodes(vmapped):
    data = jax.tree.map(lambda x: np.asarray(x[0, :120]), vmapped[0].buffer.data)  # seed 0
    obs, next_obs = (np.round(3 * x[:, 0]).tolist() for x in (data.obs, data.next_obs))
    # Observations 0, 1/3, 2/3 lead to 1/3, 2/3 and the final 1.0, never to the reset 0.
    assert set(zip(obs, next_obs, strict=True)) == {(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)}
    # Warm-up actions (the first 40 env steps) are uniform over the whole box [-2, 2]^2.
    warm_up = data.action[:40]
    assert warm_up.min() < -1.5 and warm_up.max() > 1.5 and np.all(np.abs(warm_up) <= 2.0)


@pytest.mark.slow  # programs compiled for this test alone
def test_vmapped_seed_equals_single_run(vmapped):
    single = jax.jit(td3.make_train(TINY))(jax.random.key(1))
    assert_trees_close(jax.tree.map(lambda x: x[1], vmapped), single, rtol=1e-4, atol=1e-5)


def test_seeds_differ(vmapped):
    state, _ = vmapped
    weights = state.agent.actor.layers[0].weight
    assert not np.allclose(weights[0], weights[1])
    assert not np.allclose(state.buffer.data.action[0], state.buffer.data.action[1])


# --- command line


@pytest.mark.slow  # 30-45 s on 2 busy cores: compiles and runs
def test_cli_smoke_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = ["--total-timesteps", "300", "--learning-starts", "100", "--eval-every", "150"]
    done = cli_run(
        "td3", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(tmp_path / "run")
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["algo"] == "td3" and summary["seeds"] == [0, 1]
    assert summary["env_steps"] == 300 and math.isfinite(summary["eval_return_mean"])
    assert_evaluates_and_renders(tmp_path / "run", tmp_path / "episode.gif", 2)


def test_cli_bad_input_fails_before_compiling(tmp_path, monkeypatch, capsys):
    args, needles = (
        ["--env", "CartPole-v1"],
        ["discrete action space", "td3.py", "algorithms/dqn.py"],
    )
    assert_refused_before_compiling("td3", args, needles, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(
    "overrides, needles",
    [
        (dict(num_envs=4, train_frequency=3), ["train_frequency = 3", "num_envs = 4"]),
        (dict(total_timesteps=0), ["Out of range", "total_timesteps = 0"]),
        (dict(policy_frequency=0), ["Out of range", "policy_frequency = 0"]),
    ],
)
def test_bad_config_raises_config_error(overrides, needles):
    # The same ConfigError the CLI turns into exit code 2, checked in-process (no jax import).
    with pytest.raises(ConfigError) as error:
        td3.make_train(dataclasses.replace(td3.Config(), **overrides))
    for needle in needles:
        assert needle in str(error.value)


# --- learning


@pytest.mark.learning
def test_td3_pendulum_reaches_target_return():
    # The defaults (CleanRL's TD3 with 64-unit networks), 5e4 env steps, 4 seeds.
    config = td3.Config(env="Pendulum-v1", num_seeds=4)
    result = trainer.run(config, td3.make_train, algo="td3", verbose=False)
    assert result.summary["eval_return_mean"] >= -250, result.summary

"""PPO on probe environments with known values and best actions, a few seconds each."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.algorithms import ppo


def train_probe(env: str, gamma: float = 0.99):
    config = ppo.Config(
        env=env,
        total_timesteps=8 * 16 * 60,
        num_envs=8,
        num_steps=16,
        learning_rate=3e-3,
        gamma=gamma,
        eval_every=8 * 16 * 20,
    )
    state, metrics = jax.jit(ppo.make_train(config))(jax.random.key(0))
    return state, metrics


def values(state, observations):
    obs = jnp.array(observations, jnp.float32)[:, None]
    return jax.vmap(state.model.value)(obs)


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_constant_reward():
    state, _ = train_probe("ProbeConstant")
    assert float(values(state, [0.0])[0]) == pytest.approx(1.0, abs=0.05)


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_observation_dependent_reward():
    state, _ = train_probe("ProbeObsReward")
    v = values(state, [-1.0, 1.0])
    assert float(v[0]) == pytest.approx(-1.0, abs=0.05)
    assert float(v[1]) == pytest.approx(1.0, abs=0.05)


@pytest.mark.slow  # a probe program compiles: 7-11 s on 2 busy cores
def test_one_step_discount():
    state, _ = train_probe("ProbeDiscount", gamma=0.5)
    v = values(state, [0.0, 1.0])
    assert float(v[0]) == pytest.approx(0.5, abs=0.05)
    assert float(v[1]) == pytest.approx(1.0, abs=0.05)


def test_action_dependent_reward():
    state, metrics = train_probe("ProbeAction")
    logits = jax.vmap(state.model.actor)(jnp.array([[0.0], [1.0]]))
    assert jnp.argmax(logits, axis=-1).tolist() == [0, 1]
    assert float(metrics["eval"]["episodic_return"][-1]) == 1.0


def test_time_limit_is_not_a_termination():
    gamma = 0.5
    state, metrics = train_probe("ProbeTimeLimit", gamma=gamma)
    # 3-step episodes with reward 1; an interval is 20 iterations of 16 steps on 8 envs.
    steps = 20 * 16
    ends = [sum(t % 3 == 0 for t in range(i * steps + 1, (i + 1) * steps + 1)) for i in range(3)]
    np.testing.assert_array_equal(metrics["train"]["episodes"], 8 * np.array(ends))
    np.testing.assert_array_equal(metrics["train"]["episodic_return"], [3.0, 3.0, 3.0])
    np.testing.assert_array_equal(metrics["train"]["episodic_length"], [3.0, 3.0, 3.0])
    true_value = 1.0 / (1.0 - gamma)  # 2.0
    # Cutting the bootstrap at the 3-step limit would average 1.75, 1.5 and 1: about 1.42.
    as_termination = sum((1 - gamma ** (3 - t)) / (1 - gamma) for t in range(3)) / 3
    v = float(values(state, [0.0])[0])
    assert v == pytest.approx(true_value, abs=0.1)
    assert abs(v - as_termination) > 0.4


@pytest.mark.slow  # 15-30 s on 2 busy cores: programs compiled for this test alone
def test_final_observations_kept_in_slots_give_the_numbers_of_valuing_every_step(monkeypatch):
    # ProbeClock truncates every 3 steps, and its final observation (1.0) is one no step acts
    # on: rollouts of 3 steps keep it in one slot per env; with the gap unknown, the critic
    # values every step's final observation in the rollout instead. The same run either way.
    config = ppo.Config(
        env="ProbeClock",
        total_timesteps=8 * 3 * 12,
        num_envs=8,
        num_steps=3,
        num_minibatches=2,
        gamma=0.9,
        eval_every=8 * 3 * 4,
    )
    assert ppo.truncation_gap(*ppo.make_env("ProbeClock")) == 3
    _, slots = jax.jit(ppo.make_train(config))(jax.random.key(1))
    monkeypatch.setattr(ppo, "truncation_gap", lambda env, params: None)
    _, every_step = jax.jit(ppo.make_train(config))(jax.random.key(1))
    for name in ("value_loss", "policy_loss", "explained_variance"):
        got, want = slots["train"][name], every_step["train"][name]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=name)
    assert float(slots["train"]["value_loss"][0]) > 0.0

"""make_env validation, flattening and the fixed-shape episode statistics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from common.config import ConfigError
from common.envs import env_names, make_env
from common.wrappers import episode_metrics


def test_unknown_env_lists_valid_names():
    with pytest.raises(ConfigError) as error:
        make_env("CartPole-v9")
    message = str(error.value)
    assert "CartPole-v9" in message and "CartPole-v1" in message and "Breakout-MinAtar" in message
    assert set(env_names()) >= {"CartPole-v1", "Pendulum-v1", "ProbeConstant"}


def test_action_kind_mismatch_names_the_kind():
    with pytest.raises(ConfigError, match="continuous action space"):
        make_env("Pendulum-v1", action="discrete", algorithm="ppo.py")
    with pytest.raises(ConfigError, match="discrete action space.*algorithms/ppo.py"):
        make_env("CartPole-v1", action="continuous", algorithm="sac.py")


def test_minatar_observations_are_flat():
    env, params = make_env("Breakout-MinAtar", action="discrete")
    assert env.observation_space(params).shape == (400,)
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (400,) and obs.dtype == jnp.float32
    obs, state, _, _, _, info = env.step(jax.random.key(1), state, 0, params)
    assert obs.shape == (400,) and info["final_observation"].shape == (400,)


def test_episode_statistics_and_validity_flag():
    env, params = make_env("ProbeTimeLimit")  # reward 1 per step, 3-step episodes
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    keys = jax.random.split(jax.random.key(0), 2)
    _, state = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    actions = jnp.zeros(2, jnp.int32)
    for t in range(1, 8):
        _, state, _, _, truncated, _ = step(keys, state, actions, params)
        metrics = episode_metrics(state)
        if t < 3:
            assert not state.has_returned.any()
            assert np.isnan(metrics["episodic_return"])
        else:
            assert state.has_returned.all()
            assert float(metrics["episodic_return"]) == 3.0
            assert float(metrics["episodic_length"]) == 3.0
        assert bool(truncated.all()) == (t % 3 == 0)
    assert state.episode_length.tolist() == [1, 1]

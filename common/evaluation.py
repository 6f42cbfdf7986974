"""Policy evaluation on fresh environments: fixed shapes, bounded by the env's episode limit."""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray


def run_episodes(
    env: Any,
    env_params: Any,
    policy: Callable[[Float[Array, "num_envs obs_dim"]], Array],
    key: PRNGKeyArray,
    num_envs: int,
) -> dict[str, Float[Array, ""]]:
    """Mean return and length of one episode on each of `num_envs` fresh environments.

    `policy` maps a batch of observations to a batch of actions (greedy or deterministic).
    Runs exactly the env's `max_steps_in_episode` steps: a fixed-length scan rather than a
    while loop, whose "all done?" test would couple vmapped seeds and, sharded, need a
    cross-device reduction every step.
    """
    reset_key, key = jax.random.split(key)
    reset_keys = jax.random.split(reset_key, num_envs)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, env_params)
    env_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def step(carry: tuple, step_key: PRNGKeyArray) -> tuple[tuple, None]:
        obs, env_state, returns, lengths, done = carry
        step_keys = jax.random.split(step_key, num_envs)
        obs, env_state, reward, terminated, truncated, _ = env_step(
            step_keys, env_state, policy(obs), env_params
        )
        returns = returns + jnp.where(done, 0.0, reward)
        lengths = lengths + jnp.where(done, 0, 1)
        done = done | terminated | truncated
        return (obs, env_state, returns, lengths, done), None

    zeros = jnp.zeros(num_envs)
    carry = (obs, env_state, zeros, zeros, jnp.zeros(num_envs, bool))
    step_keys = jax.random.split(key, int(env_params.max_steps_in_episode))
    (_, _, returns, lengths, _), _ = jax.lax.scan(step, carry, step_keys)
    return {"episodic_return": returns.mean(), "episodic_length": lengths.mean()}


def run_recurrent_episodes(
    env: Any,
    env_params: Any,
    policy: Callable[[Float[Array, "num_envs obs_dim"], Any], tuple[Array, Any]],
    carry: Any,
    key: PRNGKeyArray,
    num_envs: int,
) -> dict[str, Float[Array, ""]]:
    """`run_episodes` for a policy with memory: `policy(obs, carry) -> (actions, carry)`.

    `carry` is the policy's state at the start of an episode (e.g. zero GRU hidden states, one
    row per env); each env plays one episode, so the carry never needs resetting here. The same
    keys and fixed-length scan as `run_episodes`, so a policy that ignores its carry scores the
    same under both.
    """
    reset_key, key = jax.random.split(key)
    reset_keys = jax.random.split(reset_key, num_envs)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, env_params)
    env_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def step(loop: tuple, step_key: PRNGKeyArray) -> tuple[tuple, None]:
        obs, carry, env_state, returns, lengths, done = loop
        step_keys = jax.random.split(step_key, num_envs)
        action, carry = policy(obs, carry)
        obs, env_state, reward, terminated, truncated, _ = env_step(
            step_keys, env_state, action, env_params
        )
        returns = returns + jnp.where(done, 0.0, reward)
        lengths = lengths + jnp.where(done, 0, 1)
        done = done | terminated | truncated
        return (obs, carry, env_state, returns, lengths, done), None

    zeros = jnp.zeros(num_envs)
    loop = (obs, carry, env_state, zeros, zeros, jnp.zeros(num_envs, bool))
    step_keys = jax.random.split(key, int(env_params.max_steps_in_episode))
    (*_, returns, lengths, _), _ = jax.lax.scan(step, loop, step_keys)
    return {"episodic_return": returns.mean(), "episodic_length": lengths.mean()}

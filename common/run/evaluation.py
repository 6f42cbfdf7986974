"""Policy evaluation on fresh environments: fixed shapes, bounded by the env's episode limit."""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from canter.common.envs import is_host_env
from jaxtyping import Array, Float, PRNGKeyArray

Policy = Callable[[Array, Any], tuple[Array, Any]]


def run_episodes(
    env: Any, env_params: Any, policy: Policy, carry: Any, key: PRNGKeyArray, num_envs: int
) -> dict[str, Float[Array, ""]]:
    """Mean return and length of one episode on each of `num_envs` fresh environments.

    `policy(obs, carry) -> (actions, carry)` maps a batch of observations to a batch of greedy
    (or deterministic) actions; `carry` is its memory at the start of an episode (None for a
    feed-forward policy). Each env plays one episode, so the carry never needs resetting.
    Runs exactly the env's `max_steps_in_episode` steps: a fixed-length scan rather than a
    while loop, whose "all done?" test would couple vmapped seeds and, sharded, need a
    cross-device reduction every step. A host env (common/envs/host.py, one device) stops once every
    episode has ended instead: its steps are simulator calls (an Atari limit is 27,000 steps).
    """
    reset_key, key = jax.random.split(key)
    reset_keys = jax.random.split(reset_key, num_envs)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, env_params)
    env_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def step(loop: tuple, step_key: PRNGKeyArray) -> tuple[tuple, None]:
        obs, carry, env_state, returns, lengths, done = loop
        action, carry = policy(obs, carry)
        obs, env_state, reward, terminated, truncated, _ = env_step(
            jax.random.split(step_key, num_envs), env_state, action, env_params
        )
        returns = returns + jnp.where(done, 0.0, reward)
        lengths = lengths + jnp.where(done, 0, 1)
        done = done | terminated | truncated
        return (obs, carry, env_state, returns, lengths, done), None

    zeros = jnp.zeros(num_envs)
    loop = (obs, carry, env_state, zeros, zeros, jnp.zeros(num_envs, bool))
    max_steps = int(env_params.max_steps_in_episode)
    step_keys = jax.random.split(key, max_steps)
    if not is_host_env(env):
        (*_, returns, lengths, _), _ = jax.lax.scan(step, loop, step_keys)
    else:

        def running(carry: tuple) -> Array:
            t, loop = carry
            return jnp.logical_and(t < max_steps, jnp.logical_not(jnp.all(loop[-1])))

        def advance(carry: tuple) -> tuple:
            t, loop = carry
            return t + 1, step(loop, step_keys[t])[0]

        _, (*_, returns, lengths, _) = jax.lax.while_loop(running, advance, (0, loop))
    return {"episodic_return": returns.mean(), "episodic_length": lengths.mean()}

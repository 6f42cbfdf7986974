"""Policy evaluation on fresh environments: fixed shapes, bounded by the env's episode limit.

`evaluate(train, state, key)` is what every interval of a run ends with (algorithms/trainer.py,
`Train.evaluate`); `policy` and `start_carry` give the policy it plays, as the Train's
`eval_policy` says, to evaluate.py's GIFs too.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from canter.common.envs import base_state, evaluation_env, is_host_env, vector_mask
from jaxtyping import Array, Float, PRNGKeyArray

Policy = Callable[..., tuple[Array, Any]]
CHUNK = 50  # env steps between "all done?" tests (a host env: 1)


def evaluate(train: Any, state: Any, key: PRNGKeyArray) -> dict[str, Float[Array, ""]]:
    """Mean return and length of one episode of `train.eval_policy` on each of
    `train.num_eval_envs` envs, without training-only wrappers (Atari's life loss and reward
    clipping)."""
    n, env = train.num_eval_envs, evaluation_env(train.env)
    carry = start_carry(train, n, jax.random.fold_in(key, 1))  # the env keys stay `key`'s
    play = policy(train, state)
    return run_episodes(env, train.env_params, play, carry, key, n, with_state=train.plans)


def policy(train: Any, state: Any) -> Policy:
    """`policy(obs, carry, mask=None) -> (actions, carry)` of `state` as `train.eval_policy`
    says ("greedy" or "sampled"), for either kind of `train.act` (with or without memory); a
    mask (valid actions, for an env with action masks) is passed on as `mask=`. Start its carry
    with `start_carry`."""
    sampled = train.eval_policy == "sampled"

    def play(
        obs: Array, carry: Any, mask: Array | None = None, env_state: Any = None
    ) -> tuple[Array, Any]:
        extra = {} if mask is None else {"mask": mask}
        if train.plans:  # a search from the true states (`Train.plans`)
            extra["env_state"] = env_state
        if sampled:
            carry, key = carry
            key, extra["key"] = jax.random.split(key)
        if train.initial_carry is not None:
            actions, carry = train.act(state, obs, carry, **extra)
        else:
            actions = train.act(state, obs, **extra)
        return actions, ((carry, key) if sampled else carry)

    return play


def start_carry(train: Any, num_envs: int, key: PRNGKeyArray | None = None) -> Any:
    """The policy's carry at the start of `num_envs` episodes: a memory's initial state
    (`train.initial_carry`), and for a sampled policy the key its draws start from (`key`, else
    a fixed one)."""
    carry = None if train.initial_carry is None else train.initial_carry(num_envs)
    if train.eval_policy != "sampled":
        return carry
    return carry, jax.random.key(0) if key is None else key


def run_episodes(
    env: Any,
    env_params: Any,
    policy: Policy,
    carry: Any,
    key: PRNGKeyArray,
    num_envs: int,
    with_state: bool = False,
) -> dict[str, Float[Array, ""]]:
    """Mean return and length of one episode on each of `num_envs` fresh environments.

    `policy(obs, carry) -> (actions, carry)` maps a batch of observations to a batch of
    actions; `carry` is what it carries from step to step (a memory, a sampled policy's key;
    None for a feed-forward greedy policy) as it is at the start of an episode. For an env with
    action masks it is called `policy(obs, carry, mask)` with the valid actions of each env's
    state (common/envs/registry.py, `vector_mask`). Each env plays one episode, so the carry
    never needs resetting. With `with_state` it also gets `env_state=`, the bare env's states
    (`base_state`: a planning policy's search starts from them). For an env that `reports_wins`
    (SMAX, common/envs/jaxmarl.py) it also gives `wins`, the fraction of episodes won.
    Stops once every episode has ended, at most the env's `max_steps_in_episode` steps: chunks
    of CHUNK steps (a scan) in a while loop that asks "all done?" between chunks only, since
    under vmap the test couples the seeds and, sharded, is a cross-device reduction. A chunk
    may run past the last episode's end; steps of ended episodes add nothing, so the numbers are
    those of a full-length scan. A host env (common/envs/host.py, one device) asks after every
    step: its steps are simulator calls (an Atari limit is 27,000 steps).
    """
    reset_key, key = jax.random.split(key)
    reset_keys = jax.random.split(reset_key, num_envs)
    obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, env_params)
    env_step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    valid = vector_mask(env)

    max_steps = int(env_params.max_steps_in_episode)
    chunk = 1 if is_host_env(env) else min(CHUNK, max_steps)
    num_chunks = -(-max_steps // chunk)
    step_keys = jax.random.split(key, max_steps)  # a full-length scan's keys: the same numbers

    reports_wins = getattr(getattr(env, "unwrapped", env), "reports_wins", False)

    def step(loop: tuple, t: Array) -> tuple[tuple, None]:
        obs, carry, env_state, returns, lengths, wins, done = loop
        done = done | (t >= max_steps)  # the last chunk's steps past the limit change nothing
        mask = valid(env_state, env_params)
        extra = {"env_state": base_state(env_state)} if with_state else {}
        if mask is None:
            action, carry = policy(obs, carry, **extra)
        else:
            action, carry = policy(obs, carry, mask, **extra)
        obs, env_state, reward, terminated, truncated, info = env_step(
            jax.random.split(step_keys[jnp.minimum(t, max_steps - 1)], num_envs),
            env_state,
            action,
            env_params,
        )
        returns = returns + jnp.where(done, 0.0, reward)
        lengths = lengths + jnp.where(done, 0, 1)
        if reports_wins:
            wins = wins | (~done & info["won"])
        done = done | terminated | truncated
        return (obs, carry, env_state, returns, lengths, wins, done), None

    def running(carry: tuple) -> Array:
        c, loop = carry
        return jnp.logical_and(c < num_chunks, jnp.logical_not(jnp.all(loop[-1])))

    def advance(carry: tuple) -> tuple:
        c, loop = carry
        return c + 1, jax.lax.scan(step, loop, c * chunk + jnp.arange(chunk))[0]

    zeros = jnp.zeros(num_envs)
    false = jnp.zeros(num_envs, bool)
    loop = (obs, carry, env_state, zeros, zeros, false, false)
    _, (*_, returns, lengths, wins, _) = jax.lax.while_loop(running, advance, (0, loop))
    result = {"episodic_return": returns.mean(), "episodic_length": lengths.mean()}
    return result | ({"wins": wins.mean()} if reports_wins else {})

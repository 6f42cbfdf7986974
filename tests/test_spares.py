"""Resets from spare states (common/envs/spares.py), on a toy env whose reset can be counted.

The toy's state is (episode id, steps): a reset draws a new id, the episode is truncated after
`LIMIT` steps, and action 1 terminates it. Craftax (tests/test_craftax.py) and the physics
suites (tests/test_physics.py) check the same machinery on the real envs.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from canter.common.envs import vector_step
from canter.common.envs.spares import SpareResetEnv, SpareState
from gymnax.environments import spaces

LIMIT = 3


class Toy(SpareResetEnv):
    """obs = [id, steps]; the id is a fresh uniform draw at every reset."""

    def __init__(self, remake: bool = True):
        super().__init__()
        self.remake_spares = remake
        self.reset_ratio = 4

    @property
    def default_params(self) -> Any:
        return None

    def reset_inner(self, key: Any, params: Any) -> tuple:
        state = (jax.random.uniform(key), jnp.zeros((), jnp.int32))
        return jnp.stack([state[0], 0.0]), state

    def step_inner(self, key: Any, state: Any, action: Any, params: Any) -> tuple:
        episode, steps = state[0], state[1] + 1
        terminated = action == 1
        truncated = jnp.logical_and(steps >= LIMIT, jnp.logical_not(terminated))
        obs = jnp.stack([episode, steps.astype(jnp.float32)])
        return obs, (episode, steps), jnp.float32(1.0), terminated, truncated, {}

    def action_space(self, params: Any = None) -> spaces.Discrete:
        return spaces.Discrete(2)

    def observation_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (2,), jnp.float32)


def reset_batch(env: Toy, num_envs: int, seed: int = 0) -> SpareState:
    keys = jax.random.split(jax.random.key(seed), num_envs)
    return jax.vmap(env.reset, in_axes=(0, None))(keys, None)[1]


def test_an_ending_episode_continues_in_its_spare_and_marks_it_used():
    env = Toy()
    first, state = env.reset(jax.random.key(0), None)
    spare_obs = state.spare_obs
    obs, state, _, terminated, truncated, info = env.step(jax.random.key(1), state, 1, None)
    assert bool(terminated) and not bool(truncated)
    np.testing.assert_array_equal(obs, spare_obs)  # the next episode's first observation
    np.testing.assert_array_equal(info["final_observation"], [first[0], 1.0])
    assert not bool(state.spare_fresh) and int(state.state[1]) == 0
    for _ in range(LIMIT):  # the spare's episode runs to the limit: a truncation
        obs, state, _, terminated, truncated, info = env.step(jax.random.key(2), state, 0, None)
    assert bool(truncated) and not bool(terminated)
    assert float(info["final_observation"][1]) == LIMIT
    assert bool(info["truncated"]) and not bool(info["terminated"])


def test_refill_gives_new_spares_to_the_envs_that_used_theirs_up_to_the_ratio():
    env = Toy()
    states = reset_batch(env, 16)  # 16 // 4 = 4 resets per refill
    ended = np.zeros(16, bool)
    ended[[1, 2, 5, 7, 8, 13]] = True
    actions = jnp.asarray(ended, jnp.int32)  # action 1 ends those six episodes
    keys = jax.random.split(jax.random.key(1), 16)
    _, after, _, terminated, _, _ = vector_step(env)(keys, states, actions, None)
    np.testing.assert_array_equal(np.asarray(terminated), ended)
    changed = np.asarray(after.spare_obs[:, 0] != states.spare_obs[:, 0])
    np.testing.assert_array_equal(np.flatnonzero(changed), [1, 2, 5, 7])  # the first four
    np.testing.assert_array_equal(np.asarray(after.spare_fresh), ~ended | changed)
    again = env.refill(jax.random.key(2), after, None)  # the two waiting get theirs next
    assert bool(again.spare_fresh.all())
    changed = np.asarray(again.spare_obs[:, 0] != states.spare_obs[:, 0])
    np.testing.assert_array_equal(changed, ended)
    assert len(np.unique(np.asarray(again.spare_obs[ended, 0]))) == 6  # all different draws


def test_refill_resets_nothing_when_no_spare_was_used_even_across_vmapped_seeds():
    env = Toy()
    states = jax.vmap(lambda seed: reset_batch(env, 8, seed))(jnp.arange(3))
    refill = jax.jit(jax.vmap(env.refill, in_axes=(0, 0, None)))
    keys = jax.random.split(jax.random.key(3), 3)
    same = refill(keys, states, None)
    assert all(jax.tree.leaves(jax.tree.map(jnp.array_equal, same, states)))
    # One seed used one spare: only that one changes, whatever the other seeds do.
    used = eqx.tree_at(lambda s: s.spare_fresh, states, states.spare_fresh.at[1, 6].set(False))
    after = refill(keys, used, None)
    changed = np.asarray(after.spare_obs[..., 0] != states.spare_obs[..., 0])
    np.testing.assert_array_equal(np.argwhere(changed), [[1, 6]])
    assert bool(after.spare_fresh.all())


def test_the_step_itself_never_resets():
    # A reset inside `step` would show as a jaxpr that draws random numbers; the step draws none.
    env = Toy()
    states = reset_batch(env, 8)
    keys = jax.random.split(jax.random.key(1), 8)
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    jaxpr = str(jax.make_jaxpr(step, static_argnums=3)(keys, states, jnp.ones(8, int), None))
    assert "random_bits" not in jaxpr and "threefry" not in jaxpr
    jaxpr = str(jax.make_jaxpr(env.refill, static_argnums=2)(keys[0], states, None))
    assert "random_bits" in jaxpr or "threefry" in jaxpr  # the resets live in `refill`


def test_without_remade_spares_every_episode_restarts_from_the_same_spare():
    env = Toy(remake=False)
    states = reset_batch(env, 8)
    step = vector_step(env)  # its refill leaves the states as they are
    keys = jax.random.split(jax.random.key(4), 8)
    starts = []
    for _ in range(3):  # three episodes, each ended by action 1
        obs, states, _, terminated, _, _ = step(keys, states, jnp.ones(8, jnp.int32), None)
        assert bool(terminated.all())
        starts.append(np.asarray(obs[:, 0]))
    np.testing.assert_array_equal(starts[0], starts[1])
    np.testing.assert_array_equal(starts[1], starts[2])
    assert len(np.unique(starts[0])) == 8  # the envs start from different states all the same
    same = env.refill(jax.random.key(5), states, None)
    assert same is states

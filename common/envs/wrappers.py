"""gymnax wrappers. All but `StickyActions` are neutral: they change what is recorded or the
layout, never the numbers learned; sticky actions change what the learner sees (Atari's
training-only wrapper is in common/envs/atari.py).

Every wrapper acts on one environment (`reset(key, params)`, `step(key, state, action, params)`,
gymnax 1.0 six-value step); callers vmap over environments.
"""

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Float, Int


class Wrapper:
    """Forwards every attribute it does not define to the wrapped environment."""

    def __init__(self, env: Any):
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    @property
    def unwrapped(self) -> Any:
        """The gymnax environment below every wrapper (what gymnax's visualiser draws)."""
        return getattr(self._env, "unwrapped", self._env)


class FloatObservation(Wrapper):
    """Observations (and final observations) as float32, flattened to vectors unless
    `keep_shape` (MinAtar's 10x10xC grids stay images for a CNN); a discrete observation
    (FrozenLake's cell index) one-hot, as Gymnasium flattens Discrete."""

    def __init__(self, env: Any, keep_shape: bool = False):
        from gymnax.environments import spaces  # gymnax starts JAX's backend on import

        super().__init__(env)
        space = env.observation_space(env.default_params)
        self._one_hot = int(space.n) if isinstance(space, spaces.Discrete) else None
        self._keep_shape = keep_shape

    def observation_space(self, params: Any) -> Any:
        from gymnax.environments import spaces

        if self._one_hot is not None:
            return spaces.Box(0.0, 1.0, (self._one_hot,), jnp.float32)
        space = self._env.observation_space(params)
        shape = tuple(space.shape) if self._keep_shape else (math.prod(space.shape),)
        low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), space.shape).reshape(shape)
        high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), space.shape).reshape(shape)
        return spaces.Box(low, high, shape, jnp.float32)

    def reset(self, key: Array, params: Any) -> tuple[Array, Any]:
        obs, state = self._env.reset(key, params)
        return self._float(obs), state

    def step(self, key: Array, state: Any, action: Array | int | float, params: Any) -> tuple:
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        info = {**info, "final_observation": self._float(info["final_observation"])}
        return self._float(obs), state, reward, terminated, truncated, info

    def _float(self, obs: Array) -> Float[Array, "..."]:
        if self._one_hot is not None:
            return jax.nn.one_hot(obs, self._one_hot, dtype=jnp.float32).reshape(-1)
        obs = jnp.asarray(obs, jnp.float32)
        return obs if self._keep_shape else obs.reshape(-1)


class StickyActionsState(eqx.Module):
    """The wrapped state and the action last executed (0 at an episode's start, as MinAtar)."""

    env_state: Any
    last_action: Int[Array, ""]


class StickyActions(Wrapper):
    """With probability `prob` per step the environment repeats the action it executed last
    instead of the agent's (Machado et al. 2018; MinAtar's default is 0.1).

    This changes the environment, so the numbers learned: algorithms apply it through
    `make_env(..., sticky_action_prob=...)`, from a Config field. `prob` may be traced (the
    runner traces float fields; a sweep), so the draw happens on every step, whatever its
    value; at 0 it never sticks. Not gymnax's `StickyActionWrapper`: that one needs a Python
    float, and keeps the last action across an auto-reset where MinAtar starts over from 0.
    """

    def __init__(self, env: Any, prob: float | ArrayLike):
        super().__init__(env)
        self._prob = prob

    def reset(self, key: Array, params: Any) -> tuple[Array, StickyActionsState]:
        obs, env_state = self._env.reset(key, params)
        return obs, StickyActionsState(env_state, jnp.zeros((), jnp.int32))

    def step(
        self, key: Array, state: StickyActionsState, action: Array | int, params: Any
    ) -> tuple:
        sticky_key, key = jax.random.split(key)
        stick = jax.random.uniform(sticky_key) < self._prob
        executed = jnp.where(stick, state.last_action, jnp.asarray(action, jnp.int32))
        obs, env_state, reward, terminated, truncated, info = self._env.step(
            key, state.env_state, executed, params
        )
        # The env auto-reset on an episode end: the next episode starts from action 0 again.
        last = jnp.where(jnp.logical_or(terminated, truncated), 0, executed)
        return obs, StickyActionsState(env_state, last), reward, terminated, truncated, info


class EpisodeStatsState(eqx.Module):
    """One environment's running episode, and the episodes it ended since they were last read.

    `ended` counts the episodes that ended since `ended_episodes` last cleared the record;
    `ended_return` and `ended_length` are their sums (so many envs and many steps combine into
    one mean weighted by episodes, as the references weigh them).
    """

    env_state: Any
    episode_return: Float[Array, ""]
    episode_length: Int[Array, ""]
    ended_return: Float[Array, ""]
    ended_length: Int[Array, ""]
    ended: Int[Array, ""]


class EpisodeStats(Wrapper):
    """Fixed-shape episode statistics (no boolean-mask indexing, so nothing recompiles)."""

    def reset(self, key: Array, params: Any) -> tuple[Array, EpisodeStatsState]:
        obs, env_state = self._env.reset(key, params)
        zero_f, zero_i = jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32)
        return obs, EpisodeStatsState(env_state, zero_f, zero_i, zero_f, zero_i, zero_i)

    def step(
        self, key: Array, state: EpisodeStatsState, action: Array | int | float, params: Any
    ) -> tuple:
        obs, env_state, reward, terminated, truncated, info = self._env.step(
            key, state.env_state, action, params
        )
        done = jnp.logical_or(terminated, truncated)
        episode_return = state.episode_return + reward.astype(jnp.float32)
        episode_length = state.episode_length + 1
        state = EpisodeStatsState(
            env_state=env_state,
            episode_return=jnp.where(done, 0.0, episode_return),
            episode_length=jnp.where(done, 0, episode_length),
            ended_return=state.ended_return + jnp.where(done, episode_return, 0.0),
            ended_length=state.ended_length + jnp.where(done, episode_length, 0),
            ended=state.ended + done.astype(jnp.int32),
        )
        # Rewards as float32 (some bsuite and misc envs give int32): one dtype for every target.
        return obs, state, reward.astype(jnp.float32), terminated, truncated, info


def ended_episodes(
    state: EpisodeStatsState,
) -> tuple[dict[str, Float[Array, ""]], EpisodeStatsState]:
    """The episodes that ended since the last read, over every env of `state` (vmapped or
    not), and `state` with that record cleared.

    `episodic_return` and `episodic_length` are their mean return and length (NaN when none
    ended), `episodes` their number: PureJaxRL's and Craftax_Baselines' training statistic
    (the sum of returns of the episodes ended in an update over their count), read once per
    iteration. The caller carries the returned state on, or the next read counts these again.
    """
    count = jnp.sum(state.ended)
    ended = count > 0
    per_episode = 1.0 / jnp.maximum(count, 1)
    metrics = {
        "episodic_return": jnp.where(ended, jnp.sum(state.ended_return) * per_episode, jnp.nan),
        "episodic_length": jnp.where(ended, jnp.sum(state.ended_length) * per_episode, jnp.nan),
        "episodes": count.astype(jnp.float32),
    }
    cleared = eqx.tree_at(
        lambda s: (s.ended_return, s.ended_length, s.ended),
        state,
        (
            jnp.zeros_like(state.ended_return),
            jnp.zeros_like(state.ended_length),
            jnp.zeros_like(state.ended),
        ),
    )
    return metrics, cleared


class ObservationSubset(Wrapper):
    """Only the observation entries at `indices`: a partially observed variant of a task.

    `ObservationSubset(CartPole, (0, 2))` hides CartPole's velocities (cart position and pole
    angle remain), so a policy must infer them from the history: a test task for memory.
    """

    def __init__(self, env: Any, indices: tuple[int, ...]):
        super().__init__(env)
        self._indices = jnp.array(indices)

    def observation_space(self, params: Any) -> Any:
        from gymnax.environments import spaces

        space = self._env.observation_space(params)
        low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), space.shape)[self._indices]
        high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), space.shape)[self._indices]
        return spaces.Box(low, high, (len(self._indices),), jnp.float32)

    def reset(self, key: Array, params: Any) -> tuple[Array, Any]:
        obs, state = self._env.reset(key, params)
        return obs[self._indices], state

    def step(self, key: Array, state: Any, action: Array | int | float, params: Any) -> tuple:
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        info = {**info, "final_observation": info["final_observation"][self._indices]}
        return obs[self._indices], state, reward, terminated, truncated, info


def base_state(state: Any) -> Any:
    """The gymnax environment's own state inside the wrappers' states (what gymnax draws)."""
    while isinstance(state, EpisodeStatsState | StickyActionsState):
        state = state.env_state
    return state

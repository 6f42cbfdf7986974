"""Probe environments: tiny tasks whose values or best actions are known in closed form.

Each is a gymnax 1.0 `Environment`, registered with `register_env` by conftest.py.
"""

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class ProbeState(environment.EnvState):
    obs: jax.Array
    time: int


class Probe(environment.Environment):
    """One-dimensional observation, `num_actions` actions; subclasses set the dynamics."""

    num_actions_: int = 1
    max_steps: int = 100

    @property
    def default_params(self) -> environment.EnvParams:
        return environment.EnvParams(max_steps_in_episode=self.max_steps)

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def num_actions(self) -> int:
        return self.num_actions_

    def action_space(self, params: Any = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions_)

    def observation_space(self, params: Any) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)

    def get_obs(self, state: ProbeState, params: Any = None, key: Any = None) -> jax.Array:
        return jnp.reshape(state.obs, (1,)).astype(jnp.float32)

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, ProbeState]:
        state = ProbeState(obs=self.first_obs(key), time=0)
        return self.get_obs(state), state

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jnp.zeros((), jnp.float32)

    def step_env(self, key: jax.Array, state: ProbeState, action: Any, params: Any) -> tuple:
        reward, terminated, next_obs = self.transition(state, action)
        state = ProbeState(obs=next_obs, time=state.time + 1)
        return self.get_obs(state), state, reward, terminated, {}

    def transition(self, state: ProbeState, action: Any) -> tuple:
        raise NotImplementedError


class ProbeConstant(Probe):
    """Reward 1, one step: V = 1."""

    def transition(self, state: ProbeState, action: Any) -> tuple:
        return jnp.float32(1.0), jnp.array(True), state.obs


class ProbeObsReward(Probe):
    """Observation +-1 at random, reward = observation, one step: V(o) = o."""

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jnp.where(jax.random.bernoulli(key), 1.0, -1.0).astype(jnp.float32)

    def transition(self, state: ProbeState, action: Any) -> tuple:
        return state.obs, jnp.array(True), state.obs


class ProbeDiscount(Probe):
    """Two steps, observation 0 then 1, reward 1 on the second only: V(0) = gamma, V(1) = 1."""

    def transition(self, state: ProbeState, action: Any) -> tuple:
        last = state.time == 1
        return jnp.where(last, 1.0, 0.0).astype(jnp.float32), last, jnp.float32(1.0)


class ProbeAction(Probe):
    """Two actions, observation 0 or 1 at random, reward 1 when the action equals it."""

    num_actions_ = 2

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jax.random.bernoulli(key).astype(jnp.float32)

    def transition(self, state: ProbeState, action: Any) -> tuple:
        reward = (action == state.obs.astype(jnp.int32)).astype(jnp.float32)
        return reward, jnp.array(True), state.obs


class ProbeTimeLimit(Probe):
    """Reward 1 forever, cut by a 3-step time limit; the observation does not show the time.

    Bootstrapping through the limit gives V = 1 / (1 - gamma). Treating the limit as a
    termination instead gives the average of the truncated sums, far lower.
    """

    max_steps = 3

    def transition(self, state: ProbeState, action: Any) -> tuple:
        return jnp.float32(1.0), jnp.array(False), state.obs


class ProbeContinuous(ProbeConstant):
    """ProbeConstant with a Box action space, for the action-kind checks."""

    def action_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)


class ProbeClock(Probe):
    """Observation = time / 3, reward 1, cut by a 3-step limit: the final observation (1.0)
    differs from every observation an agent acts on, so replay tests can see which was stored.
    """

    max_steps = 3

    def transition(self, state: ProbeState, action: Any) -> tuple:
        return jnp.float32(1.0), jnp.array(False), (state.time + 1) / 3.0


class ProbeContinuousClock(ProbeClock):
    """ProbeClock with a Box action space (two dimensions, in [-2, 2])."""

    def action_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(-2.0, 2.0, (2,), jnp.float32)


class ProbeContinuousTimeLimit(ProbeTimeLimit):
    """ProbeTimeLimit with a Box action space (one dimension, in [-2, 2])."""

    def action_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(-2.0, 2.0, (1,), jnp.float32)


class ProbeContinuousAction(Probe):
    """Box action in [-2, 2], observation +-1.5 at random, one step, reward -(action - obs)^2.

    The best action is the observation; its value is 0. The bound 2 makes the action scale
    visible to an algorithm that forgets it (a tanh policy without it cannot leave [-1, 1]).
    """

    def observation_space(self, params: Any) -> spaces.Box:
        return spaces.Box(-2.0, 2.0, (1,), jnp.float32)

    def action_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(-2.0, 2.0, (1,), jnp.float32)

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jnp.where(jax.random.bernoulli(key), 1.5, -1.5).astype(jnp.float32)

    def transition(self, state: ProbeState, action: Any) -> tuple:
        reward = -jnp.sum((action - state.obs) ** 2).astype(jnp.float32)
        return reward, jnp.array(True), state.obs


class ProbeConstantOne(ProbeConstant):
    """ProbeConstant seen as observation 1: an input that zero-bias networks (ppo_rnd.py's
    target and predictor) do not map to zero."""

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jnp.ones((), jnp.float32)


class ProbeTimeLimitOne(ProbeTimeLimit):
    """ProbeTimeLimit seen as observation 1: from observation 0 every activation of a network
    of zero-init biases and ReLUs (ppo_trxl.py's) is 0, where ReLU passes no gradient."""

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jnp.ones((), jnp.float32)


PROBES = [ProbeConstant, ProbeObsReward, ProbeDiscount, ProbeAction, ProbeTimeLimit]
PROBES += [ProbeConstantOne, ProbeTimeLimitOne]
PROBES += [ProbeContinuous, ProbeClock, ProbeContinuousClock, ProbeContinuousTimeLimit]
PROBES += [ProbeContinuousAction]


class ProbeTwoDimAction(Probe):
    """Observation 0 or 1 at random, one step, reward -(a0 - o)^2 - (a1 + o / 2)^2.

    The best action (o, -o / 2) lies inside the [-2, 2] bounds; its two dimensions want
    different means, so mixed-up action axes show. The observation mean is 1/2, variance 1/4.
    """

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jax.random.bernoulli(key).astype(jnp.float32)

    def action_space(self, params: Any = None) -> spaces.Box:
        return spaces.Box(-2.0, 2.0, (2,), jnp.float32)

    def transition(self, state: ProbeState, action: Any) -> tuple:
        reward = -((action[0] - state.obs) ** 2) - (action[1] + state.obs / 2) ** 2
        return reward.astype(jnp.float32), jnp.array(True), state.obs


PROBES += [ProbeTwoDimAction]


class ProbeUnmasked(Probe):
    """Three actions with rewards 0, 1 and 10, one step: the best action is 2."""

    num_actions_ = 3

    def transition(self, state: ProbeState, action: Any) -> tuple:
        return jnp.array([0.0, 1.0, 10.0])[action], jnp.array(True), state.obs


class ProbeMasked(ProbeUnmasked):
    """ProbeUnmasked where action 2 is never valid (its action mask: common/blocks/masking.py).
    An agent that ignores the mask learns to take action 2; the best valid return is 1."""

    def action_mask(self, state: ProbeState, params: Any = None) -> jax.Array:
        return jnp.array([True, True, False])

    def step_env(self, key: jax.Array, state: ProbeState, action: Any, params: Any) -> tuple:
        obs, state, reward, terminated, _ = super().step_env(key, state, action, params)
        return obs, state, reward, terminated, {"final_action_mask": self.action_mask(state)}


PROBES += [ProbeUnmasked, ProbeMasked]


class ProbeMemory(Probe):
    """A cue of +-1 at random, then observation 0; reward 1 when the second action names the
    cue (action 1 for +1, 0 for -1). Only memory beats chance: a feed-forward policy sees 0 at
    the second step whatever the cue, so its return is 0.5; the best return is 1."""

    num_actions_ = 2

    def first_obs(self, key: jax.Array) -> jax.Array:
        return jnp.where(jax.random.bernoulli(key), 1.0, -1.0).astype(jnp.float32)

    def get_obs(self, state: ProbeState, params: Any = None, key: Any = None) -> jax.Array:
        # `state.obs` keeps the cue for the whole episode; the agent sees it at step 0 only.
        return jnp.reshape(jnp.where(state.time == 0, state.obs, 0.0), (1,)).astype(jnp.float32)

    def transition(self, state: ProbeState, action: Any) -> tuple:
        second = state.time == 1
        correct = action == (state.obs > 0).astype(jnp.int32)
        reward = jnp.where(second & correct, 1.0, 0.0).astype(jnp.float32)
        return reward, second, state.obs


PROBES += [ProbeMemory]

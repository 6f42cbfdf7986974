"""Resets from spare states, for the JAX-native envs whose reset costs more than a step.

gymnax's `step` resets inside every env's step: under `vmap` the reset branch becomes a select,
so a batch of envs computes a reset at every step, whether an episode ended or not. That is
free for CartPole, but not where a reset is expensive: Craftax generates a world (about 2.6 ms
on 2 CPU cores, more than a batch of steps), MuJoCo Playground's CheetahRun settles its body for
200 physics steps, Brax computes its initial kinematics. So each env carries a **spare** initial
state made ahead:

- `step` plays the env's own step (`step_inner`), and where the episode ended continues in the
  spare at once (a select of two states already computed: no reset runs), marking it used;
- after each batched step, `refill` (called by `common.envs.vector_step`) makes new spares for
  the envs that used theirs, at most num_envs / `reset_ratio` per call (the first envs in the
  batch first; the others wait for the next call), in a loop of as many resets as are needed,
  so a step where no episode ended resets nothing. An env that ends again before its spare is
  refilled replays that spare's initial state (only when more than one env in `reset_ratio`
  ends per step, for a while). Craftax_Baselines' optimistic resets make num_envs / 16 new
  worlds at every step, needed or not, and hand them to the envs that ended.
- with `remake_spares` off, the spares are never remade: each env replays the initial state
  it drew first, at every episode end, as Brax's and MuJoCo Playground's training wrappers do.
  The physics envs (physics.py) take this: on XLA:CPU a `while_loop` whose body holds a
  reset of theirs costs about as much as the whole batched step even when it runs no
  iteration (CheetahRun, 256 envs: 2,834 env steps/s against 35,231 without; a `lax.cond`
  would cost nothing alone, but under `vmap` over seeds it becomes a select that resets at every
  step).

Evaluation (one episode per env) steps with a plain `vmap(env.step)`, without `refill`. The
subclasses (craftax.py, physics.py) define `reset_inner` and `step_inner`, with the
terminated / truncated split their suite needs.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from gymnax.environments import environment
from jaxtyping import Array, Bool, Float, PRNGKeyArray


class SpareState(eqx.Module):
    """The env's own state being played, a spare initial state for the next episode (and its
    observation), and whether the spare is still unused (`refill` replaces used ones)."""

    state: Any
    spare: Any
    spare_obs: Float[Array, "*envs obs"]  # batched in `refill`
    spare_fresh: Bool[Array, "*envs"]


class SpareResetEnv(environment.Environment):
    """gymnax's `Environment` whose episodes continue in a spare made ahead (module docstring).
    Subclasses define `reset_inner(key, params) -> (obs, state)` and `step_inner(key, state,
    action, params) -> (obs, state, reward, terminated, truncated, info)`."""

    reset_ratio: int = 16  # envs per reset made after each batched step (Craftax_Baselines: 16)
    remake_spares: bool = True  # False: each env replays the spare it drew first

    def reset_inner(self, key: PRNGKeyArray, params: Any) -> tuple[Array, Any]:
        raise NotImplementedError

    def step_inner(self, key: PRNGKeyArray, state: Any, action: Any, params: Any) -> tuple:
        raise NotImplementedError

    def reset_env(self, key: PRNGKeyArray, params: Any) -> tuple[Array, SpareState]:
        state_key, spare_key = jax.random.split(key)
        obs, state = self.reset_inner(state_key, params)
        spare_obs, spare = self.reset_inner(spare_key, params)
        return obs, SpareState(state, spare, spare_obs, jnp.array(True))

    def step(self, key: PRNGKeyArray, state: SpareState, action: Any, params: Any) -> tuple:
        """gymnax's step with the spare as the reset (nothing is reset here)."""
        obs, inner, reward, terminated, truncated, info = self.step_inner(
            key, state.state, action, params
        )
        done = jnp.logical_or(terminated, truncated)
        pick = lambda new, old: jax.lax.select(done, new, old)  # noqa: E731
        state = SpareState(
            state=jax.tree.map(pick, state.spare, inner),
            spare=state.spare,
            spare_obs=state.spare_obs,
            spare_fresh=jnp.logical_and(state.spare_fresh, jnp.logical_not(done)),
        )
        info = {**info, "terminated": terminated, "truncated": truncated, "final_observation": obs}
        return pick(state.spare_obs, obs), state, reward, terminated, truncated, info

    def step_env(self, key: Any, state: Any, action: Any, params: Any) -> tuple:
        raise NotImplementedError("this env steps through `step` (its resets are spares)")

    def refill(self, key: PRNGKeyArray, states: Any, params: Any) -> Any:
        """`states` (a batch of env states, wrapped or not) with new spares for the envs that
        used theirs, one reset per such env, at most num_envs / `reset_ratio` per call (the
        first envs in the batch first); envs beyond that keep a used spare until a later call.
        The resets run one at a time in a loop of as many as are needed (none on most steps).
        With `remake_spares` off, nothing: each env replays its own spare."""
        if not self.remake_spares:
            return states

        def refill_batch(batch: SpareState) -> SpareState:
            num_envs = batch.spare_fresh.shape[0]
            count = max(1, num_envs // self.reset_ratio)
            used = jnp.logical_not(batch.spare_fresh)
            (slots,) = jnp.nonzero(used, size=count, fill_value=0)
            needed = jnp.minimum(jnp.sum(used), count)
            keys = jax.random.split(key, count)

            def reset_one(carry: tuple) -> tuple:
                i, spare, spare_obs, fresh = carry
                new_obs, new = self.reset_inner(keys[i], params)
                put = lambda old, one: old.at[slots[i]].set(one)  # noqa: E731
                return (
                    i + 1,
                    jax.tree.map(put, spare, new),
                    put(spare_obs, new_obs),
                    put(fresh, True),
                )

            start = (jnp.int32(0), batch.spare, batch.spare_obs, batch.spare_fresh)
            _, spare, spare_obs, fresh = jax.lax.while_loop(
                lambda carry: carry[0] < needed, reset_one, start
            )
            return SpareState(batch.state, spare, spare_obs, fresh)

        is_spare = lambda x: isinstance(x, SpareState)  # noqa: E731
        return jax.tree.map(
            lambda x: refill_batch(x) if is_spare(x) else x, states, is_leaf=is_spare
        )

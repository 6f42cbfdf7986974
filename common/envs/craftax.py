"""Craftax (Matthews et al. 2024) behind the gymnax-1.0 step: `--env craftax:Craftax-Symbolic-v1`.

The `craftax` extra (`pip install -e ".[craftax]"`, craftax 1.6.1) provides the games; this
adapter takes Craftax's environment without auto-reset and gives it gymnax's `Environment`
interface, so that canter's wrappers and algorithms treat it like any gymnax env:

- **terminated and truncated apart.** Craftax has one `done`: the player died, beat the final
  boss (full Craftax), stands in lava (Classic), or the episode reached `max_timesteps`
  (100,000 steps in Craftax, 10,000 in Classic). The last is a time limit, so it is reported as
  truncation (the algorithms bootstrap from it) and the rest as termination. An episode that
  ends both ways on its last step counts as truncated.
- **The final observation** of an ending episode is in `info["final_observation"]` (gymnax's
  auto-reset step puts it there), and the observations are float32 vectors: 8,268 values and 43
  actions in Craftax-Symbolic, 1,345 and 17 in Craftax-Classic-Symbolic.
- **`max_steps_in_episode`** (what canter's evaluation bounds an episode by) is
  `max_timesteps`; evaluation stops once every episode has ended, long before it.
- **Resets from spare worlds.** Generating a world costs more than a batch of steps (about 2.6
  ms per world on 2 CPU cores), and an auto-reset under `vmap` generates one for every env at
  every step (`lax.select` computes both branches): 500 env steps/s at 256 envs. So each env
  carries a spare world generated ahead: an ending episode continues in its spare at once (a
  select, no generation), and after each batched step `refill` generates a new spare for each
  env that used its own, at most num_envs / RESET_RATIO per step (the first envs in the batch
  first; the others wait for the next step's), in a loop of as many worlds as are needed. An env
  that ends again before its spare is refilled replays that spare's world (only when more than
  one env in 16 ends per step, for a while). The algorithms step their envs through
  `common.envs.vector_step`, which calls `refill`; a plain `vmap(env.step)` (evaluation, where
  each env plays one episode) needs none. Craftax_Baselines' optimistic resets generate
  num_envs / 16 worlds at every step, needed or not, and hand them to the envs that ended
  (several sharing one when more end at once). Random actions in 256 Craftax-Symbolic envs end
  about 3 episodes per 1,000 env steps; the adapter then steps at about 5,700 env steps/s on 2
  CPU cores against 8,600 without any reset (`benchmarks/speed_craftax.py`).

Only the symbolic games are offered: the pixel games draw from a texture cache that Craftax
writes into its own package folder the first time (which fails on a read-only install), and a
pixel observation of 130x110x3 per step would need a CNN torso for them. Craftax fetches
nothing at run time.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from canter.common.config import ConfigError
from canter.common.envs.registry import CRAFTAX_GAMES, CRAFTAX_INSTALL, CRAFTAX_PREFIX
from gymnax.environments import environment, spaces
from jaxtyping import Array, Bool, Float, PRNGKeyArray

PREFIX, GAMES, INSTALL = CRAFTAX_PREFIX, CRAFTAX_GAMES, CRAFTAX_INSTALL


RESET_RATIO = 16  # envs per world generated after each batched step (Craftax_Baselines: 16)


class CraftaxParams(eqx.Module):
    """Craftax's own `EnvParams` and the episode limit canter reads from every env's params."""

    inner: Any
    max_steps_in_episode: int = eqx.field(static=True)


class CraftaxState(eqx.Module):
    """The world being played, a spare world for the next episode, and whether the spare is
    still unused (the batched `refill` replaces used ones)."""

    world: Any
    spare: Any
    spare_obs: Float[Array, "*envs obs"]  # batched in `refill`
    spare_fresh: Bool[Array, "*envs"]


class Craftax(environment.Environment):
    """A Craftax game (without its own auto-reset) behind gymnax's interface, episodes
    continuing in a spare world generated ahead."""

    def __init__(self, game: str):
        super().__init__()
        from craftax.craftax_env import make_craftax_env_from_name

        self.game = game
        self.craftax = make_craftax_env_from_name(game, False)

    @property
    def name(self) -> str:
        return PREFIX + self.game

    @property
    def default_params(self) -> CraftaxParams:
        inner = self.craftax.default_params
        return CraftaxParams(inner, int(inner.max_timesteps))

    def reset_env(self, key: PRNGKeyArray, params: CraftaxParams) -> tuple[Array, CraftaxState]:
        world_key, spare_key = jax.random.split(key)
        obs, world = self.craftax.reset_env(world_key, params.inner)
        spare_obs, spare = self.craftax.reset_env(spare_key, params.inner)
        return obs, CraftaxState(world, spare, spare_obs, jnp.array(True))

    def step(
        self, key: PRNGKeyArray, state: CraftaxState, action: Any, params: CraftaxParams
    ) -> tuple:
        """gymnax's step with the spare world as the reset (no world is generated here)."""
        obs, world, reward, done, info = self.craftax.step_env(
            key, state.world, action, params.inner
        )
        truncated = world.timestep >= params.inner.max_timesteps
        terminated = jnp.logical_and(done, jnp.logical_not(truncated))
        pick = lambda new, old: jax.lax.select(done, new, old)  # noqa: E731
        state = CraftaxState(
            world=jax.tree.map(pick, state.spare, world),
            spare=state.spare,
            spare_obs=state.spare_obs,
            spare_fresh=jnp.logical_and(state.spare_fresh, jnp.logical_not(done)),
        )
        info = {**info, "terminated": terminated, "truncated": truncated, "final_observation": obs}
        return pick(state.spare_obs, obs), state, reward, terminated, truncated, info

    def step_env(self, key: Any, state: CraftaxState, action: Any, params: CraftaxParams):
        raise NotImplementedError("Craftax steps through `step` (its resets are spare worlds)")

    def refill(self, key: PRNGKeyArray, states: Any, params: CraftaxParams) -> Any:
        """`states` (a batch of env states, wrapped or not) with new spare worlds for the envs
        that used theirs, one world generated per such env, at most num_envs / RESET_RATIO per
        call (the first envs in the batch first); envs beyond that keep a used spare until a
        later call. The generation runs in a loop of as many worlds as are needed: random play
        in Craftax-Symbolic ends about 3 episodes per 1,000 env steps, under one world per step
        at 256 envs."""

        def refill_batch(batch: CraftaxState) -> CraftaxState:
            num_envs = batch.spare_fresh.shape[0]
            count = max(1, num_envs // RESET_RATIO)
            used = jnp.logical_not(batch.spare_fresh)
            (slots,) = jnp.nonzero(used, size=count, fill_value=0)
            needed = jnp.minimum(jnp.sum(used), count)
            keys = jax.random.split(key, count)

            def generate(carry: tuple) -> tuple:
                i, spare, spare_obs, fresh = carry
                new_obs, new = self.craftax.reset_env(keys[i], params.inner)
                put = lambda old, one: old.at[slots[i]].set(one)  # noqa: E731
                return (
                    i + 1,
                    jax.tree.map(put, spare, new),
                    put(spare_obs, new_obs),
                    put(fresh, True),
                )

            start = (jnp.int32(0), batch.spare, batch.spare_obs, batch.spare_fresh)
            _, spare, spare_obs, fresh = jax.lax.while_loop(
                lambda carry: carry[0] < needed, generate, start
            )
            return CraftaxState(batch.world, spare, spare_obs, fresh)

        is_craftax = lambda x: isinstance(x, CraftaxState)  # noqa: E731
        return jax.tree.map(
            lambda x: refill_batch(x) if is_craftax(x) else x, states, is_leaf=is_craftax
        )

    @property
    def num_actions(self) -> int:
        return int(self.craftax.num_actions)

    def action_space(self, params: CraftaxParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: CraftaxParams | None = None) -> spaces.Box:
        space = self.craftax.observation_space(self.craftax.default_params)
        return spaces.Box(0.0, 1.0, space.shape, jnp.float32)


def make_craftax_env(name: str) -> tuple[Craftax, CraftaxParams]:
    """`craftax:<game>`: the game and its default params; a clear refusal for another name or
    without the extra, before anything compiles."""
    game = name.removeprefix(PREFIX)
    if game not in GAMES:
        raise ConfigError(
            f"Unknown Craftax game '{game}'. Valid: {', '.join(PREFIX + g for g in GAMES)} "
            "(the pixel games are not offered: see common/envs/craftax.py)."
        )
    try:
        import craftax.craftax_env  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"{name} needs the craftax extra: {INSTALL}.") from error
    env = Craftax(game)
    return env, env.default_params

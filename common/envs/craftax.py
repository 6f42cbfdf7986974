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
- **Resets from spare worlds** (common/envs/spares.py). Generating a world costs more than a
  batch of steps (about 2.6 ms per world on 2 CPU cores), and an auto-reset under `vmap`
  generates one for every env at every step (`lax.select` computes both branches): 500 env
  steps/s at 256 envs. So each env carries a spare world generated ahead, an ending episode
  continues in it at once, and after each batched step `refill` generates a new world for each
  env that used its spare, one at a time, at most num_envs / RESET_RATIO per step. Random
  actions in 256 Craftax-Symbolic envs end about 3 episodes per 1,000 env steps; the adapter
  then steps at about 5,700 env steps/s on 2 CPU cores against 8,600 without any reset
  (`benchmarks/speed/speed_craftax.py`).

Only the symbolic games are offered: the pixel games draw from a texture cache that Craftax
writes into its own package folder the first time (which fails on a read-only install), and a
pixel observation of 130x110x3 per step would need a CNN torso for them. Craftax fetches
nothing at run time.
"""

import importlib
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs.spares import SpareResetEnv, SpareState
from canter.common.envs.suites import CRAFTAX_GAMES, CRAFTAX_INSTALL, CRAFTAX_PREFIX
from gymnax.environments import spaces
from jaxtyping import Array, PRNGKeyArray

PREFIX, GAMES, INSTALL = CRAFTAX_PREFIX, CRAFTAX_GAMES, CRAFTAX_INSTALL


RESET_RATIO = 16  # envs per world generated after each batched step (Craftax_Baselines: 16)


class CraftaxParams(eqx.Module):
    """Craftax's own `EnvParams` and the episode limit canter reads from every env's params."""

    inner: Any
    max_steps_in_episode: int = eqx.field(static=True)


class Craftax(SpareResetEnv):
    """A Craftax game (without its own auto-reset) behind gymnax's interface, episodes
    continuing in a spare world generated ahead (common/envs/spares.py)."""

    reset_ratio = RESET_RATIO

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

    def reset_inner(self, key: PRNGKeyArray, params: CraftaxParams) -> tuple[Array, Any]:
        return self.craftax.reset_env(key, params.inner)

    def step_inner(self, key: PRNGKeyArray, world: Any, action: Any, params: CraftaxParams):
        """Craftax's step, its `done` split: the time limit truncates, the rest terminates."""
        obs, world, reward, done, info = self.craftax.step_env(key, world, action, params.inner)
        truncated = world.timestep >= params.inner.max_timesteps
        terminated = jnp.logical_and(done, jnp.logical_not(truncated))
        return obs, world, reward, terminated, truncated, info

    def frames(self, states: list) -> list[np.ndarray]:
        """RGB frames of (unbatched) states, drawn by Craftax's own pixel renderer at 16 pixels
        a block (208 x 176 in Craftax, 144 x 112 in Classic; no night noise). Its textures are
        made here from the PNGs in Craftax's wheel (about 10 s), not read from or written to
        the cache Craftax keeps in its package folder (which a read-only install refuses)."""
        import jax

        classic = "Classic" in self.game
        package = "craftax.craftax_classic" if classic else "craftax.craftax"
        constants = importlib.import_module(f"{package}.constants")
        renderer = importlib.import_module(f"{package}.renderer")
        size = constants.BLOCK_PIXEL_SIZE_IMG
        textures = {size: constants.load_all_textures_given_size(size)}
        cached, renderer.load_all_textures = renderer.load_all_textures, lambda: textures
        try:
            options = {} if classic else {"do_night_noise": False}
            draw = jax.jit(renderer.make_craftax_pixel_renderer(size, **options))
        finally:
            renderer.load_all_textures = cached
        worlds = [state.state if isinstance(state, SpareState) else state for state in states]
        return [np.asarray(draw(world)).clip(0, 255).astype(np.uint8) for world in worlds]

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

"""MiniGrid (Chevalier-Boisvert et al. 2023) in JAX (XLand-MiniGrid, Nikulin et al. 2024),
behind the gymnax-1.0 step: `--env xminigrid:MiniGrid-DoorKey-5x5`.

The `xminigrid` extra (`pip install -e ".[xminigrid]"`, XLand-MiniGrid 0.9.3) provides the
grids; this adapter takes its bare `reset(params, key)` / `step(params, timestep, action)`, which
never resets by itself, and gives it gymnax's `Environment` interface, so that canter's wrappers
and algorithms treat it like any gymnax env (gymnax's `step` does the auto-reset):

- **Why xminigrid, not navix.** navix 0.7.4 needs black, pylint, pytest, wandb and more at run
  time, and resets on the step after an episode ends (a wasted transition per episode).
- **terminated and truncated apart.** xminigrid ends an episode with step type LAST: discount 0
  when the task is solved (or failed: the wrong object in Memory), reported as termination;
  discount 1 at its `max_steps` limit (250 steps in DoorKey-5x5, 144 in Empty-6x6), reported as
  truncation (the algorithms bootstrap from it). Solving the task on the limit's step counts as
  terminated. The reward, 1 - 0.9 * steps / max_steps on success and 0 otherwise, is float32.
- **The final observation** of an ending episode is in `info["final_observation"]` (gymnax's
  auto-reset step puts it there); `max_steps_in_episode` (what canter's evaluation bounds an
  episode by) is xminigrid's `max_steps`. A shorter limit changes both: `MiniGridParams(
  params.inner.replace(max_steps=n), n)`.
- **Observations** are the agent's 7x7 view (3x3 in the Memory tasks, as in MiniGrid; its own
  cell at the bottom centre, facing up; walls and doors hide nothing, unlike MiniGrid's), one-hot
  as float32 images of 7x7x25: the tile id (13 kinds) and then the colour id (12), each a one-hot
  block; cells outside the grid are tile 0, colour 0. The MLP flattens them (1,225 inputs) and
  `--network cnn` keeps the image.
- **No action masks**: six actions, every one valid everywhere (forward, right, left, pick up,
  put down, toggle). Like every env without masks, it defines no `action_mask`, so the
  algorithms compile no masking for it (common/blocks/masking.py).

Only the 23 `MiniGrid-*` tasks are offered: the `XLand-MiniGrid-*` ones need a ruleset benchmark
that `xminigrid.load_benchmark` downloads at run time, and canter does not fetch data at run
time (runs often have no network). xminigrid fetches nothing for the MiniGrid tasks.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs.suites import MINIGRID_INSTALL, MINIGRID_PREFIX, MINIGRID_TASKS
from gymnax.environments import environment, spaces
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, UInt8

PREFIX, TASKS, INSTALL = MINIGRID_PREFIX, MINIGRID_TASKS, MINIGRID_INSTALL
XLAND_PREFIX = "XLand-MiniGrid-"  # the meta-RL tasks: refused (a downloaded benchmark)


class MiniGridParams(eqx.Module):
    """xminigrid's own `EnvParams` (grid size, view size, `max_steps`: all static) and the
    episode limit canter reads from every env's params."""

    inner: Any
    max_steps_in_episode: int = eqx.field(static=True)


class MiniGrid(environment.Environment):
    """An xminigrid MiniGrid task behind gymnax's interface; the state is xminigrid's
    `TimeStep` (its grid, agent, step count, and the step type and discount that end an
    episode)."""

    def __init__(self, task: str):
        super().__init__()
        import xminigrid
        from xminigrid.core.constants import NUM_COLORS, NUM_TILES

        self.task = task
        self.minigrid, self.minigrid_params = xminigrid.make(task)
        self.num_tiles, self.num_colours = int(NUM_TILES), int(NUM_COLORS)

    @property
    def name(self) -> str:
        return PREFIX + self.task

    @property
    def default_params(self) -> MiniGridParams:
        return MiniGridParams(self.minigrid_params, int(self.minigrid_params.max_steps))

    def encode(self, observation: UInt8[Array, "view view 2"]) -> Float[Array, "view view c"]:
        """xminigrid's view (tile id, colour id per cell) as one-hot float32 blocks, tiles
        first: `num_tiles + num_colours` channels."""
        tiles = jax.nn.one_hot(observation[..., 0], self.num_tiles, dtype=jnp.float32)
        colours = jax.nn.one_hot(observation[..., 1], self.num_colours, dtype=jnp.float32)
        return jnp.concatenate([tiles, colours], axis=-1)

    def reset_env(self, key: PRNGKeyArray, params: MiniGridParams) -> tuple[Array, Any]:
        timestep = self.minigrid.reset(params.inner, key)
        return self.encode(timestep.observation), timestep

    def step_env(
        self, key: PRNGKeyArray, state: Any, action: Int[Array, ""] | int, params: MiniGridParams
    ) -> tuple[Float[Array, "view view c"], Any, Float[Array, ""], Bool[Array, ""], dict]:
        """One xminigrid step (deterministic: `key` is unused); gymnax's `step` around it
        resets ended episodes and reads the truncation from `is_truncated`."""
        timestep = self.minigrid.step(params.inner, state, action)
        terminated = jnp.logical_and(timestep.last(), timestep.discount == 0)
        reward = jnp.asarray(timestep.reward, jnp.float32)
        return self.encode(timestep.observation), timestep, reward, terminated, {}

    def is_truncated(self, state: Any, params: MiniGridParams) -> Bool[Array, ""]:
        """xminigrid's own time limit: the last step of an episode, with discount 1."""
        return jnp.logical_and(state.last(), state.discount == 1)

    def frames(self, states: list) -> list[np.ndarray]:
        """RGB frames of (unbatched) states, drawn by xminigrid's own renderer (the whole grid,
        the agent's view highlighted)."""
        params = self.minigrid_params.replace(render_mode="rgb_array")
        return [np.asarray(self.minigrid.render(params, state), np.uint8) for state in states]

    @property
    def num_actions(self) -> int:
        return int(self.minigrid.num_actions(self.minigrid_params))

    def action_space(self, params: MiniGridParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: MiniGridParams | None = None) -> spaces.Box:
        inner = self.minigrid_params if params is None else params.inner
        view = inner.view_size
        return spaces.Box(0.0, 1.0, (view, view, self.num_tiles + self.num_colours), jnp.float32)


def make_minigrid_env(name: str) -> tuple[MiniGrid, MiniGridParams]:
    """`xminigrid:MiniGrid-<task>`: the task and its default params; a clear refusal for an
    XLand-MiniGrid task, another name, or without the extra, before anything compiles."""
    task = name.removeprefix(PREFIX)
    if task.startswith(XLAND_PREFIX):
        raise ConfigError(
            f"{name} is not offered: the XLand-MiniGrid tasks need a ruleset benchmark that "
            "xminigrid.load_benchmark downloads at run time, and canter does not fetch data at "
            f"run time; use a MiniGrid task (e.g. {PREFIX}MiniGrid-DoorKey-5x5)."
        )
    if task not in TASKS:
        raise ConfigError(
            f"Unknown MiniGrid task '{task}'. Valid: {', '.join(PREFIX + t for t in TASKS)}."
        )
    try:
        import xminigrid  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"{name} needs the xminigrid extra: {INSTALL}.") from error
    env = MiniGrid(task)
    return env, env.default_params

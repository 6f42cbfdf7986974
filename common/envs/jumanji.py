"""Jumanji (Bonnet et al. 2024) behind the gymnax-1.0 step: `--env jumanji:Knapsack-v1`.

The `jumanji` extra (`pip install -e ".[jumanji]"`, jumanji 1.1.2) provides the environments;
this adapter gives those with one discrete action per step (`action_spec` a `DiscreteArray`:
`JUMANJI_TASKS` in suites.py) gymnax's `Environment` interface, so that canter's wrappers and
algorithms treat them like any gymnax env. gymnax's own `step` does the auto-reset:

- **terminated and truncated apart.** A Jumanji episode ends on a `TimeStep` whose `last()` is
  true: with discount 0 it is terminated, above 0 truncated. Every accepted env ends its
  episodes with discount 0, at its own time limit too (Maze-v0 100 steps, Snake-v1 4,000,
  PacMan-v1 1,000, SlidingTilePuzzle-v0 500; Maze, Snake and the puzzle show the step count in
  their observations), and canter follows the env: those are terminated, not bootstrapped. An env
  without a time limit is cut at 1,000 steps (`max_steps_in_episode`), which is a truncation;
  an episode that ends both ways on one step counts as terminated. Knapsack-v1, TSP-v1,
  CVRP-v1 and GraphColoring-v1 end by themselves within a few dozen steps (every valid step
  packs an item, visits a node or colours one; an invalid one ends the episode); Game2048-v1
  is the one the cut reaches.
- **The final observation** of an ending episode is in `info["final_observation"]`, and its
  action mask in `info["final_action_mask"]` (both before the auto-reset).
- **Observations** are one float32 vector: every field of Jumanji's observation NamedTuple but
  `action_mask`, each flattened, concatenated in field order (nested NamedTuples, as Maze's
  positions, in theirs). This keeps one layout for every env, for canter's MLP torsos; a torso
  per field (a CNN on Snake's grid, attention over Knapsack's items) is out of scope. Sizes:
  Knapsack-v1 150 (weights, values, packed items of 50 items), Maze-v0 105 (agent and target
  row and column, 10x10 walls, step count), Snake-v1 721, PacMan-v1 1,524, TSP-v1 61, CVRP-v1
  126, Game2048-v1 16, GraphColoring-v1 421, SlidingTilePuzzle-v0 28. Integer and boolean
  fields become floats as they are (no one-hot, no scaling).
- **Action masks.** `action_mask(state, params)` gives the valid actions of `state` (Jumanji's
  `observation.action_mask`, kept in the state; all true for an env without one). Several of
  these envs end the episode on an invalid action (Knapsack: an item already packed or too
  heavy, reward 0; TSP and CVRP: a node already visited, with a penalty), so masking matters.

Refused, before anything compiles and without touching the network: Sokoban-v0 (its constructor
downloads the Boxoban levels from the Hugging Face hub), and the envs whose actions are not one
discrete choice per step (MultiDiscrete, continuous, several agents: `REFUSED`). `import jumanji`
loads every Jumanji env module (and matplotlib, huggingface_hub), so it happens only when a
`jumanji:` env is built.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs.suites import JUMANJI_INSTALL, JUMANJI_PREFIX, JUMANJI_TASKS
from gymnax.environments import environment, spaces
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

PREFIX, TASKS, INSTALL = JUMANJI_PREFIX, JUMANJI_TASKS, JUMANJI_INSTALL

DEFAULT_MAX_STEPS = 1_000  # the cut for envs without a time limit of their own (Game2048)

DOWNLOADS = {
    "Sokoban-v0": "its constructor downloads the Boxoban levels from the Hugging Face hub, and "
    "canter does not fetch data at run time (runs often have no network)",
}

_MULTI_DISCRETE = "a MultiDiscrete action space (several discrete choices per step)"
_MULTI_AGENT = "several agents (a MultiDiscrete action space, one choice per agent)"
# Jumanji 1.1.2's other ids, and why each is refused.
REFUSED = {
    "BinPack-v2": _MULTI_DISCRETE,
    "FlatPack-v0": _MULTI_DISCRETE,
    "JobShop-v0": _MULTI_DISCRETE,
    "Minesweeper-v0": _MULTI_DISCRETE,
    "RubiksCube-v0": _MULTI_DISCRETE,
    "RubiksCube-partly-scrambled-v0": _MULTI_DISCRETE,
    "Sudoku-v0": _MULTI_DISCRETE,
    "Sudoku-very-easy-v0": _MULTI_DISCRETE,
    "Tetris-v0": _MULTI_DISCRETE,
    "Cleaner-v0": _MULTI_AGENT,
    "Connector-v3": _MULTI_AGENT,
    "LevelBasedForaging-v0": _MULTI_AGENT,
    "MMST-v0": _MULTI_AGENT,
    "RobotWarehouse-v0": _MULTI_AGENT,
    "MultiCVRP-v0": "several agents (one node per vehicle and step)",
    "SearchAndRescue-v0": "a continuous action space, for several agents",
}


class JumanjiParams(eqx.Module):
    """The episode limit canter reads from every env's params (Jumanji's settings live in the
    env object)."""

    max_steps_in_episode: int = eqx.field(static=True)


class JumanjiState(eqx.Module):
    """Jumanji's state, the valid actions in it, the steps taken, and whether the step that led
    here truncated the episode (what `is_truncated` reads)."""

    inner: Any
    action_mask: Bool[Array, " num_actions"]
    time: Int[Array, ""]
    truncated: Bool[Array, ""]


class Jumanji(environment.Environment):
    """A Jumanji env with one discrete action per step behind gymnax's interface."""

    def __init__(self, task: str):
        super().__init__()
        import jumanji

        self.task = task
        self.jumanji = jumanji.make(task)
        self.max_steps = int(getattr(self.jumanji, "time_limit", DEFAULT_MAX_STEPS))
        key = jax.random.key(0)
        first = jax.eval_shape(lambda key: self.reset_env(key, self.default_params)[0], key)
        self.obs_size = int(first.shape[0])

    @property
    def name(self) -> str:
        return PREFIX + self.task

    @property
    def default_params(self) -> JumanjiParams:
        return JumanjiParams(self.max_steps)

    def reset_env(self, key: PRNGKeyArray, params: JumanjiParams) -> tuple[Array, JumanjiState]:
        inner, timestep = self.jumanji.reset(key)
        state = JumanjiState(
            inner,
            self.timestep_mask(timestep),
            jnp.zeros((), jnp.int32),
            jnp.array(False),
        )
        return flatten_observation(timestep.observation), state

    def step_env(
        self, key: PRNGKeyArray, state: JumanjiState, action: Any, params: JumanjiParams
    ) -> tuple:
        inner, timestep = self.jumanji.step(state.inner, jnp.asarray(action, jnp.int32))
        time = state.time + 1
        terminated = jnp.logical_and(timestep.last(), timestep.discount == 0)
        ended = jnp.logical_or(timestep.last(), time >= params.max_steps_in_episode)
        truncated = jnp.logical_and(ended, jnp.logical_not(terminated))
        mask = self.timestep_mask(timestep)
        state = JumanjiState(inner, mask, time, truncated)
        reward = jnp.asarray(timestep.reward, jnp.float32)
        info = {"final_action_mask": mask}
        return flatten_observation(timestep.observation), state, reward, terminated, info

    def is_truncated(self, state: JumanjiState, params: JumanjiParams) -> Bool[Array, ""]:
        return state.truncated

    def action_mask(
        self, state: JumanjiState, params: JumanjiParams
    ) -> Bool[Array, " num_actions"]:
        """The actions valid in `state` (Jumanji's observation's `action_mask`)."""
        return state.action_mask

    def timestep_mask(self, timestep: Any) -> Bool[Array, " num_actions"]:
        """The action mask of a Jumanji `TimeStep`'s observation (all true if it has none)."""
        mask = getattr(timestep.observation, "action_mask", None)
        if mask is None:
            return jnp.ones(self.num_actions, bool)
        return jnp.asarray(mask, bool)

    def frames(self, states: list, size: int = 400) -> list[np.ndarray]:
        """RGB frames of (unbatched) states, drawn by the task's own Jumanji viewer (matplotlib,
        offscreen) and scaled to `size` x `size`: about 0.5-3 s a frame on a CPU."""
        import matplotlib
        from jumanji.viewer import MatplotlibViewer
        from PIL import Image

        matplotlib.use("Agg")  # offscreen: no display is needed
        viewers = [v for v in vars(self.jumanji).values() if isinstance(v, MatplotlibViewer)]
        if not viewers:
            raise ConfigError(f"{self.name} has no matplotlib viewer to draw frames with.")
        viewer = viewers[0]
        viewer._display = viewer._display_rgb_array  # Jumanji's own "rgb_array" render mode
        images = []
        try:
            for state in states:
                rgba = np.asarray(viewer.render(state.inner))
                image = Image.fromarray(rgba[..., :3]).resize((size, size), Image.LANCZOS)
                images.append(np.asarray(image))
        finally:
            viewer.close()
        return images

    @property
    def num_actions(self) -> int:
        return int(self.jumanji.action_spec.num_values)

    def action_space(self, params: JumanjiParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: JumanjiParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.obs_size,), jnp.float32)


def flatten_observation(observation: Any) -> Float[Array, " obs"]:
    """Every field of a Jumanji observation but `action_mask`, flattened and concatenated in
    field order, as float32."""
    fields = [getattr(observation, f) for f in observation._fields if f != "action_mask"]
    leaves = jax.tree.leaves(fields)  # a list keeps its order (a dict would be sorted)
    return jnp.concatenate([jnp.ravel(jnp.asarray(leaf, jnp.float32)) for leaf in leaves])


def make_jumanji_env(name: str) -> tuple[Jumanji, JumanjiParams]:
    """`jumanji:<Id>`: the env and its default params; a clear refusal for an id canter cannot
    run or without the extra, before anything compiles (and before Jumanji builds anything)."""
    task = name.removeprefix(PREFIX)
    accepted = f"Accepted: {', '.join(PREFIX + t for t in TASKS)}"
    if task in DOWNLOADS:
        raise ConfigError(f"{name} is not available: {DOWNLOADS[task]}. {accepted}.")
    if task in REFUSED:
        raise ConfigError(
            f"{name} has {REFUSED[task]}, but canter's discrete algorithms need one discrete "
            f"action per step. {accepted}."
        )
    if task not in TASKS:
        raise ConfigError(f"Unknown Jumanji environment '{task}'. {accepted}.")
    try:
        import jumanji  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"{name} needs the jumanji extra: {INSTALL}.") from error
    env = Jumanji(task)
    return env, env.default_params

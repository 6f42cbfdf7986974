"""Environments: `make_env(name)` and what stands behind it. Changes what the learner sees.

    registry.py   make_env, the names it accepts, register_env, is_host_env, truncation_gap
    wrappers.py   float observations, episode statistics, MinAtar's sticky actions
    host.py       `gymnasium:<id>`: a Gymnasium env stepped on the host inside the compiled step
    atari.py      Atari as DQN and CleanRL train it: preprocessing, life loss, reward clipping
    craftax.py    `craftax:<game>`: Craftax's symbolic games, resets from spare worlds
    jumanji.py    `jumanji:<Id>`: Jumanji's one-discrete-action tasks, flat observations, masks
    minigrid.py   `xminigrid:MiniGrid-<task>`: XLand-MiniGrid's MiniGrid tasks, one-hot views
    physics.py    `playground:<Task>`, `brax:<name>`: DM Control on MJX and Brax, in JAX
    spares.py     resets from spare states made ahead (Craftax, the physics suites)

Every adapter gives gymnax 1.0's step: `obs, state, reward, terminated, truncated, info`, with
the last observation of an ending episode in `info["final_observation"]`; an env with action
masks also gives `action_mask(state, params)` and `info["final_action_mask"]` (`vector_mask`).
"""

from canter.common.envs.registry import (
    BRAX_ENVS,
    HOST_PREFIX,
    MINATAR_GAMES,
    MUJOCO_TASKS,
    PLAYGROUND_TASKS,
    STICKY_ACTION_ENVS,
    ActionKind,
    ActionSpaceError,
    action_kind,
    env_names,
    evaluation_env,
    is_host_env,
    make_env,
    register_env,
    truncation_gap,
    vector_mask,
    vector_step,
)
from canter.common.envs.wrappers import base_state, episode_metrics

__all__ = [
    "BRAX_ENVS",
    "HOST_PREFIX",
    "MINATAR_GAMES",
    "MUJOCO_TASKS",
    "PLAYGROUND_TASKS",
    "STICKY_ACTION_ENVS",
    "ActionKind",
    "ActionSpaceError",
    "action_kind",
    "base_state",
    "env_names",
    "episode_metrics",
    "evaluation_env",
    "is_host_env",
    "make_env",
    "register_env",
    "truncation_gap",
    "vector_mask",
    "vector_step",
]

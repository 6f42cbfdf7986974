"""Environments: `make_env(name)` and what stands behind it. Changes what the learner sees.

    registry.py   make_env, the names it accepts, register_env, is_host_env, truncation_gap
    suites.py     each suite's names, prefix and install line (constants: the registry and the
                  adapters read them there, and no adapter imports the registry)
    wrappers.py   float observations, episode statistics, MinAtar's sticky actions
    host.py       `gymnasium:<id>`: a Gymnasium env stepped on the host inside the compiled step
    atari.py      Atari as DQN and CleanRL train it: preprocessing, life loss, reward clipping
    craftax.py    `craftax:<game>`: Craftax's symbolic games, resets from spare worlds
    jumanji.py    `jumanji:<Id>`: Jumanji's one-discrete-action tasks, flat observations, masks
    minigrid.py   `xminigrid:MiniGrid-<task>`: XLand-MiniGrid's MiniGrid tasks, one-hot views
    physics.py    `playground:<Task>`, `brax:<name>`: DM Control on MJX and Brax, in JAX
    pgx.py        `pgx:<game>[-vs-<opponent>]`: pgx's board games, the opponent in the env
    spares.py     resets from spare states made ahead (Craftax, the physics suites)

Every adapter gives gymnax 1.0's step: `obs, state, reward, terminated, truncated, info`, with
the last observation of an ending episode in `info["final_observation"]`; an env with action
masks also gives `action_mask(state, params)` and `info["final_action_mask"]` (`vector_mask`).
"""

import importlib
import importlib.util
import sys
import types


class _Deferred(types.ModuleType):
    """A stand-in for a module not yet imported: it imports the module when one of its
    attributes is first read, and from then on reads them from it."""

    def __getattr__(self, attr: str):
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def _import_when_used(name: str) -> None:
    """Put a `_Deferred` stand-in for module `name` in `sys.modules`, where it is installed and
    not yet imported. gymnax imports every env module on `import gymnax`, and Pong's and
    Catch's import seaborn and matplotlib.pyplot (with pandas and scipy.stats) for their
    renderers alone: 2.3 of the 6.5 s that `algorithms/ppo.py --dry-run` took on 2 cores.
    Code that uses them sees no difference: they are imported when first read. Only the top
    package is looked up: finding `matplotlib.pyplot` would import matplotlib (0.4 s) here."""
    if name not in sys.modules and importlib.util.find_spec(name.partition(".")[0]) is not None:
        sys.modules[name] = _Deferred(name)


_import_when_used("seaborn")
_import_when_used("matplotlib.pyplot")

from canter.common.envs.registry import (  # noqa: E402
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
from canter.common.envs.suites import (  # noqa: E402
    BRAX_ENVS,
    HOST_PREFIX,
    MINATAR_GAMES,
    MUJOCO_TASKS,
    PLAYGROUND_TASKS,
    STICKY_ACTION_ENVS,
)
from canter.common.envs.wrappers import base_state, ended_episodes  # noqa: E402

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
    "ended_episodes",
    "evaluation_env",
    "is_host_env",
    "make_env",
    "register_env",
    "truncation_gap",
    "vector_mask",
    "vector_step",
]

"""Continuous control simulated in JAX: `--env playground:CheetahRun`, `--env brax:hopper`.

Two suites whose physics runs inside the compiled program, so that a whole run (simulator and
agent) is one XLA program, on the CPU or on a GPU:

- **MuJoCo Playground's DM Control Suite** (`playground:<Task>`, the `playground` extra:
  playground 0.2.0 with mujoco-mjx): the 25 tasks of the DeepMind Control Suite on MJX, built
  with MJX's JAX implementation (`impl="jax"`; Playground's default, Warp, needs a CUDA GPU).
  Their XML ships in the wheel. Playground's locomotion and manipulation envs are refused: they
  `git clone` mujoco_menagerie on first load, and canter fetches nothing at run time.
- **Brax's envs** (`brax:<name>`, the `brax` extra: brax 0.14.2): ant, halfcheetah, hopper,
  humanoid, walker2d, ... with Brax's `positional` backend, the one PureJaxRL's continuous PPO
  and rejax's Brax speed figures use: position-based dynamics, several times faster than
  `generalized` on a CPU. Refused: swimmer (Brax builds it on `generalized` only, whose fluid
  forces call an argument of `jnp.clip` that jax 0.10 removed). Upstream keeps these envs for
  reproducing papers and points new work to Playground.

Both give gymnax 1.0's step through `SpareResetEnv` (common/envs/spares.py):

- **terminated and truncated apart.** Neither suite ends an episode by time: a training
  wrapper does, at `episode_length` (1,000 control steps in both). Here that limit is a
  truncation (the algorithms bootstrap from it). A DM Control episode ends otherwise only if
  the physics diverges (NaN); a Brax episode ends when the body is unhealthy (hopper and walker2d
  fall, ant flips): both are terminations.
- **The final observation** of an ending episode is in `info["final_observation"]`.
- **Resets from spares** (common/envs/spares.py): each env draws two initial states when it
  is created, plays the first, and at every episode end continues in the second, the same one
  every time, as Brax's and Playground's own training wrappers restart each env from the
  state it drew first. A fresh reset per episode would cost a `while_loop` around the reset,
  which XLA:CPU makes as slow as the step itself (spares.py), or, for CheetahRun, 200 physics
  steps of settling per reset. The batch of num_envs envs still starts from num_envs different
  states.
- **Actions** are a Box of the model's actuator control ranges; observations are float32 vectors.

Importing either suite is slow (mujoco, warp, ml_collections), so it happens only when an env of
that suite is built.
"""

import contextlib
import functools
import os
import warnings
from collections.abc import Iterator
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs.host import quiet_mujoco
from canter.common.envs.spares import SpareResetEnv
from canter.common.envs.suites import (
    BRAX_ENVS,
    BRAX_INSTALL,
    BRAX_PREFIX,
    PLAYGROUND_INSTALL,
    PLAYGROUND_PREFIX,
    PLAYGROUND_TASKS,
)
from canter.common.envs.wrappers import base_state
from gymnax.environments import spaces
from jaxtyping import Array, Bool, Int, PRNGKeyArray

EPISODE_LENGTH = 1_000  # control steps: Playground's DM Control and Brax's training default
BRAX_BACKEND = "positional"
# Brax 0.14.2's envs that cannot run here, and why.
BRAX_REFUSED = {
    "swimmer": "Brax builds it on the generalized backend only, whose fluid forces call "
    "`jnp.clip(a_min=...)`, which jax 0.10 removed",
    "fast": "a stub of Brax's own tests, not a task",
}


@contextlib.contextmanager
def quiet_brax() -> Iterator[None]:
    """Brax 0.14.2 reads MJX fields that MJX 3.17 deprecates (`Accessing `ncon` directly from
    `Data` is deprecated`), a warning per trace that a user can do nothing about: dropped."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Accessing `", DeprecationWarning)
        yield


class PhysicsParams(eqx.Module):
    """The episode limit canter reads from every env's params (the suites' settings live in
    the env object)."""

    max_steps_in_episode: int = eqx.field(static=True)


class PhysicsState(eqx.Module):
    """The suite's own state (Playground's or Brax's `State`) and the control steps taken."""

    inner: Any
    time: Int[Array, ""]


class PhysicsEnv(SpareResetEnv):
    """A Playground or Brax env (`reset(key) -> State`, `step(State, action) -> State` with
    `obs`, `reward`, `done`) behind gymnax's interface, resets from spares."""

    remake_spares = False  # Brax's and Playground's behaviour: common/envs/spares.py says why

    def __init__(self, name: str, env: Any, low: np.ndarray, high: np.ndarray):
        super().__init__()
        self.env_name = name
        self.physics = env
        self.low, self.high = low.astype(np.float32), high.astype(np.float32)

    @functools.cached_property
    def obs_size(self) -> int:
        # Traced when first asked, not in the constructor: the registry builds envs under
        # `jax.ensure_compile_time_eval`, where tracing MJX's reset runs each of its constant
        # operations eagerly, one compiled program each (327 programs, 20 of the 26 s that a
        # Playground CartpoleBalance dry run took on 2 cores).
        key = jax.random.key_data(jax.random.key(0))
        return int(jax.eval_shape(self.physics.reset, key).obs.shape[0])

    @property
    def name(self) -> str:
        return self.env_name

    @property
    def default_params(self) -> PhysicsParams:
        return PhysicsParams(EPISODE_LENGTH)

    def reset_inner(self, key: PRNGKeyArray, params: PhysicsParams) -> tuple[Array, PhysicsState]:
        with quiet_brax():
            inner = self.physics.reset(jax.random.key_data(key))  # the suites take raw keys
        # Strongly typed arrays: CheetahRun's reset sets `data.time = 0.0`, a Python float that
        # a step makes a float32 array, so every program that took a reset state would be
        # compiled again for the stepped one (7 s for CheetahRun on 2 CPU cores).
        inner = jax.tree.map(lambda x: jnp.asarray(x, jnp.result_type(x)), inner)
        return inner.obs.astype(jnp.float32), PhysicsState(inner, jnp.zeros((), jnp.int32))

    def step_inner(
        self, key: PRNGKeyArray, state: PhysicsState, action: Any, params: PhysicsParams
    ) -> tuple:
        with quiet_brax():
            inner = self.physics.step(state.inner, jnp.asarray(action, jnp.float32))
        time = state.time + 1
        terminated: Bool[Array, ""] = inner.done > 0
        truncated = jnp.logical_and(
            time >= params.max_steps_in_episode, jnp.logical_not(terminated)
        )
        reward = jnp.asarray(inner.reward, jnp.float32)
        return (
            inner.obs.astype(jnp.float32),
            PhysicsState(inner, time),
            reward,
            terminated,
            truncated,
            {},
        )

    def frames(self, states: list, height: int = 240, width: int = 320) -> list[np.ndarray]:
        """RGB frames of a list of (unbatched) states, drawn offscreen by MuJoCo's renderer
        from the positions and velocities; a clear error where no OpenGL context can be had."""
        import mujoco

        model = self.mj_model
        try:
            renderer = mujoco.Renderer(model, height, width)
        except Exception as error:  # no OpenGL here: MuJoCo and PyOpenGL raise various types
            reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
            backend = os.environ.get("MUJOCO_GL", "glfw")
            raise ConfigError(
                f"{self.name} cannot draw frames here ({type(error).__name__}: {reason}). "
                f"MuJoCo drew with MUJOCO_GL={backend}; offscreen it needs EGL (MUJOCO_GL=egl, "
                "apt install libegl1) or OSMesa (MUJOCO_GL=osmesa, apt install libosmesa6)."
            ) from None
        data, images = mujoco.MjData(model), []
        for state in states:
            qpos, qvel = self.positions(base_state(state).state.inner)
            data.qpos[:], data.qvel[:] = np.asarray(qpos), np.asarray(qvel)
            mujoco.mj_forward(model, data)
            renderer.update_scene(data)
            images.append(renderer.render().copy())
        renderer.close()
        return images

    @property
    def mj_model(self) -> Any:
        """The MuJoCo model of the simulated system (for drawing)."""
        model = getattr(self.physics, "mj_model", None)  # Playground
        return model if model is not None else self.physics.sys.mj_model  # Brax

    def positions(self, inner: Any) -> tuple[Array, Array]:
        """(qpos, qvel) of a Playground or Brax state."""
        if hasattr(inner, "data"):  # Playground: MJX data
            return inner.data.qpos, inner.data.qvel
        return inner.pipeline_state.q, inner.pipeline_state.qd  # Brax

    @property
    def action_size(self) -> int:
        return int(self.low.shape[0])

    def action_space(self, params: PhysicsParams | None = None) -> spaces.Box:
        return spaces.Box(jnp.asarray(self.low), jnp.asarray(self.high), (self.action_size,))

    def observation_space(self, params: PhysicsParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.obs_size,), jnp.float32)


def mujoco_compat() -> None:
    """Playground 0.2.0's Reacher tasks find their target with `MjSpec.find_body(name)`, which
    MuJoCo renamed `MjSpec.body(name)` (3.17 has only the new name): give the old name back."""
    import mujoco

    if not hasattr(mujoco.MjSpec, "find_body"):
        mujoco.MjSpec.find_body = mujoco.MjSpec.body


def make_playground_env(name: str) -> tuple[PhysicsEnv, PhysicsParams]:
    """`playground:<Task>`: a DM Control task on MJX and its params; a clear refusal for a
    name canter cannot run or without the extra, before anything compiles."""
    task = name.removeprefix(PLAYGROUND_PREFIX)
    accepted = f"Accepted: {', '.join(PLAYGROUND_PREFIX + t for t in PLAYGROUND_TASKS)}"
    if task not in PLAYGROUND_TASKS:
        try:
            from mujoco_playground import locomotion, manipulation

            elsewhere = task in locomotion.ALL_ENVS or task in manipulation.ALL_ENVS
        except ImportError:
            elsewhere = False
        if elsewhere:
            raise ConfigError(
                f"{name} is not available: Playground's locomotion and manipulation envs "
                "git-clone mujoco_menagerie when first loaded, and canter fetches nothing at "
                f"run time. {accepted}."
            )
        raise ConfigError(f"Unknown Playground environment '{task}'. {accepted}.")
    try:
        from mujoco_playground import dm_control_suite
    except ImportError as error:
        raise ConfigError(f"{name} needs the playground extra: {PLAYGROUND_INSTALL}.") from error
    quiet_mujoco()  # cheetah.xml's deprecated `settotalmass`, as on the host
    mujoco_compat()
    env = dm_control_suite.load(task, config_overrides={"impl": "jax"})
    config = env._config  # the task's own settings: every DM Control task has these two
    if int(config.episode_length) != EPISODE_LENGTH or int(config.action_repeat) != 1:
        raise ConfigError(f"{name}: unexpected episode settings {dict(config)}.")
    ranges = np.asarray(env.mj_model.actuator_ctrlrange)
    adapter = PhysicsEnv(name, env, ranges[:, 0], ranges[:, 1])
    return adapter, adapter.default_params


def make_brax_env(name: str) -> tuple[PhysicsEnv, PhysicsParams]:
    """`brax:<name>`: a Brax env (positional backend) and its params; a clear refusal for an
    unknown name or without the extra, before anything compiles."""
    env_name = name.removeprefix(BRAX_PREFIX)
    if env_name in BRAX_REFUSED:
        accepted = ", ".join(BRAX_PREFIX + e for e in BRAX_ENVS)
        raise ConfigError(
            f"{name} is not available: {BRAX_REFUSED[env_name]}. Accepted: {accepted}."
        )
    if env_name not in BRAX_ENVS:
        raise ConfigError(
            f"Unknown Brax environment '{env_name}'. Accepted: "
            f"{', '.join(BRAX_PREFIX + e for e in BRAX_ENVS)}."
        )
    try:
        from brax import envs
    except ImportError as error:
        raise ConfigError(f"{name} needs the brax extra: {BRAX_INSTALL}.") from error
    with warnings.catch_warnings():  # "not actively maintained", on every model load: the
        # docs say it once (docs/environments.md, Brax)
        warnings.filterwarnings("ignore", "Brax System, piplines", UserWarning)
        env = envs.get_environment(env_name, backend=BRAX_BACKEND)
    ranges = np.asarray(env.sys.actuator.ctrl_range)
    adapter = PhysicsEnv(name, env, ranges[:, 0], ranges[:, 1])
    return adapter, adapter.default_params

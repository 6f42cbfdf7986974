"""Host environments: any Gymnasium environment inside the compiled step (`gymnasium:<id>`).

Simulators such as MuJoCo and the Atari emulator run on the host, not as JAX programs. canter
reaches them from inside the compiled interval through `jax.pure_callback` with
`vmap_method="broadcast_all"`: one host call per env step of the whole batch (every seed,
sweep point and env at once), so vmapped seeds, sweeps and `num_envs` work as they do for gymnax
environments (the runner keeps such a run on one device: the callback runs on one). The JAX-side
state of one environment (`HostState`) is its slot in a host pool, the pool's generation, its
seed words and its step count; the simulator's own state lives in the pool.

- Slots: each reset call allocates fresh slots for the whole batch it is given (so the padding
  copies the runner adds to a batch get envs of their own). An env is seeded once, at its first
  reset, from its JAX key (two uint32 words), so the same seed gives the same numbers.
- Steps follow gymnax 1.0 exactly: `terminated`, `truncated`, `info["final_observation"]` the
  last observation of the episode, and the returned observation the next episode's first (the
  host resets in the same step; Gymnasium's vector envs would reset on the next step).
- Atari (`ALE/<Game>-v5`, or `<Game>NoFrameskip-v4` without sticky actions) comes
  preprocessed as DQN and CleanRL train it (common/envs/atari.py); each step also reports
  `info["life_lost"]` (from Gymnasium's `lives`).
- Actions: integers for Discrete spaces; Box actions are clipped to the space's bounds on the
  host (as SB3 and CleanRL do), the agent's unclipped action stays what it learns from.
- Envs unused for longest are closed once the pool holds more than `4 x` the largest batch it
  was asked to reset (evaluation resets a fresh batch every interval). A slot that is stepped
  after it was closed, or after a restart of the process (`--resume`: simulators cannot be
  checkpointed), gets a new env seeded from its seed words and step count (so a resumed run is
  a function of its checkpoint): its episode ends there as truncated, and a new one starts.
- A ragged last interval skips its surplus iterations with a real `lax.cond` (its predicate
  depends on the interval index only, never on the vmapped axis), so they step no simulator.
"""

import atexit
import functools
import hashlib
import os
import threading
import warnings
from collections import OrderedDict
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs import atari
from canter.common.envs.suites import HOST_PREFIX
from jaxtyping import Array, Int, UInt32

MUJOCO = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "Swimmer", "Reacher")
MUJOCO += ("Pusher", "InvertedPendulum", "InvertedDoublePendulum")
# env id prefixes -> the extra that brings their simulator (Atari's ids: atari.is_atari)
EXTRAS = dict.fromkeys(MUJOCO, "mujoco")


class UnknownGymnasiumId(ConfigError):
    """`gymnasium:<id>` for an id Gymnasium does not register (registry.py adds what to use
    instead where the id is a gymnax name)."""


class HostParams(eqx.Module):
    """What gymnax-style code reads from an env's params: the episode step limit."""

    max_steps_in_episode: int = eqx.field(static=True)


class HostState(eqx.Module):
    """One environment's JAX-side state: where its simulator is, and how to reseed a new one.

    `slot` indexes the host pool of the process `generation` names; `seed` holds the env's key
    words, from which a replacement simulator is seeded (with `time`) when the pool has lost
    it: after `--resume` in a new process, or after eviction.
    """

    slot: Int[Array, ""]
    generation: Int[Array, ""]
    seed: UInt32[Array, " 2"]
    time: Int[Array, ""]


def _extra_for(env_id: str) -> str | None:
    if atari.is_atari(env_id):
        return "atari"
    return next((extra for key, extra in EXTRAS.items() if env_id.startswith(key)), None)


def _gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError:
        raise ConfigError(
            "gymnasium: environments need Gymnasium: pip install -e '.[gymnasium]'."
        ) from None
    return gymnasium


# MuJoCo 3.x warns, through mju_warning (C: printed to stderr plus a blank line, and appended
# to MUJOCO_LOG.TXT in the working directory), that Gymnasium's half_cheetah.xml (and DM
# Control's cheetah.xml, common/envs/physics.py) uses the deprecated compiler attribute
# `settotalmass`: once per model compile, so once per env created.
_MUJOCO_DEPRECATED = "'settotalmass' is deprecated"


def _mujoco_warning(message: str) -> None:
    """MuJoCo's warning handler: drop the one known deprecation of Gymnasium's own XML, print
    every other warning to stderr (once per message and place, as Python warnings are)."""
    if _MUJOCO_DEPRECATED not in message:
        warnings.warn(f"MuJoCo: {message}", RuntimeWarning, stacklevel=2)


@functools.cache
def quiet_mujoco() -> None:
    """Install `_mujoco_warning` as MuJoCo's warning handler, unless one is set already (by the
    user) or MuJoCo is not installed. A handler replaces the default print and the log file."""
    try:
        import mujoco
    except ImportError:
        return
    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_mujoco_warning)


def make_gymnasium(env_id: str, **kwargs: Any) -> Any:
    """A Gymnasium env as canter steps it: Atari preprocessed (common/envs/atari.py), anything
    else as registered, without Gymnasium's passive checker (it re-checks every step in Python).
    MuJoCo's deprecation warning for Gymnasium's own models is dropped (`quiet_mujoco`)."""
    import gymnasium

    if _extra_for(env_id) == "mujoco":
        quiet_mujoco()
    if atari.is_atari(env_id):
        return atari.make(gymnasium, env_id, **kwargs)
    return gymnasium.make(env_id, disable_env_checker=True, **kwargs)


def make_host_env(name: str) -> tuple["GymnasiumEnv", HostParams]:
    """`gymnasium:<id>` as a gymnax-style environment and its params, or a ConfigError."""
    gymnasium = _gymnasium()
    env_id = name.removeprefix(HOST_PREFIX)
    if atari.is_atari(env_id):
        atari.register(gymnasium, name)
    try:
        spec = gymnasium.spec(env_id)
    except gymnasium.error.Error:
        close = [n for n in gymnasium.registry if n.split("-")[0] == env_id.split("-")[0]]
        hint = f" Registered versions: {', '.join(close)}." if close else ""
        raise UnknownGymnasiumId(
            f"{name}: Gymnasium has no environment '{env_id}'.{hint} Every id in "
            "gymnasium.registry works, e.g. gymnasium:CartPole-v1, gymnasium:HalfCheetah-v5."
        ) from None
    try:
        probe = make_gymnasium(env_id)
    except (ImportError, gymnasium.error.DependencyNotInstalled) as error:
        extra = _extra_for(env_id)
        install = f"pip install -e '.[{extra}]'" if extra else "install what Gymnasium names"
        raise ConfigError(
            f"{name} cannot be built here ({error}): {install}"
            + (f" (canter's {extra} extra)." if extra else ".")
        ) from None
    max_steps = atari.max_steps(spec) if atari.is_atari(env_id) else spec.max_episode_steps
    env = GymnasiumEnv(env_id, probe, max_steps)
    return env, HostParams(env.max_steps)


class GymnasiumEnv:
    """A Gymnasium environment behind gymnax 1.0's API (`reset`, six-value `step`, spaces)."""

    def __init__(self, env_id: str, probe: Any, max_episode_steps: int | None):
        self.env_id = env_id
        self.name = HOST_PREFIX + env_id
        self.max_steps = int(max_episode_steps or 1000)
        space = probe.observation_space
        self._atari = atari.is_atari(env_id)
        if self._atari:
            space = atari.channels_last(space)
        self._observation_space = _to_gymnax(space, self.name, "observation")
        self._action_space = _to_gymnax(probe.action_space, self.name, "action")
        self._discrete = hasattr(self._action_space, "n")
        # Byte images (Atari frames) cross to the device as bytes; FloatObservation casts them.
        self._obs_dtype = np.uint8 if space.dtype == np.uint8 else np.float32
        self._low = None if self._discrete else np.asarray(probe.action_space.low, np.float32)
        self._high = None if self._discrete else np.asarray(probe.action_space.high, np.float32)
        probe.close()
        self.pool = HostPool(env_id, tuple(space.shape), self._obs_dtype, self._atari)

    @property
    def default_params(self) -> HostParams:
        return HostParams(self.max_steps)

    @property
    def num_actions(self) -> int:
        return int(self._action_space.n) if self._discrete else int(self._action_space.shape[0])

    def observation_space(self, params: Any = None) -> Any:
        return self._observation_space

    def action_space(self, params: Any = None) -> Any:
        return self._action_space

    def _obs_shape(self) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(tuple(self._observation_space.shape), self._obs_dtype)

    # Each callback argument and result costs about 10 us to cross (measured: 5 in and 7 out
    # 123 us a call, 2 and 3 out 67 us), so both sides pack theirs into few arrays.

    def reset(self, key: Array, params: Any = None) -> tuple[Array, HostState]:
        seed = jax.random.key_data(key).astype(jnp.uint32)
        ids_shape = jax.ShapeDtypeStruct((2,), jnp.int32)  # slot, generation
        ids, obs = jax.pure_callback(
            self.pool.reset, (ids_shape, self._obs_shape()), seed, vmap_method="broadcast_all"
        )
        return obs, HostState(ids[0], ids[1], seed, jnp.zeros((), jnp.int32))

    def step(self, key: Array, state: HostState, action: Any, params: Any = None) -> tuple:
        action = jnp.asarray(action, jnp.int32 if self._discrete else jnp.float32)
        seed = jax.lax.bitcast_convert_type(state.seed, jnp.int32)
        ids = jnp.concatenate([state.slot[None], state.generation[None], seed, state.time[None]])
        obs_shape = self._obs_shape()
        shapes = (
            jax.ShapeDtypeStruct((2, *obs_shape.shape), obs_shape.dtype),  # obs, final obs
            jax.ShapeDtypeStruct((), jnp.float32),  # reward
            jax.ShapeDtypeStruct((5,), jnp.int32),  # ended: terminated, truncated; slot,
        )  # generation; a life lost (Atari)
        pair, reward, out = jax.pure_callback(
            functools.partial(self.pool.step, low=self._low, high=self._high),
            shapes,
            ids,
            action,
            vmap_method="broadcast_all",
        )
        obs, final = pair[0], pair[1]
        terminated, truncated = out[0].astype(bool), out[1].astype(bool)
        done = jnp.logical_or(terminated, truncated)
        state = HostState(out[2], out[3], state.seed, jnp.where(done, 0, state.time + 1))
        info = {
            "final_observation": final,
            "discount": 1.0 - terminated.astype(jnp.float32),
            "life_lost": out[4].astype(bool),
        }
        return obs, state, reward, terminated, truncated, info


def _to_gymnax(space: Any, name: str, what: str) -> Any:
    """A Gymnasium Discrete or Box space as gymnax's; other spaces are refused by name."""
    from gymnasium import spaces as gym_spaces
    from gymnax.environments import spaces

    if isinstance(space, gym_spaces.Discrete) and what == "action":
        return spaces.Discrete(int(space.n))
    if isinstance(space, gym_spaces.Box):
        low = np.asarray(space.low, np.float32)
        high = np.asarray(space.high, np.float32)
        return spaces.Box(low, high, tuple(space.shape), jnp.float32)
    kind = type(space).__name__
    raise ConfigError(
        f"{name} has a {kind} {what} space ({space}); canter handles Box observations and "
        "Discrete or Box actions. Flatten it with a Gymnasium wrapper and register the result."
    )


class HostPool:
    """The host side: this process's Gymnasium envs by slot, made at reset, stepped in batches.

    `generation` tells this process's slots from those in a checkpoint written by another; a
    step on a slot the pool does not hold (another generation, or evicted) starts a new env.
    """

    def __init__(self, env_id: str, obs_shape: tuple[int, ...], obs_dtype: Any, stacked: bool):
        self.env_id = env_id
        self.stacked = stacked  # Atari's frame stacks arrive channels first, leave channels last
        self.obs_shape = obs_shape
        self.obs_dtype = obs_dtype
        self.generation = int.from_bytes(os.urandom(4), "little") >> 1
        self.envs: OrderedDict[int, Any] = OrderedDict()  # slot -> env, least recently used first
        self.lives: dict[int, int] = {}  # slot -> lives left (games that have lives)
        self.next_slot = 0
        self.largest_reset = 1
        self.steps = 0  # env steps taken, over every slot
        # Each device of a sharded run may call back from its own thread.
        self.lock = threading.Lock()
        atexit.register(self.close)  # simulators left open at exit make ale-py's bindings warn

    def close(self) -> None:
        """Close every simulator; a later step on a slot makes a new one (as after eviction)."""
        with self.lock:
            while self.envs:
                self.envs.popitem()[1].close()
            self.lives.clear()

    def _new(self, seed: int) -> tuple[int, np.ndarray]:
        env = make_gymnasium(self.env_id)
        obs, info = env.reset(seed=seed)
        env.action_space.seed(seed)
        slot, self.next_slot = self.next_slot, self.next_slot + 1
        self.envs[slot] = env
        self.lives[slot] = info.get("lives", 0)
        return slot, self._obs(obs)

    def _obs(self, obs: Any) -> np.ndarray:
        obs = np.asarray(obs, self.obs_dtype)
        return atari.frames_last(obs) if self.stacked else obs

    def reset(self, seed_words: Any) -> tuple[np.ndarray, np.ndarray]:
        """New envs for a batch of key words (`[..., 2]` uint32): `[..., 2]` ids (slot,
        generation) and the first observations."""
        with self.lock:
            words = np.asarray(seed_words, np.uint32)
            batch = words.shape[:-1]
            made = [self._new(_seed(w)) for w in words.reshape(-1, words.shape[-1])]
            self.largest_reset = max(self.largest_reset, len(made))
            self._evict()
            slots, observations = zip(*made, strict=True)
            obs = np.stack(observations)
            ids = np.stack([np.asarray(slots, np.int32), np.full(len(slots), self.generation)], -1)
            return ids.reshape(batch + (2,)).astype(np.int32), obs.reshape(batch + obs.shape[1:])

    def step(self, ids: Any, actions: Any, low: Any, high: Any) -> tuple:
        """Step each env once (resetting it where its episode ended), in batch order. `ids` is
        `[..., 5]` int32: slot, generation, seed words (bits of two uint32), step count."""
        with self.lock:
            ids = np.asarray(ids, np.int32)
            batch = ids.shape[:-1]
            n = int(np.prod(batch))
            ids = ids.reshape(n, 5)
            actions = np.asarray(actions).reshape((n,) + np.shape(actions)[len(batch) :])
            if low is None:
                actions = actions.tolist()  # Python ints: what Discrete spaces take, and fast
            else:
                actions = np.clip(actions, low, high)
            pair = np.empty((n, 2) + self.obs_shape, self.obs_dtype)
            obs, final = pair[:, 0], pair[:, 1]  # views: filled in place
            reward = np.zeros(n, np.float32)
            terminated, truncated, life_lost = (
                np.zeros(n, bool),
                np.zeros(n, bool),
                np.zeros(n, bool),
            )
            out_slots = ids[:, 0].copy()
            rows = zip(ids[:, 0].tolist(), ids[:, 1].tolist(), strict=True)
            for i, (slot, generation) in enumerate(rows):
                env = self.envs.get(slot) if generation == self.generation else None
                if env is None:
                    # The simulator is gone (a checkpoint of another process, or evicted): a
                    # new one, seeded from the env's key words and step count; the episode in
                    # flight ends there, as truncated.
                    words = ids[i, 2:].view(np.uint32)  # seed words and step count
                    out_slots[i], obs[i] = self._new(_seed(words))
                    final[i], truncated[i] = obs[i], True
                    continue
                self.envs.move_to_end(slot)
                next_obs, reward[i], terminated[i], truncated[i], info = env.step(actions[i])
                final[i] = next_obs = self._obs(next_obs)
                lives = info.get("lives", 0)
                life_lost[i], self.lives[slot] = lives < self.lives[slot], lives
                if terminated[i] or truncated[i]:  # gymnax 1.0: reset within this step
                    next_obs, info = env.reset()
                    next_obs, self.lives[slot] = self._obs(next_obs), info.get("lives", 0)
                obs[i] = next_obs
            self.steps += n
            self._evict()
            flags = np.stack(
                [terminated, truncated, out_slots, np.full(n, self.generation), life_lost], -1
            )
            return (
                pair.reshape(batch + pair.shape[1:]),
                reward.reshape(batch),
                flags.astype(np.int32).reshape(batch + (5,)),
            )

    def _evict(self) -> None:
        """Close the envs unused for longest once the pool holds over 4x the largest reset
        batch (evaluation resets a fresh batch every interval)."""
        while len(self.envs) > 4 * self.largest_reset:
            slot, env = self.envs.popitem(last=False)
            self.lives.pop(slot, None)
            env.close()


def _seed(words: np.ndarray) -> int:
    """A Gymnasium seed (a non-negative int) from uint32 words (a JAX key's data)."""
    digest = hashlib.blake2b(np.asarray(words, np.uint32).tobytes(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def render_episode(
    env: GymnasiumEnv, policy: Any, seed: int, max_steps: int
) -> tuple[list, list[float]]:
    """One episode (at most `max_steps`) of `policy(obs) -> action` on a fresh simulator,
    through the env's own `rgb_array` renderer: the frames (arrays) and the running return."""
    import gymnasium

    try:
        renderer = make_gymnasium(env.env_id, render_mode="rgb_array")
    except (TypeError, gymnasium.error.Error) as error:
        raise ConfigError(f"{env.name} cannot render frames: {error}") from None
    obs, _ = renderer.reset(seed=seed)
    try:
        frames, returns, total = [renderer.render()], [0.0], 0.0
    except Exception as error:  # no OpenGL here: MuJoCo raises FatalError, PyOpenGL others
        renderer.close()
        reason = str(error).strip().splitlines()[0] if str(error).strip() else ""
        hint = ""
        if _extra_for(env.env_id) == "mujoco":
            backend = os.environ.get("MUJOCO_GL", "glfw")
            hint = (
                f" MuJoCo drew with MUJOCO_GL={backend}; offscreen it needs EGL "
                "(MUJOCO_GL=egl, apt install libegl1) or OSMesa (MUJOCO_GL=osmesa, apt install "
                "libosmesa6)."
            )
        raise ConfigError(
            f"{env.name} cannot draw frames here ({type(error).__name__}: {reason}).{hint}"
        ) from None
    for _ in range(max_steps):
        action = np.asarray(policy(env.pool._obs(obs).astype(np.float32)))
        action = int(action) if env._discrete else np.clip(action, env._low, env._high)
        obs, reward, terminated, truncated, _ = renderer.step(action)
        total += float(reward)
        frames.append(renderer.render())
        returns.append(total)
        if terminated or truncated:
            break
    renderer.close()
    return frames, returns

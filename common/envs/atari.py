"""Atari (`gymnasium:ALE/<Game>-v5`) as DQN (Mnih et al. 2015) and CleanRL's Atari files train it.

Everything canter knows about Atari is here; common/envs/host.py steps the emulator like any
Gymnasium env and asks this module how to build and lay it out.

- Preprocessing (`make`): no-op starts (up to 30), frame skip 4 with a max over the last two
  frames, 84x84 greyscale, the last 4 frames stacked, channels last (84x84x4 bytes, the HxWxC
  layout of every canter image); v5's sticky actions (0.25, Machado et al. 2018) stay on.
  `gymnasium:<Game>NoFrameskip-v4`, the id of DQN-era papers and of CleanRL's Atari files, is
  the same game without sticky actions: the same preprocessing, the same limits.
- Episode limit: ALE's own limit counts emulator frames (108,000: 30 minutes of play), so an
  episode lasts at most 108,000 / 4 agent steps.
- Training only (`AtariTraining`): a lost life ends the learner's episode and rewards are
  clipped to their sign. Evaluation runs on the env below it (`evaluation_env` in
  common/envs/registry.py), so evaluation returns are whole games and raw scores.
"""

from typing import Any

import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs.wrappers import Wrapper
from jaxtyping import Array

ALE_PREFIX = "ALE/"
NO_FRAMESKIP_SUFFIX = "NoFrameskip-v4"  # the v4 ids: no frame skip, no sticky actions
FRAME_SKIP, STACK = 4, 4
NOOP_MAX, SCREEN_SIZE = 30, 84
MAX_FRAMES = 108_000  # ALE's default max_num_frames_per_episode


def is_atari(env_id: str) -> bool:
    """Whether a Gymnasium id (without the `gymnasium:` prefix) is an Atari game."""
    return env_id.startswith(ALE_PREFIX) or env_id.endswith(NO_FRAMESKIP_SUFFIX)


def register(gymnasium: Any, name: str) -> None:
    """Make ALE's ids known to Gymnasium, or say which extra brings them."""
    try:
        import ale_py
    except ImportError:
        raise ConfigError(f"{name} needs ale-py: pip install -e '.[atari]'.") from None
    gymnasium.register_envs(ale_py)


def make(gymnasium: Any, env_id: str, **kwargs: Any) -> Any:
    """The preprocessed game (the module docstring), frames stacked channels first."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    # frameskip=1 here: AtariPreprocessing skips frames itself, max-pooling the last two.
    env = gymnasium.make(env_id, frameskip=1, disable_env_checker=True, **kwargs)
    env = AtariPreprocessing(env, noop_max=NOOP_MAX, frame_skip=FRAME_SKIP, screen_size=SCREEN_SIZE)
    return FrameStackObservation(env, STACK)


def max_steps(spec: Any) -> int:
    """Agent steps per episode at most: ALE's frame limit over the frame skip."""
    return spec.kwargs.get("max_num_frames_per_episode", MAX_FRAMES) // FRAME_SKIP


def channels_last(space: Any) -> Any:
    """A frame stack's Box (stack, height, width) as (height, width, stack)."""
    from gymnasium import spaces as gym_spaces

    low, high = (np.moveaxis(np.asarray(b), 0, -1) for b in (space.low, space.high))
    return gym_spaces.Box(low, high, low.shape, space.dtype)


def frames_last(obs: np.ndarray) -> np.ndarray:
    """One stacked observation (stack, height, width) as (height, width, stack)."""
    return np.moveaxis(obs, 0, -1)


class AtariTraining(Wrapper):
    """What DQN (Mnih et al. 2015) and CleanRL's Atari files train on, and do not evaluate on:
    with `episodic_life`, a lost life ends the learner's episode (`terminated`; the game goes
    on, as CleanRL's EpisodicLifeEnv), and with `clip_rewards` rewards are clipped to their
    sign. Wraps `EpisodeStats`, so the episode statistics stay whole games and raw scores;
    evaluation runs on `evaluation_env`, the env below this wrapper."""

    def __init__(self, env: Any, episodic_life: bool = True, clip_rewards: bool = True):
        super().__init__(env)
        self._episodic_life = episodic_life
        self._clip_rewards = clip_rewards

    @property
    def evaluation_env(self) -> Any:
        return self._env

    def step(self, key: Array, state: Any, action: Array | int | float, params: Any) -> tuple:
        obs, state, reward, terminated, truncated, info = self._env.step(key, state, action, params)
        if self._episodic_life:
            terminated = jnp.logical_or(terminated, info["life_lost"])
        if self._clip_rewards:
            reward = jnp.sign(reward)
        return obs, state, reward, terminated, truncated, info


def training_env(env: Any, *, episodic_life: bool, clip_rewards: bool) -> AtariTraining:
    """`env` (with episode statistics) under the training-only wrapper."""
    return AtariTraining(env, episodic_life=episodic_life, clip_rewards=clip_rewards)

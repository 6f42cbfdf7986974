"""`make_env(name)`: every gymnax environment (plus registered extras), validated and wrapped."""

from collections.abc import Callable
from typing import Any, Literal

import gymnax
from gymnax.environments import spaces

from common.config import ConfigError
from common.wrappers import EpisodeStats, FlattenObservation, ObservationSubset

ActionKind = Literal["discrete", "continuous"]

# Which canter file handles each kind of action space; named in error messages.
ALGORITHMS_FOR: dict[str, list[str]] = {
    "discrete": ["algorithms/ppo.py", "algorithms/dqn.py", "algorithms/pqn.py"],
    "continuous": ["algorithms/ppo_continuous.py", "algorithms/sac.py", "algorithms/td3.py"],
}

_EXTRA_ENVS: dict[str, Callable[[], tuple[Any, Any]]] = {}


def _cartpole_no_velocity() -> tuple[Any, Any]:
    """CartPole-v1 with the cart and pole velocities hidden: a memory task (ppo_rnn.py)."""
    env, params = gymnax.make("CartPole-v1")
    return ObservationSubset(env, (0, 2)), params


def register_env(name: str, factory: Callable[[], tuple[Any, Any]]) -> None:
    """Make a non-gymnax environment (a probe, your own task) available to `make_env`."""
    _EXTRA_ENVS[name] = factory


_EXTRA_ENVS["CartPole-v1-NoVelocity"] = _cartpole_no_velocity


def env_names() -> list[str]:
    """Every name `make_env` accepts."""
    return list(gymnax.registered_envs) + list(_EXTRA_ENVS)


def action_kind(env: Any, params: Any) -> ActionKind:
    """Whether the environment's action space is discrete or continuous."""
    space = env.action_space(params)
    if isinstance(space, spaces.Discrete):
        return "discrete"
    if isinstance(space, spaces.Box):
        return "continuous"
    raise ConfigError(f"{env.name} has an action space canter does not handle: {space}.")


def make_env(name: str, *, action: ActionKind | None = None, algorithm: str = "") -> tuple:
    """Build env `name` with flat observations and episode statistics, and its default params.

    With `action`, fail (before anything compiles) when the env's action space is of the other
    kind, naming the canter files that handle it.
    """
    if name in _EXTRA_ENVS:
        env, params = _EXTRA_ENVS[name]()
    elif name in gymnax.registered_envs:
        env, params = gymnax.make(name)
    else:
        raise ConfigError(f"Unknown environment '{name}'. Valid names: {', '.join(env_names())}.")
    kind = action_kind(env, params)
    if action is not None and kind != action:
        handlers = ALGORITHMS_FOR[kind]
        where = (
            f"use {' or '.join(handlers)} instead"
            if handlers
            else f"no canter algorithm handles {kind} actions yet"
        )
        raise ConfigError(
            f"{name} has a {kind} action space, but {algorithm or 'this algorithm'} handles "
            f"{action} actions only; {where}."
        )
    return EpisodeStats(FlattenObservation(env)), params

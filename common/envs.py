"""`make_env(name)`: every gymnax environment (plus registered extras), validated and wrapped.

Each environment is built once per process and reused: `make_train` may run under tracing (the
runner vmaps it over float hyperparameters), where building an env would trace its constructor,
and some gymnax constructors branch on arrays (FourRooms-misc, MetaMaze-misc). gymnax is
imported on first use, not on import: importing it starts JAX's backend (common/devices.py).
"""

import ast
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from common.config import ConfigError
from common.wrappers import EpisodeStats, FlattenObservation, ObservationSubset

ActionKind = Literal["discrete", "continuous"]

# gymnax names that cannot work here, and why: refused by name, left out of the valid list.
UNAVAILABLE = {
    "MNISTBandit-bsuite": "it downloads the MNIST data set when created, and canter does not "
    "fetch data at run time (runs often have no network)",
}

_EXTRA_ENVS: dict[str, Callable[[], tuple[Any, Any]]] = {}


def _cartpole_no_velocity() -> tuple[Any, Any]:
    """CartPole-v1 with the cart and pole velocities hidden: a memory task (ppo_rnn.py)."""
    import gymnax

    env, params = gymnax.make("CartPole-v1")
    return ObservationSubset(env, (0, 2)), params


def register_env(name: str, factory: Callable[[], tuple[Any, Any]]) -> None:
    """Make a non-gymnax environment (a probe, your own task) available to `make_env`."""
    _EXTRA_ENVS[name] = factory
    _build.cache_clear()


_EXTRA_ENVS["CartPole-v1-NoVelocity"] = _cartpole_no_velocity


def env_names() -> list[str]:
    """Every name `make_env` accepts."""
    import gymnax

    gymnax_names = [n for n in gymnax.registered_envs if n not in UNAVAILABLE]
    return gymnax_names + list(_EXTRA_ENVS)


def algorithms_for(kind: ActionKind) -> list[str]:
    """The algorithm files that handle `kind` actions: those declaring `ACTION_SPACE = kind`
    (read from the source, so a new file counts as soon as it exists)."""
    import algorithms

    found = []
    for path in sorted(Path(algorithms.__file__).parent.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign | ast.AnnAssign)
                and getattr(node.targets[0] if isinstance(node, ast.Assign) else node.target,
                            "id", None) == "ACTION_SPACE"
                and isinstance(node.value, ast.Constant) and node.value.value == kind
            ):  # fmt: skip
                found.append(f"algorithms/{path.name}")
    return found


def action_kind(env: Any, params: Any) -> ActionKind:
    """Whether the environment's action space is discrete or continuous."""
    from gymnax.environments import spaces

    space = env.action_space(params)
    if isinstance(space, spaces.Discrete):
        return "discrete"
    if isinstance(space, spaces.Box):
        return "continuous"
    raise ConfigError(f"{env.name} has an action space canter does not handle: {space}.")


@functools.cache
def _build(name: str) -> tuple[Any, Any]:
    import gymnax

    if name in UNAVAILABLE:
        raise ConfigError(f"{name} is not available: {UNAVAILABLE[name]}.")
    if name in _EXTRA_ENVS:
        env, params = _EXTRA_ENVS[name]()
    elif name in gymnax.registered_envs:
        env, params = gymnax.make(name)
    else:
        raise ConfigError(f"Unknown environment '{name}'. Valid names: {', '.join(env_names())}.")
    return EpisodeStats(FlattenObservation(env)), params


def make_env(name: str, *, action: ActionKind | None = None, algorithm: str = "") -> tuple:
    """Env `name` with flat observations and episode statistics, and its default params.

    With `action`, fail (before anything compiles) when the env's action space is of the other
    kind, naming the canter files that handle it.
    """
    env, params = _build(name)
    kind = action_kind(env, params)
    if action is not None and kind != action:
        handlers = algorithms_for(kind)
        where = (
            f"use {' or '.join(handlers)} instead"
            if handlers
            else f"no canter algorithm handles {kind} actions yet"
        )
        raise ConfigError(
            f"{name} has a {kind} action space, but {algorithm or 'this algorithm'} handles "
            f"{action} actions only; {where}."
        )
    return env, params

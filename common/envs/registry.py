"""`make_env(name)`: every gymnax environment (plus registered extras), validated and wrapped.

Each environment is built once per process and reused: `make_train` may run under tracing (the
runner vmaps it over float hyperparameters), where building an env would trace its constructor,
and some gymnax constructors branch on arrays (FourRooms-misc, MetaMaze-misc). gymnax is
imported on first use, not on import: importing it starts JAX's backend (common/run/devices.py).
A suite's adapter (and its package) likewise, when one of its envs is first built; the names,
prefixes and install lines this module lists and refuses with come from suites.py, which the
adapters read too, so that no adapter imports this module.
"""

import difflib
import functools
from collections.abc import Callable
from typing import Any, Literal

import jax
from canter.common.config import ConfigError
from canter.common.envs import atari
from canter.common.envs.suites import (
    BRAX_ENVS,
    BRAX_INSTALL,
    BRAX_PREFIX,
    CRAFTAX_GAMES,
    CRAFTAX_INSTALL,
    CRAFTAX_PREFIX,
    HOST_PREFIX,
    JAXMARL_INSTALL,
    JAXMARL_MPE,
    JAXMARL_PREFIX,
    JUMANJI_INSTALL,
    JUMANJI_PREFIX,
    JUMANJI_TASKS,
    MINIGRID_INSTALL,
    MINIGRID_PREFIX,
    MINIGRID_TASKS,
    PGX_GAMES,
    PGX_INSTALL,
    PGX_PREFIX,
    PLAYGROUND_INSTALL,
    PLAYGROUND_PREFIX,
    PLAYGROUND_TASKS,
    STICKY_ACTION_ENVS,
)
from canter.common.envs.wrappers import (
    EpisodeStats,
    FloatObservation,
    ObservationSubset,
    StickyActions,
    base_state,
)
from jax.typing import ArrayLike

ActionKind = Literal["discrete", "continuous"]


class ActionSpaceError(ConfigError):
    """An env whose actions are of the other kind; `kind` is the env's (the CLI names the
    algorithm files that handle it: algorithms/trainer.py)."""

    def __init__(self, message: str, kind: ActionKind):
        super().__init__(message)
        self.kind = kind


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


def _deep_sea_16() -> tuple[Any, Any]:
    """bsuite's DeepSea at size 16 (gymnax's `DeepSea-bsuite` is size 8): the treasure lies
    16 right moves away, each of them costs, so a dithering policy finds it once in 65,536
    episodes and learns to stay left; an exploration task (ppo_rnd.py)."""
    from gymnax.environments.bsuite.deep_sea import DeepSea

    env = DeepSea(size=16)
    return env, env.default_params


def register_env(name: str, factory: Callable[[], tuple[Any, Any]]) -> None:
    """Make a non-gymnax environment (a probe, your own task) available to `make_env`."""
    _EXTRA_ENVS[name] = factory
    _build.cache_clear()


_EXTRA_ENVS["CartPole-v1-NoVelocity"] = _cartpole_no_velocity
_EXTRA_ENVS["DeepSea-bsuite-16"] = _deep_sea_16


def env_names() -> list[str]:
    """Every name `make_env` accepts."""
    import gymnax

    gymnax_names = [n for n in gymnax.registered_envs if n not in UNAVAILABLE]
    return gymnax_names + list(_EXTRA_ENVS)


def is_host_env(env: Any) -> bool:
    """Whether `env` (wrapped or not) steps a simulator on the host (`gymnasium:<id>`): one
    process, one device, episodes that a `while_loop` ends early (common/envs/host.py)."""
    from canter.common.envs.host import GymnasiumEnv

    return isinstance(getattr(env, "unwrapped", env), GymnasiumEnv)


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
    """The bare environment `name` (built once: see the module docstring)."""
    import gymnax

    if name in UNAVAILABLE:
        raise ConfigError(f"{name} is not available: {UNAVAILABLE[name]}.")
    if name.startswith(HOST_PREFIX):  # a Gymnasium env stepped on the host (common/envs/host.py)
        from canter.common.envs.host import UnknownGymnasiumId, make_host_env

        try:
            return make_host_env(name)
        except UnknownGymnasiumId:
            env_id = name.removeprefix(HOST_PREFIX)
            if env_id in env_names():
                raise ConfigError(f"{env_id} is a gymnax env: use --env {env_id}.") from None
            raise
    # Constructors make arrays (MinAtar's action sets); under a trace (the first make_train of
    # a process may run inside jit or vmap, as evaluate.py's) they would be cached as tracers.
    with jax.ensure_compile_time_eval():
        if name.startswith(CRAFTAX_PREFIX):  # imported here: it imports gymnax
            from canter.common.envs.craftax import make_craftax_env

            return make_craftax_env(name)
        if name.startswith(JUMANJI_PREFIX):  # imports jumanji only for an id it accepts
            from canter.common.envs.jumanji import make_jumanji_env

            return make_jumanji_env(name)
        if name.startswith(MINIGRID_PREFIX):  # imported here: it imports gymnax
            from canter.common.envs.minigrid import make_minigrid_env

            return make_minigrid_env(name)
        if name.startswith(PLAYGROUND_PREFIX):  # imports Playground only for a name it accepts
            from canter.common.envs.physics import make_playground_env

            return make_playground_env(name)
        if name.startswith(BRAX_PREFIX):  # imports Brax only for a name it accepts
            from canter.common.envs.physics import make_brax_env

            return make_brax_env(name)
        if name.startswith(PGX_PREFIX):  # imports pgx only for a game it accepts
            from canter.common.envs.pgx import make_pgx_env

            return make_pgx_env(name)
        if name.startswith(JAXMARL_PREFIX):  # imports JaxMARL only for a name it accepts
            from canter.common.envs.jaxmarl import make_jaxmarl_env

            return make_jaxmarl_env(name)
        if name in _EXTRA_ENVS:
            return _EXTRA_ENVS[name]()
        if name in gymnax.registered_envs:
            return gymnax.make(name)
    if _is_gymnasium_id(name):
        raise ConfigError(f"{name} is a Gymnasium env: use --env {HOST_PREFIX}{name}.")
    raise ConfigError(
        f"Unknown environment '{name}'{_did_you_mean(name)}. "
        f"Valid names: {', '.join(env_names())}; "
        f"{', '.join(CRAFTAX_PREFIX + g for g in CRAFTAX_GAMES)} ({CRAFTAX_INSTALL}); "
        f"{', '.join(JUMANJI_PREFIX + t for t in JUMANJI_TASKS)} ({JUMANJI_INSTALL}); "
        f"{MINIGRID_PREFIX}MiniGrid-<task>, {len(MINIGRID_TASKS)} tasks such as "
        f"{MINIGRID_PREFIX}MiniGrid-DoorKey-5x5 ({MINIGRID_INSTALL}); "
        f"{PLAYGROUND_PREFIX}<Task>, the {len(PLAYGROUND_TASKS)} DM Control tasks such as "
        f"{PLAYGROUND_PREFIX}CheetahRun ({PLAYGROUND_INSTALL}); "
        f"{', '.join(BRAX_PREFIX + e for e in BRAX_ENVS)} ({BRAX_INSTALL}); "
        f"{PGX_PREFIX}<game>[-vs-<opponent>] for the board games such as "
        f"{PGX_PREFIX}connect_four-vs-mcts128 ({PGX_INSTALL}); "
        f"{', '.join(JAXMARL_PREFIX + e for e in JAXMARL_MPE)}, {JAXMARL_PREFIX}smax:<map> and "
        f"{JAXMARL_PREFIX}overcooked:<layout> for teams of agents ({JAXMARL_INSTALL}); and "
        f"{HOST_PREFIX}<id> for any Gymnasium id (e.g. {HOST_PREFIX}HalfCheetah-v5)."
    )


def _did_you_mean(name: str) -> str:
    """` (did you mean X?)` for the closest known names to a misspelt one, else ""."""
    known = [
        *env_names(),
        *(CRAFTAX_PREFIX + g for g in CRAFTAX_GAMES),
        *(JUMANJI_PREFIX + t for t in JUMANJI_TASKS),
        *(MINIGRID_PREFIX + t for t in MINIGRID_TASKS),
        *(PLAYGROUND_PREFIX + t for t in PLAYGROUND_TASKS),
        *(BRAX_PREFIX + e for e in BRAX_ENVS),
        *(PGX_PREFIX + g for g in PGX_GAMES),
        *(JAXMARL_PREFIX + e for e in JAXMARL_MPE),
    ]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.75)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


# The action kind of every env of a suite, known before its (slow) model build: a mismatch is
# refused at once (Playground's tasks take about 20 s to build on a CPU).
SUITE_KINDS: dict[str, ActionKind] = {PLAYGROUND_PREFIX: "continuous", BRAX_PREFIX: "continuous"}


def _is_gymnasium_id(name: str) -> bool:
    """Whether `name`, not a gymnax or registered name, is a Gymnasium id (an ALE game counts
    even before ale-py registers it): the refusal then says to prefix it, before anything else."""
    if atari.is_atari(name):
        return True
    try:
        import gymnasium
    except ImportError:
        return False
    return name in gymnasium.registry


def _refuse_team(name: str, agents: bool, algorithm: str) -> None:
    who = algorithm or "this algorithm"
    if agents:
        raise ConfigError(
            f"{who} trains a team of agents, and {name} is one agent's env: use "
            f"{JAXMARL_PREFIX}MPE_simple_spread_v3, {JAXMARL_PREFIX}smax:3m, "
            f"{JAXMARL_PREFIX}overcooked:cramped_room, ... ({JAXMARL_INSTALL}; "
            "docs/environments.md)."
        )
    raise ConfigError(f"{name} is a team of agents, and {who} trains one: use ippo.py or mappo.py.")


def _refuse_kind(name: str, kind: ActionKind, action: ActionKind, algorithm: str) -> None:
    raise ActionSpaceError(
        f"{name} has a {kind} action space, but {algorithm or 'this algorithm'} handles "
        f"{action} actions only.",
        kind,
    )


def make_env(
    name: str,
    *,
    action: ActionKind | None = None,
    algorithm: str = "",
    image: bool = False,
    image_hint: str = "",
    sticky_action_prob: float | ArrayLike = 0.0,
    episodic_life: bool = True,
    clip_rewards: bool = True,
    agents: bool = False,
) -> tuple:
    """Env `name` with float observations and episode statistics, and its default params.

    Observations are flat vectors, or with `image` keep their HxWxC shape (for a CNN; an env
    without image observations is refused, the message ending with the caller's `image_hint`,
    what to do instead, or by default `--network mlp`). With `action`, fail (before anything
    compiles) when the env's action space is of the other kind (an `ActionSpaceError`).
    `sticky_action_prob` wraps the MinAtar games in `StickyActions` (always, so a traced
    probability gives the same program as a concrete one); above 0 elsewhere it is refused.
    Atari (`gymnasium:ALE/...`) trains under `AtariTraining` (`episodic_life`, `clip_rewards`:
    training only; evaluation runs on `evaluation_env(env)`); other envs ignore both.
    A team of agents (`jaxmarl:...`, common/envs/jaxmarl.py) is for an algorithm that says
    `agents`, and such an algorithm takes nothing else: either mismatch is refused.
    """
    known = next((k for prefix, k in SUITE_KINDS.items() if name.startswith(prefix)), None)
    if name.removeprefix(PLAYGROUND_PREFIX).removeprefix(BRAX_PREFIX) not in (
        *PLAYGROUND_TASKS,
        *BRAX_ENVS,
    ):
        known = None  # an unknown task: the build's refusal names it first
    if action is not None and known is not None and known != action:
        _refuse_kind(name, known, action, algorithm)
    if agents != name.startswith(JAXMARL_PREFIX):
        _refuse_team(name, agents, algorithm)
    env, params = _build(name)
    kind = action_kind(env, params)
    if action is not None and kind != action:
        _refuse_kind(name, kind, action, algorithm)
    shape = tuple(env.observation_space(params).shape)
    if image and len(shape) != 3:
        image_hint = image_hint or (
            f"use --network mlp (image envs: {', '.join(STICKY_ACTION_ENVS)}, and "
            f"{HOST_PREFIX}ALE/<Game>-v5)"
        )
        raise ConfigError(
            f"{algorithm or 'this algorithm'}'s CNN needs image observations (height x width x "
            f"channels), but {name} gives shape {shape}; {image_hint}."
        )
    if name in STICKY_ACTION_ENVS:
        env = StickyActions(env, sticky_action_prob)
    elif not isinstance(sticky_action_prob, jax.Array) and sticky_action_prob > 0:
        raise ConfigError(
            f"sticky_action_prob = {sticky_action_prob}, but {name} does not support sticky "
            f"actions (those that do: {', '.join(STICKY_ACTION_ENVS)}); set it to 0."
        )
    env = EpisodeStats(FloatObservation(env, keep_shape=image or agents))
    if name.startswith(HOST_PREFIX) and atari.is_atari(name.removeprefix(HOST_PREFIX)):
        env = atari.training_env(env, episodic_life=episodic_life, clip_rewards=clip_rewards)
    return env, params


def evaluation_env(env: Any) -> Any:
    """The env evaluation runs on: `env` without training-only wrappers (Atari's life loss and
    reward clipping, common/envs/atari.py)."""
    return env.evaluation_env if isinstance(env, atari.AtariTraining) else env


def vector_step(env: Any) -> Callable:
    """`step` over a batch of envs (keys, states and actions with a leading env axis, shared
    params): `vmap(env.step)`, then, for an env whose resets happen across the batch (Craftax's
    spare worlds, common/envs/craftax.py), its `refill` of the batch. Every algorithm steps its
    training envs through this."""
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    refill = getattr(getattr(env, "unwrapped", env), "refill", None)
    if refill is None:
        return step

    def batch_step(keys: Any, states: Any, actions: Any, params: Any) -> tuple:
        obs, states, *rest = step(keys, states, actions, params)
        return (obs, refill(jax.random.fold_in(keys[0], 1), states, params), *rest)

    return batch_step


def truncation_gap(env: Any, params: Any) -> int | None:
    """The fewest steps between two truncations of one env, where canter knows it: gymnax's own
    `step` truncates at `time >= max_steps_in_episode` and its reset sets `time` to 0, so that
    many. None for an env whose step or truncation is its own (Gymnasium's wrappers, Jumanji's
    and Craftax's limits, the adapters here): a truncation may come at any step there."""
    from gymnax.environments.environment import Environment

    bare = getattr(env, "unwrapped", env)
    kind = type(bare)
    if not isinstance(bare, Environment) or kind.step is not Environment.step:
        return None
    if kind.is_truncated is not Environment.is_truncated:
        return None
    return int(params.max_steps_in_episode)


def vector_mask(env: Any) -> Callable[[Any, Any], Any]:
    """`mask(states, params)`: the valid actions of a batch of states, booleans `[n, num_actions]`
    from the bare env's `action_mask(state, params)` (Jumanji's tasks); for an env without masks
    it returns None, and the algorithms then compile no masking (common/blocks/masking.py).
    Training steps also find the mask of the state each step led to, before any reset, in
    `info["final_action_mask"]` (what a Q-learning target maximises over)."""
    bare = getattr(env, "unwrapped", env)
    if not hasattr(bare, "action_mask"):
        return lambda states, params: None
    mask = lambda state, params: bare.action_mask(base_state(state), params)  # noqa: E731
    return jax.vmap(mask, in_axes=(0, None))

"""JaxMARL's cooperative multi-agent envs (Rutherford et al. 2024) as one env of a team.

`--env jaxmarl:MPE_simple_spread_v3` (MPE), `jaxmarl:smax:3m` (SMAX against its heuristic
enemies, any of JaxMARL's maps), `jaxmarl:overcooked:cramped_room` (any of its layouts). The
`jaxmarl` extra (`pip install -e ".[jaxmarl]"`, jaxmarl 0.2.0) provides them. The adapter gives
the whole team gymnax's `Environment` interface, one step for all agents, so the runner's
rollouts, evaluation, checkpoints and GIFs run unchanged, and only the multi-agent files
(ippo.py, ...) take these envs (`make_env(..., agents=True)`; the others are refused):

- **Observations** `[num_agents, obs_dim]`: each agent's own, flattened, in JaxMARL's agent
  order (zero-padded to the longest, where agents differ).
- **Actions** `[num_agents]`: one discrete action per agent (`action_space` is one agent's).
- **Rewards.** The step's reward is the team's, as JaxMARL's `CTRolloutManager` defines it
  (`reward["__all__"]`): the sum of the agents' rewards in MPE, the shared team reward in SMAX
  (every ally gets the same), the delivery reward in Overcooked (both agents get it). The
  runner's returns are therefore team returns (JaxMARL's MPE logs read 3x an agent's own return,
  near the sum). Each agent's own reward is `info["agent_rewards"]`, and Overcooked's per-agent
  shaping `info["shaped_rewards"]`.
- **Episode ends.** JaxMARL marks every end `done`; canter tells a time limit from a real end
  (MPE and Overcooked end only by their limits: every end is a truncation, which bootstraps;
  SMAX terminates when a side is wiped out, truncates at its limit). Its auto-reset loses the
  final observation; here gymnax's `step` resets, so `info["final_observation"]` holds it.
- **Action masks** `[num_agents, num_actions]`: SMAX's available actions (a dead unit may only
  stop), all actions elsewhere (`action_mask(state, params)`, `info["final_action_mask"]`).
- **World state** (`world_state(state)`): what a centralised critic reads: SMAX's own
  (`obs["world_state"]`, all units, unnormalised as JaxMARL gives it), every agent's
  observation concatenated elsewhere (JaxMARL's MAPPO wrappers); the final one, before a reset,
  is `info["final_world_state"]`.
- **Wins** (SMAX): `info["won"]` where an episode ends with every enemy dead and an ally alive;
  the runner's evaluation reports the win rate (`wins`) for an env that `reports_wins`.

JaxMARL's episode lengths are kept as its envs count them: 26 steps in MPE (its limit is tested
before the step counter moves), 101 in a SMAX time-out, 400 in Overcooked.
"""

import functools
import math
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs.suites import JAXMARL_INSTALL, JAXMARL_MPE, JAXMARL_PREFIX
from gymnax.environments import environment, spaces
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray


class TeamParams(eqx.Module):
    """The episode limit canter reads from every env's params (JaxMARL's settings live in the
    env object)."""

    max_steps_in_episode: int = eqx.field(static=True)


class TeamState(eqx.Module):
    """JaxMARL's state, the steps taken, the world state of the current position (SMAX's comes
    with its observations), and whether the step that led here truncated the episode."""

    inner: Any
    time: Int[Array, ""]
    world: Float[Array, " world_dim"]
    truncated: Bool[Array, ""]


class Team(environment.Environment):
    """A JaxMARL env as one env whose observations, actions and masks have an agent axis."""

    def __init__(self, family: str, task: str):
        super().__init__()
        self.family, self.task = family, task
        self.inner = build(family, task)
        self.agents = tuple(self.inner.agents)
        self.num_agents = len(self.agents)
        self.reports_wins = family == "smax"
        sizes = [math.prod(self.inner.observation_space(a).shape) for a in self.agents]
        self.obs_dim = max(sizes)
        self.actions = max(int(self.inner.action_space(a).n) for a in self.agents)
        self.limit = {"mpe": self.inner.max_steps + 1, "smax": self.inner.max_steps + 1}.get(
            family, self.inner.max_steps
        )

    @property
    def name(self) -> str:
        return JAXMARL_PREFIX + (
            self.task if self.family == "mpe" else f"{self.family}:{self.task}"
        )

    @property
    def num_actions(self) -> int:
        """The most actions an agent has (an agent with fewer has the rest masked)."""
        return self.actions

    @property
    def default_params(self) -> TeamParams:
        return TeamParams(self.limit)

    def stack(self, obs: dict) -> Float[Array, "num_agents obs_dim"]:
        """Each agent's observation, flat, float, padded to `obs_dim`, in agent order."""
        rows = [obs[a].reshape(-1).astype(jnp.float32) for a in self.agents]
        return jnp.stack([jnp.pad(r, (0, self.obs_dim - r.shape[0])) for r in rows])

    def world(self, obs: dict, stacked: Array) -> Float[Array, " world_dim"]:
        return obs["world_state"] if "world_state" in obs else stacked.reshape(-1)

    def reset_env(self, key: PRNGKeyArray, params: TeamParams) -> tuple[Array, TeamState]:
        obs, inner = self.inner.reset(key)
        stacked = self.stack(obs)
        state = TeamState(
            inner, jnp.zeros((), jnp.int32), self.world(obs, stacked), jnp.array(False)
        )
        return stacked, state

    def step_env(
        self, key: PRNGKeyArray, state: TeamState, action: Int[Array, " num_agents"], params: Any
    ) -> tuple:
        actions = {a: action[i] for i, a in enumerate(self.agents)}
        obs, inner, rewards, dones, infos = self.inner.step_env(key, state.inner, actions)
        agent_rewards = jnp.stack([rewards[a] for a in self.agents]).astype(jnp.float32)
        ended = dones["__all__"]
        info = {"agent_rewards": agent_rewards}
        if self.family == "smax":
            alive = inner.state.unit_alive
            allies, enemies = alive[: self.num_agents], alive[self.num_agents :]
            terminated = ended & (~allies.any() | ~enemies.any())
            info["won"] = ended & ~enemies.any() & allies.any()
            reward = agent_rewards[0]  # the team reward, every ally's
        else:  # MPE and Overcooked end only at their time limits
            terminated = jnp.array(False)
            reward = agent_rewards.sum() if self.family == "mpe" else agent_rewards[0]
        if self.family == "overcooked":
            shaped = infos["shaped_reward"]
            info["shaped_rewards"] = jnp.stack([shaped[a] for a in self.agents]).astype(float)
        stacked = self.stack(obs)
        truncated = ended & ~terminated
        world = self.world(obs, stacked)
        info["final_world_state"] = world  # the world a truncated episode bootstraps from
        state = TeamState(inner, state.time + 1, world, truncated)
        info["final_action_mask"] = self.action_mask(state, params)
        return stacked, state, reward, terminated, info

    def is_truncated(self, state: TeamState, params: TeamParams) -> Bool[Array, ""]:
        return state.truncated

    def action_mask(self, state: TeamState, params: Any) -> Bool[Array, "num_agents num_actions"]:
        """Each agent's valid actions: SMAX's available ones, else all of its own."""
        if self.family == "smax":
            avail = self.inner.get_avail_actions(state.inner)
            rows = [avail[a].astype(bool) for a in self.agents]
        else:
            rows = [jnp.ones(int(self.inner.action_space(a).n), bool) for a in self.agents]
        return jnp.stack([jnp.pad(r, (0, self.num_actions - r.shape[0])) for r in rows])

    def world_state(self, state: TeamState) -> Float[Array, " world_dim"]:
        """The state a centralised critic reads (the module docstring)."""
        return state.world

    def frames(self, states: list, size: int = 400) -> list[np.ndarray]:
        """RGB frames of (unbatched) states, drawn with Pillow: MPE's agents (blue) and
        landmarks (grey), SMAX's living allies (blue) and enemies (red), Overcooked's kitchen
        (walls, pots, the serving spot) and its two cooks."""
        return [draw(self.family, self.num_agents, s.inner, size) for s in states]

    def action_space(self, params: TeamParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: TeamParams | None = None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.num_agents, self.obs_dim), jnp.float32)


def draw(family: str, num_agents: int, inner: Any, size: int) -> np.ndarray:
    """One frame of a JaxMARL state (`Team.frames`)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), (245, 245, 240))
    pen = ImageDraw.Draw(image)

    def dot(x: object, y: object, radius: float, colour: tuple) -> None:
        x, y = float(x), float(y)
        pen.ellipse((x - radius, y - radius, x + radius, y + radius), fill=colour)

    if family == "overcooked":
        walls = np.asarray(inner.wall_map)
        cell = size // max(walls.shape)
        for (r, c), wall in np.ndenumerate(walls):
            box = (c * cell, r * cell, (c + 1) * cell - 1, (r + 1) * cell - 1)
            pen.rectangle(box, fill=(150, 140, 120) if wall else (235, 230, 215))
        marks = [(inner.pot_pos, (60, 60, 60)), (inner.goal_pos, (90, 180, 90))]
        for positions, colour in marks:
            for x, y in np.asarray(positions):
                dot((x + 0.5) * cell, (y + 0.5) * cell, cell / 4, colour)
        for i, (x, y) in enumerate(np.asarray(inner.agent_pos)):
            dot((x + 0.5) * cell, (y + 0.5) * cell, cell / 3, ((40, 90, 200), (200, 120, 40))[i])
        return np.asarray(image)
    if family == "smax":
        units = inner.state
        scale = size / 32.0  # SMAX's map is 32 x 32
        alive, teams = np.asarray(units.unit_alive), np.asarray(units.unit_teams)
        for (x, y), live, team in zip(np.asarray(units.unit_positions), alive, teams, strict=True):
            if live:
                dot(
                    x * scale,
                    size - y * scale,
                    size / 60,
                    ((40, 90, 200), (200, 50, 50))[int(team)],
                )
        return np.asarray(image)
    positions = np.asarray(inner.p_pos)  # MPE: agents first, then landmarks, in [-1, 1] or so
    for i, (x, y) in enumerate(positions):
        colour = (40, 90, 200) if i < num_agents else (130, 130, 130)
        radius = size / 40 if i < num_agents else size / 60
        dot((x + 1.5) / 3 * size, (1.5 - y) / 3 * size, radius, colour)
    return np.asarray(image)


def build(family: str, task: str) -> Any:
    """JaxMARL's env for a family and task, at the settings its baselines use."""
    if family == "mpe":
        import jaxmarl

        return jaxmarl.make(task)
    if family == "smax":
        from jaxmarl.environments.smax import HeuristicEnemySMAX, map_name_to_scenario

        # Every JaxMARL SMAX baseline's ENV_KWARGS.
        kwargs = dict(see_enemy_actions=True, walls_cause_death=True, attack_mode="closest")
        return HeuristicEnemySMAX(scenario=map_name_to_scenario(task), **kwargs)
    import jaxmarl
    from jaxmarl.environments.overcooked import overcooked_layouts

    return jaxmarl.make("overcooked", layout=overcooked_layouts[task])


@functools.cache
def make_jaxmarl_env(name: str) -> tuple[Team, TeamParams]:
    """`jaxmarl:<MPE env>`, `jaxmarl:smax:<map>` or `jaxmarl:overcooked:<layout>`, refused
    clearly where JaxMARL is missing or the name is not one of its."""
    try:
        import jaxmarl  # noqa: F401
    except ImportError:
        raise ConfigError(f"{name} needs JaxMARL: {JAXMARL_INSTALL}") from None
    family, _, task = name.removeprefix(JAXMARL_PREFIX).partition(":")
    if family in ("smax", "overcooked"):
        known = tasks(family)
        if task not in known:
            raise ConfigError(
                f"Unknown {family} {'map' if family == 'smax' else 'layout'} '{task}' in {name}: "
                f"JaxMARL has {', '.join(sorted(known))}."
            )
        env = Team(family, task)
    elif family in JAXMARL_MPE and not task:
        env = Team("mpe", family)
    else:
        raise ConfigError(
            f"Unknown JaxMARL env '{name}': use {JAXMARL_PREFIX}<MPE env> "
            f"({', '.join(JAXMARL_MPE)}), "
            f"{JAXMARL_PREFIX}smax:<map> (e.g. 3m, 2s3z) or {JAXMARL_PREFIX}overcooked:<layout> "
            "(e.g. cramped_room)."
        )
    return env, env.default_params


def tasks(family: str) -> tuple[str, ...]:
    """JaxMARL's SMAX maps or Overcooked layouts."""
    if family == "smax":
        from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

        return tuple(MAP_NAME_TO_SCENARIO)
    from jaxmarl.environments.overcooked import overcooked_layouts

    return tuple(overcooked_layouts)

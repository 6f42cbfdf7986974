"""DDPG for continuous actions (Lillicrap et al. 2016, arXiv:1509.02971).

Follows CleanRL's `ddpg_continuous_action_jax.py` (and its PyTorch twin
`ddpg_continuous_action.py`), read at fe8d8a03: a deterministic tanh policy scaled to the action
bounds, Gaussian exploration noise in units of the action scale, uniform random actions before
`learning_starts`, one critic regressed on r + gamma Q'(s', mu'(s')) from target networks, and,
as CleanRL does, the actor and both Polyak targets updated every `policy_frequency` critic
updates. It is td3.py without the twin critic and the target policy smoothing, kept as a file
of its own so that a researcher copies one file and reads DDPG and TD3 side by side.

Time limits as in CleanRL's buffer: a truncated episode bootstraps from its final observation.
Deviations: the delay counts critic updates, not env steps (CleanRL: `global_step %
policy_frequency`, the same cadence with one env); the target action is mu'(s') as the tanh
bounds it, where the JAX file clips it to [-1, 1] (a TODO there: it halves Pendulum's range,
and changes nothing on a [-1, 1] box); Equinox's default init (PyTorch's, as the PyTorch file
and td3.py), where the JAX file has Flax's LeCun-normal; by default 64 units and batches of 128
for Pendulum on a CPU (CleanRL: 256 and 256, as `--preset HalfCheetah-v5`, Hopper-v5, ... set).

    python algorithms/ddpg.py --env Pendulum-v1 --num-seeds 4
    python algorithms/ddpg.py --preset HalfCheetah-v5 --num-seeds 2   # pip install -e ".[mujoco]"
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.buffer import ReplayBuffer
from canter.common.config import (
    NonNegative,
    NonNegativeInt,
    PositiveFraction,
    PositiveInt,
    UnitInterval,
    check_budget,
    check_replay,
    pytree_config,
)
from canter.common.envs import MUJOCO_TASKS, ended_episodes, make_env, vector_step
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, PyTree

ACTION_SPACE = "continuous"


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "Pendulum-v1"
    """Environment (continuous actions): a gymnax id (Pendulum-v1, MountainCarContinuous-v0,
    ...), a registered name (yours: `register_env`), or `gymnasium:<id>` for any Gymnasium id
    (gymnasium:HalfCheetah-v5, ...), or JAX physics: `playground:<Task>` (DM Control on MJX,
    playground:CheetahRun, ...) and `brax:<name>` (brax:hopper, ...). See docs/environments.md."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 50_000
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 5_000
    """Env steps per seed between deterministic evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per evaluation."""
    num_envs: PositiveInt = 1
    """Parallel environments per seed."""
    buffer_size: PositiveInt = 100_000
    """Replay buffer capacity in transitions."""
    batch_size: PositiveInt = 128
    """Transitions sampled from the buffer per update (CleanRL: 256)."""
    learning_starts: NonNegativeInt = 1_000
    """Env steps of uniform random actions before the first update."""
    train_frequency: PositiveInt = 1
    """Env steps (all envs together) per update; divides num_envs or is a multiple of it."""
    learning_rate: NonNegative = 3e-4
    """Adam learning rate of actor and critic."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    tau: PositiveFraction = 0.005
    """Polyak rate of the target networks, applied at every target update."""
    policy_frequency: PositiveInt = 2
    """Critic updates per actor (and target) update (CleanRL: 2; the DDPG paper: 1)."""
    exploration_noise: NonNegative = 0.1
    """Std of the Gaussian exploration noise, in units of the action scale."""
    hidden_size: PositiveInt = 64
    """Width of the two ReLU hidden layers (CleanRL: 256; 64 is ~8x faster on CPU)."""

    @property
    def vector_steps_per_iteration(self) -> int:
        return max(1, self.train_frequency // self.num_envs)

    @property
    def updates_per_iteration(self) -> int:
        return max(1, self.num_envs // self.train_frequency)

    @property
    def env_steps_per_iteration(self) -> int:
        return self.num_envs * self.vector_steps_per_iteration

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.env_steps_per_iteration


# --- networks


# Copied from algorithms/sac.py::MLP
class MLP(eqx.Module):
    """Two ReLU hidden layers; Equinox's default init (PyTorch's, as in CleanRL); with
    `layer_norm`, a LayerNorm after each hidden activation (Brax's MLP)."""

    layers: tuple[eqx.nn.Linear, ...]
    norms: tuple[eqx.nn.LayerNorm, ...] | None

    def __init__(
        self, in_size: int, out_size: int, hidden: int, key: PRNGKeyArray, layer_norm: bool = False
    ):
        keys = jax.random.split(key, 3)
        sizes = (in_size, hidden, hidden, out_size)
        self.layers = tuple(
            eqx.nn.Linear(i, o, key=k) for i, o, k in zip(sizes[:-1], sizes[1:], keys, strict=True)
        )
        self.norms = (eqx.nn.LayerNorm(hidden), eqx.nn.LayerNorm(hidden)) if layer_norm else None

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        for i, layer in enumerate(self.layers[:-1]):
            x = jax.nn.relu(layer(x))
            x = x if self.norms is None else self.norms[i](x)
        return self.layers[-1](x)


class Critic(eqx.Module):
    """One Q(s, a) network on the concatenated observation and action (CleanRL's QNetwork)."""

    net: MLP

    def __init__(self, obs_dim: int, action_dim: int, hidden: int, key: PRNGKeyArray):
        self.net = MLP(obs_dim + action_dim, 1, hidden, key)

    def __call__(
        self, obs: Float[Array, " obs_dim"], action: Float[Array, " action_dim"]
    ) -> Float[Array, ""]:
        return self.net(jnp.concatenate([obs, action]))[0]


# --- state


# Copied from algorithms/sac.py::Transition
class Transition(eqx.Module):
    """Replayed experience; `next_obs` is the final observation when the episode ended there."""

    obs: Float[Array, "*batch obs_dim"]
    action: Float[Array, "*batch action_dim"]
    reward: Float[Array, "*batch"]
    terminated: Bool[Array, "*batch"]
    next_obs: Float[Array, "*batch obs_dim"]


class Agent(eqx.Module):
    """What the updates change: networks, targets, optimiser states."""

    actor: MLP  # the policy is offset + scale * tanh(actor(obs))
    target_actor: MLP
    critic: Critic
    target_critic: Critic
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState


# Copied from algorithms/sac.py::TrainState
class TrainState(eqx.Module):
    """Everything that changes during training."""

    agent: Agent
    buffer: ReplayBuffer
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs obs_dim"]
    env_steps: Int[Array, ""]
    key: PRNGKeyArray


# --- losses


def deterministic_policy(
    actor: MLP,
    obs: Float[Array, "n obs_dim"],
    offset: Float[Array, " action_dim"],
    scale: Float[Array, " action_dim"],
) -> Float[Array, "n action_dim"]:
    """mu(s) = offset + scale * tanh(actor(s)): the box's centre and half-width (CleanRL)."""
    return offset + scale * jnp.tanh(jax.vmap(actor)(obs))


def ddpg_target(
    reward: Float[Array, " batch"],
    terminated: Bool[Array, " batch"],
    next_q: Float[Array, " batch"],
    gamma: float | Float[Array, ""],
) -> Float[Array, " batch"]:
    """TD target r + gamma Q'(s', mu'(s')) from the target networks; only termination cuts it."""
    return reward + gamma * (1.0 - terminated) * next_q


def critic_loss(critic: Critic, batch: Transition, target: Array) -> tuple[Array, Array]:
    """Mean squared TD error of the critic (CleanRL's mse_loss), and the mean Q."""
    q = jax.vmap(critic)(batch.obs, batch.action)
    return jnp.mean((q - target) ** 2), q.mean()


def actor_loss(
    actor: MLP,
    critic: Critic,
    obs: Float[Array, "batch obs_dim"],
    offset: Float[Array, " action_dim"],
    scale: Float[Array, " action_dim"],
) -> Float[Array, ""]:
    """-mean Q(s, mu(s)): ascending it is the deterministic policy gradient (Silver et al. 2014)."""
    return -jnp.mean(jax.vmap(critic)(obs, deterministic_policy(actor, obs, offset, scale)))


# Copied from algorithms/dqn.py::polyak_update
def polyak_update(online: PyTree, target: PyTree, tau: float | Float[Array, ""]) -> PyTree:
    """Polyak averaging `tau * online + (1 - tau) * target`; tau 0 keeps, tau 1 copies."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


def update_targets(agent: Agent, tau: float | Float[Array, ""]) -> Agent:
    """Both targets one Polyak step towards the agent's actor and its one critic."""
    return dataclasses.replace(
        agent,
        target_actor=polyak_update(agent.actor, agent.target_actor, tau),
        target_critic=polyak_update(agent.critic, agent.target_critic, tau),
    )


# --- training


# Copied from algorithms/sac.py::off_policy_step
def off_policy_step(
    state: TrainState,
    iteration: Int[Array, ""],
    *,
    config: Config,
    env: Any,
    env_params: Any,
    explore: Callable[[Any, Array, Array, PRNGKeyArray], Array],
    update: Callable[[Agent, ReplayBuffer, PRNGKeyArray, Array], tuple[Agent, dict[str, Array]]],
) -> tuple[TrainState, dict[str, Array]]:
    """Iteration `iteration`: `vector_steps_per_iteration` steps of every env into the buffer
    (`explore(actor, obs, env_steps, key)`'s actions), then, once `learning_starts` env steps are
    in (no updates before: NaN metrics), `update(agent, buffer, key, count)` for counts from 1.
    Both follow `iteration`, not the state: vmapped seeds take one branch of each `lax.cond`."""
    env_step = vector_step(env)
    per_iteration, num_updates = config.env_steps_per_iteration, config.updates_per_iteration
    first_warm = max(-(-config.learning_starts // per_iteration) - 1, 0)  # its first iteration

    def collect_step(carry: tuple, key: PRNGKeyArray) -> tuple[tuple, None]:
        env_state, obs, buffer, env_steps = carry
        action_key, env_key = jax.random.split(key)
        action = explore(state.agent.actor, obs, env_steps, action_key)
        next_obs, env_state, reward, terminated, _, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, action, env_params
        )
        # Stored next_obs is the pre-reset observation: truncated episodes bootstrap from it.
        buffer = buffer.add(Transition(obs, action, reward, terminated, info["final_observation"]))
        return (env_state, next_obs, buffer, env_steps + config.num_envs), None

    def learn(agent: Agent, buffer: ReplayBuffer, key: PRNGKeyArray) -> tuple[Agent, dict]:
        counts = (iteration - first_warm) * num_updates + jnp.arange(1, num_updates + 1)
        keys = jax.random.split(key, num_updates)
        agent, stats = jax.lax.scan(lambda a, x: update(a, buffer, *x), agent, (keys, counts))
        return agent, jax.tree.map(jnp.nanmean, stats)

    key, collect_key, update_key = jax.random.split(state.key, 3)
    carry = (state.env_state, state.obs, state.buffer, state.env_steps)
    collect_keys = jax.random.split(collect_key, config.vector_steps_per_iteration)
    (env_state, obs, buffer, env_steps), _ = jax.lax.scan(collect_step, carry, collect_keys)
    warm = (iteration + 1) * per_iteration >= config.learning_starts
    agent, stats = trainer.when(warm, learn, state.agent, buffer, update_key)
    episodes, env_state = ended_episodes(env_state)
    metrics = {**episodes, **stats, "env_steps": env_steps * 1.0}
    return TrainState(agent, buffer, env_state, obs, env_steps, key), metrics


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_replay(config)
    check_budget(config, config.env_steps_per_iteration)
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="ddpg.py")
    obs_dim = int(env.observation_space(env_params).shape[0])
    space = env.action_space(env_params)
    action_dim = int(space.shape[0])
    low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), (action_dim,))
    high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), (action_dim,))
    scale, offset = (high - low) / 2.0, (high + low) / 2.0
    reset = jax.vmap(env.reset, in_axes=(0, None))
    actor_optimizer = optax.adam(config.learning_rate)
    critic_optimizer = optax.adam(config.learning_rate)

    def init(key: PRNGKeyArray) -> TrainState:
        actor_key, critic_key, env_key, key = jax.random.split(key, 4)
        actor = MLP(obs_dim, action_dim, config.hidden_size, actor_key)
        critic = Critic(obs_dim, action_dim, config.hidden_size, critic_key)
        opt_states = (actor_optimizer.init(actor), critic_optimizer.init(critic))
        agent = Agent(actor, actor, critic, critic, *opt_states)  # targets start as copies
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zero_obs = jnp.zeros(obs_dim)
        example = Transition(
            zero_obs, jnp.zeros(action_dim), jnp.array(0.0), jnp.array(False), zero_obs
        )
        buffer = ReplayBuffer.create(example, config.buffer_size)
        return TrainState(agent, buffer, env_state, obs, jnp.array(0), key)

    def explore(actor: MLP, obs: Array, env_steps: Array, key: PRNGKeyArray) -> Array:
        """mu(s) plus Gaussian noise, clipped to the box; uniform until `learning_starts`."""
        noise_key, random_key = jax.random.split(key)
        shape = (config.num_envs, action_dim)
        noise = config.exploration_noise * scale * jax.random.normal(noise_key, shape)
        action = jnp.clip(deterministic_policy(actor, obs, offset, scale) + noise, low, high)
        random_action = jax.random.uniform(random_key, shape, minval=low, maxval=high)
        return jnp.where(env_steps < config.learning_starts, random_action, action)

    def update_actor(agent: Agent, obs: Array) -> tuple[Agent, Array]:
        """One actor step on the critic just updated, then both targets (CleanRL's order)."""
        loss, grads = jax.value_and_grad(actor_loss)(agent.actor, agent.critic, obs, offset, scale)
        updates, actor_opt_state = actor_optimizer.update(grads, agent.actor_opt_state)
        actor = optax.apply_updates(agent.actor, updates)
        agent = dataclasses.replace(agent, actor=actor, actor_opt_state=actor_opt_state)
        return update_targets(agent, config.tau), loss

    def update(
        agent: Agent, buffer: ReplayBuffer, key: PRNGKeyArray, count: Array
    ) -> tuple[Agent, dict[str, Array]]:
        batch = buffer.sample(key, config.batch_size)
        # No clip on mu'(s'): tanh keeps it in the box (the JAX file's clip(-1, 1) is a TODO).
        next_action = deterministic_policy(agent.target_actor, batch.next_obs, offset, scale)
        next_q = jax.vmap(agent.target_critic)(batch.next_obs, next_action)
        target = ddpg_target(batch.reward, batch.terminated, next_q, config.gamma)
        (q_loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(
            agent.critic, batch, target
        )
        updates, critic_opt_state = critic_optimizer.update(grads, agent.critic_opt_state)
        critic = optax.apply_updates(agent.critic, updates)
        agent = dataclasses.replace(agent, critic=critic, critic_opt_state=critic_opt_state)
        # Actor and target updates every policy_frequency-th critic update (CleanRL: 2).
        agent, pi_loss = trainer.when(
            count % config.policy_frequency == 0, update_actor, agent, batch.obs
        )
        return agent, dict(value_loss=q_loss, q_values=q_mean, actor_loss=pi_loss)

    def act(state: TrainState, obs: Float[Array, "n obs_dim"]) -> Float[Array, "n action_dim"]:
        return deterministic_policy(state.agent.actor, obs, offset, scale)

    step = functools.partial(
        off_policy_step,
        config=config,
        env=env,
        env_params=env_params,
        explore=explore,
        update=update,
    )
    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=act,
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.env_steps_per_iteration,
    )


# --- presets


# CleanRL's MuJoCo DDPG (ddpg_continuous_action_jax.py at fe8d8a03): 256-unit networks, batch 256,
# buffer 1e6, 25,000 random steps, lr 3e-4, tau 0.005, exploration noise 0.1, actor and targets
# every 2nd update, 1e6 env steps (its docs' table: HalfCheetah, Hopper, Walker2d at 1e6).
MUJOCO = dict(
    total_timesteps=1_000_000,
    eval_every=10_000,
    num_eval_envs=4,
    buffer_size=10**6,
    batch_size=256,
    learning_starts=25_000,
    hidden_size=256,
)
PRESETS = {task: dict(MUJOCO, env=f"gymnasium:{task}") for task in MUJOCO_TASKS}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

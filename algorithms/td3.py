"""TD3 for continuous actions (Fujimoto et al. 2018, arXiv:1802.09477).

Follows CleanRL's `td3_continuous_action.py`: a deterministic tanh policy scaled to the action
bounds, Gaussian exploration noise, twin critics whose minimum forms the target, target policy
smoothing (clipped noise on the target action), and delayed actor and target updates (every
`policy_frequency` critic updates). Deviates on time limits (a truncated episode bootstraps
from its final observation) and by default uses 64 units and batches of 128, enough for
Pendulum; `--preset HalfCheetah-v5` (Hopper-v5, ...) sets CleanRL's MuJoCo configuration.
Three flags swap in sbx's choices (`--no-delayed-targets`, `--actor-min-q`, `--lecun-init`)
for ablations (benchmarks/returns/td3_variants.py); their defaults are the paper's and CleanRL's.

    python algorithms/td3.py --env Pendulum-v1 --num-seeds 4
    python algorithms/td3.py --preset HalfCheetah-v5 --num-seeds 2   # pip install -e ".[mujoco]"
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
    """Adam learning rate of actor and critics."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    tau: PositiveFraction = 0.005
    """Polyak rate of the target networks, applied at every target update."""
    policy_frequency: PositiveInt = 2
    """Critic updates per actor (and target) update: the delay."""
    exploration_noise: NonNegative = 0.1
    """Std of the Gaussian exploration noise, in units of the action scale."""
    policy_noise: NonNegative = 0.2
    """Std of the target policy smoothing noise, in units of the action scale."""
    noise_clip: NonNegative = 0.5
    """Bound on the target policy smoothing noise, in units of the action scale."""
    hidden_size: PositiveInt = 64
    """Width of the two ReLU hidden layers (CleanRL: 256; 64 is ~8x faster on CPU)."""
    delayed_targets: bool = True
    """Update the targets with the delayed actor (the TD3 paper, CleanRL); else after every
    critic update, towards the actor before that step's actor update (sbx's TD3)."""
    actor_min_q: bool = False
    """The actor maximises min(Q1, Q2) (sbx's TD3); else Q1 alone (the TD3 paper, CleanRL)."""
    lecun_init: bool = False
    """LeCun-normal weights and zero biases for actor and critics (Flax's Dense default, as in
    sbx); else Equinox's default, PyTorch's uniform +-1/sqrt(fan_in) (CleanRL)."""

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


# Copied from algorithms/sac.py::TwinCritic
class TwinCritic(eqx.Module):
    """Two independent Q(s, a) networks stored stacked, evaluated in one vmapped call."""

    nets: MLP  # every leaf has a leading axis of 2

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: int, key: PRNGKeyArray, norm: bool = False
    ):
        make = lambda k: MLP(obs_dim + action_dim, 1, hidden, k, norm)  # noqa: E731
        self.nets = eqx.filter_vmap(make)(jax.random.split(key, 2))

    def __call__(
        self, obs: Float[Array, " obs_dim"], action: Float[Array, " action_dim"]
    ) -> Float[Array, " 2"]:
        x = jnp.concatenate([obs, action])
        return eqx.filter_vmap(lambda net: net(x)[0])(self.nets)


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
    """What the updates change: networks, targets, optimiser states, the update count."""

    actor: MLP  # the policy is offset + scale * tanh(actor(obs))
    target_actor: MLP
    critic: TwinCritic
    target_critic: TwinCritic
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


def smoothed_target_action(
    target_action: Float[Array, "batch action_dim"],
    noise: Float[Array, "batch action_dim"],
    noise_clip: float | Float[Array, ""],
    scale: Float[Array, " action_dim"],
    low: Float[Array, " action_dim"],
    high: Float[Array, " action_dim"],
) -> Float[Array, "batch action_dim"]:
    """Target policy smoothing: clip(mu'(s') + clip(noise, +-noise_clip) * scale, low, high)."""
    return jnp.clip(target_action + jnp.clip(noise, -noise_clip, noise_clip) * scale, low, high)


def td3_target(
    reward: Float[Array, " batch"],
    terminated: Bool[Array, " batch"],
    next_q: Float[Array, "batch 2"],
    gamma: float | Float[Array, ""],
) -> Float[Array, " batch"]:
    """Clipped double-Q target r + gamma min_i Q_i(s', a'); only termination cuts it."""
    return reward + gamma * (1.0 - terminated) * jnp.min(next_q, axis=-1)


# Copied from algorithms/dqn.py::polyak_update
def polyak_update(online: PyTree, target: PyTree, tau: float | Float[Array, ""]) -> PyTree:
    """Polyak averaging `tau * online + (1 - tau) * target`; tau 0 keeps, tau 1 copies."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


def update_targets(agent: Agent, tau: float | Float[Array, ""]) -> Agent:
    """Both targets one Polyak step towards the agent's actor and critics."""
    return dataclasses.replace(
        agent,
        target_actor=polyak_update(agent.actor, agent.target_actor, tau),
        target_critic=polyak_update(agent.critic, agent.target_critic, tau),
    )


def lecun_init(mlp: MLP, key: PRNGKeyArray) -> MLP:
    """`mlp` (built from `key`) with Flax's Dense init: truncated LeCun-normal weights, zero
    biases. The keys are those of td3_variants.py's committed `flaxinit` runs."""
    init = jax.nn.initializers.lecun_normal(in_axis=-1, out_axis=-2)
    keys = jax.random.split(jax.random.split(key, 3)[0], 3)
    weights = [init(k, layer.weight.shape) for layer, k in zip(mlp.layers, keys, strict=True)]
    biases = [jnp.zeros_like(layer.bias) for layer in mlp.layers]
    mlp = eqx.tree_at(lambda m: [layer.weight for layer in m.layers], mlp, weights)
    return eqx.tree_at(lambda m: [layer.bias for layer in m.layers], mlp, biases)


# Copied from algorithms/sac.py::critic_loss
def critic_loss(critic: TwinCritic, batch: Transition, target: Array) -> tuple[Array, Array]:
    """Squared TD error of both critics, summed over the two (CleanRL), and the mean Q."""
    q = jax.vmap(critic)(batch.obs, batch.action)
    return jnp.sum(jnp.mean((q - target[:, None]) ** 2, axis=0)), q.mean()


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
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="td3.py")
    obs_dim = int(env.observation_space(env_params).shape[0])
    space = env.action_space(env_params)
    action_dim = int(space.shape[0])
    low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), (action_dim,))
    high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), (action_dim,))
    scale, offset = (high - low) / 2.0, (high + low) / 2.0
    reset = jax.vmap(env.reset, in_axes=(0, None))
    actor_optimizer = optax.adam(config.learning_rate)
    critic_optimizer = optax.adam(config.learning_rate)

    def policy(actor: MLP, obs: Float[Array, "n obs_dim"]) -> Float[Array, "n action_dim"]:
        return offset + scale * jnp.tanh(jax.vmap(actor)(obs))

    def init(key: PRNGKeyArray) -> TrainState:
        actor_key, critic_key, env_key, key = jax.random.split(key, 4)
        actor = MLP(obs_dim, action_dim, config.hidden_size, actor_key)
        critic = TwinCritic(obs_dim, action_dim, config.hidden_size, critic_key)
        if config.lecun_init:  # each network from the key it was built with (TwinCritic's split)
            actor = lecun_init(actor, actor_key)
            nets = eqx.filter_vmap(lecun_init)(critic.nets, jax.random.split(critic_key, 2))
            critic = eqx.tree_at(lambda c: c.nets, critic, nets)
        opt_states = (actor_optimizer.init(actor), critic_optimizer.init(critic))
        agent = Agent(actor, actor, critic, critic, *opt_states)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zero_obs = jnp.zeros(obs_dim)
        example = Transition(
            zero_obs, jnp.zeros(action_dim), jnp.array(0.0), jnp.array(False), zero_obs
        )
        buffer = ReplayBuffer.create(example, config.buffer_size)
        return TrainState(agent, buffer, env_state, obs, jnp.array(0), key)

    def explore(actor: MLP, obs: Array, env_steps: Array, key: PRNGKeyArray) -> Array:
        """Policy plus Gaussian noise; uniform random actions until `learning_starts`."""
        noise_key, random_key = jax.random.split(key)
        shape = (config.num_envs, action_dim)
        noise = config.exploration_noise * scale * jax.random.normal(noise_key, shape)
        policy_action = jnp.clip(policy(actor, obs) + noise, low, high)
        random_action = jax.random.uniform(random_key, shape, minval=low, maxval=high)
        return jnp.where(env_steps < config.learning_starts, random_action, policy_action)

    def actor_loss(actor: MLP, critic: TwinCritic, obs: Array) -> Array:
        q = jax.vmap(critic)(obs, policy(actor, obs))
        return -jnp.mean(q.min(axis=-1) if config.actor_min_q else q[:, 0])  # default: Q1 only

    def update_actor(agent: Agent, obs: Array) -> tuple[Agent, Array]:
        loss, grads = jax.value_and_grad(actor_loss)(agent.actor, agent.critic, obs)
        updates, actor_opt_state = actor_optimizer.update(grads, agent.actor_opt_state)
        actor = optax.apply_updates(agent.actor, updates)
        agent = dataclasses.replace(agent, actor=actor, actor_opt_state=actor_opt_state)
        return (update_targets(agent, config.tau) if config.delayed_targets else agent), loss

    def update(
        agent: Agent, buffer: ReplayBuffer, key: PRNGKeyArray, count: Array
    ) -> tuple[Agent, dict[str, Array]]:
        sample_key, noise_key = jax.random.split(key)
        batch = buffer.sample(sample_key, config.batch_size)
        noise = config.policy_noise * jax.random.normal(noise_key, batch.action.shape)
        next_action = smoothed_target_action(
            policy(agent.target_actor, batch.next_obs), noise, config.noise_clip, scale, low, high
        )
        next_q = jax.vmap(agent.target_critic)(batch.next_obs, next_action)
        target = td3_target(batch.reward, batch.terminated, next_q, config.gamma)
        (q_loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(
            agent.critic, batch, target
        )
        updates, critic_opt_state = critic_optimizer.update(grads, agent.critic_opt_state)
        critic = optax.apply_updates(agent.critic, updates)
        agent = dataclasses.replace(agent, critic=critic, critic_opt_state=critic_opt_state)
        if not config.delayed_targets:  # sbx: the targets follow every critic update
            agent = update_targets(agent, config.tau)
        # Delayed policy (and by default target) updates, counted in critic updates.
        agent, pi_loss = trainer.when(
            count % config.policy_frequency == 0, update_actor, agent, batch.obs
        )
        return agent, dict(value_loss=q_loss, q_values=q_mean, actor_loss=pi_loss)

    def act(state: TrainState, obs: Float[Array, "n obs_dim"]) -> Float[Array, "n action_dim"]:
        return policy(state.agent.actor, obs)

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


# CleanRL's MuJoCo TD3 (td3_continuous_action.py): 256-unit networks, batch 256, buffer 1e6, 25,000
# random steps, lr 3e-4, exploration noise 0.1, target noise 0.2 clipped at 0.5, actor every 2nd
# update, 1e6 env steps.
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

"""SAC for continuous actions (Haarnoja et al. 2018, arXiv:1801.01290 and arXiv:1812.05905).

Follows CleanRL's `sac_continuous_action.py`: a tanh-squashed Gaussian policy whose log-density
carries the log-det-Jacobian of the squashing *and* of the action scale, twin critics with Polyak-
averaged targets, automatic entropy tuning towards -action_dim, separate Adam optimisers, uniform
random actions during warm-up; the entropy is estimated from samples (the squashed Gaussian has no
closed form). Deviates on time limits (a truncated episode bootstraps from its final observation)
and updates the actor every step (no TD3-style delay). The defaults (64 units, batches of 128) suit
Pendulum; `--preset HalfCheetah-v5` (Hopper-v5, ...) sets CleanRL's MuJoCo configuration.

    python algorithms/sac.py --preset HalfCheetah-v5 --num-seeds 2   # pip install -e ".[mujoco]"
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.buffer import ReplayBuffer
from canter.common.config import (
    NonNegative,
    NonNegativeInt,
    Positive,
    PositiveFraction,
    PositiveInt,
    UnitInterval,
    check_budget,
    check_replay,
    pytree_config,
)
from canter.common.envs import MUJOCO_TASKS, ended_episodes, make_env, vector_step
from canter.common.envs.registry import PLAYGROUND_TASKS
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
    """Env steps per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per evaluation."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """What evaluation plays: the squashed mean action ("greedy"), or a draw from the policy
    as in training ("sampled")."""
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
    policy_lr: NonNegative = 3e-4
    """Adam learning rate of the actor."""
    q_lr: NonNegative = 1e-3
    """Adam learning rate of the critics and of the entropy temperature."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    tau: PositiveFraction = 0.005
    """Polyak rate of the target critics, applied after every update."""
    autotune: bool = True
    """Tune the entropy temperature towards a target entropy of -action_dim."""
    alpha: Positive = 0.2
    """Entropy temperature when not autotuned (and its initial value when autotuned)."""
    alpha_lr: NonNegative | None = None
    """Adam learning rate of the temperature, if not `q_lr` (Brax: 3e-4)."""
    target_entropy_scale: Positive = 1.0
    """The tuned temperature aims at an entropy of -target_entropy_scale x action_dim (Brax:
    0.5)."""
    hidden_size: PositiveInt = 64
    """Width of the two ReLU hidden layers (CleanRL: 256; 64 is ~8x faster on CPU)."""
    q_layer_norm: bool = False
    """LayerNorm after each hidden activation of the critics (Brax's `q_network_layer_norm`)."""

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

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0  # CleanRL's bounds on the policy's log std


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


class Actor(eqx.Module):
    """Gaussian policy head: mean and log std, the log std squashed into its bounds."""

    net: MLP

    def __init__(self, obs_dim: int, action_dim: int, hidden: int, key: PRNGKeyArray):
        self.net = MLP(obs_dim, 2 * action_dim, hidden, key)

    def __call__(
        self, obs: Float[Array, " obs_dim"]
    ) -> tuple[Float[Array, " action_dim"], Float[Array, " action_dim"]]:
        mean, log_std = jnp.split(self.net(obs), 2)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (jnp.tanh(log_std) + 1)
        return mean, log_std


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


class Transition(eqx.Module):
    """Replayed experience; `next_obs` is the final observation when the episode ended there."""

    obs: Float[Array, "*batch obs_dim"]
    action: Float[Array, "*batch action_dim"]
    reward: Float[Array, "*batch"]
    terminated: Bool[Array, "*batch"]
    next_obs: Float[Array, "*batch obs_dim"]


class Agent(eqx.Module):
    """What the updates change: networks, temperature, optimiser states."""

    actor: Actor
    critic: TwinCritic
    target_critic: TwinCritic
    log_alpha: Float[Array, ""]
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    alpha_opt_state: optax.OptState


class TrainState(eqx.Module):
    """Everything that changes during training."""

    agent: Agent
    buffer: ReplayBuffer
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs obs_dim"]
    env_steps: Int[Array, ""]
    key: PRNGKeyArray


# --- losses


def squashed_gaussian(
    mean: Float[Array, " action_dim"],
    log_std: Float[Array, " action_dim"],
    noise: Float[Array, " action_dim"],
    scale: Float[Array, " action_dim"],
    offset: Float[Array, " action_dim"],
) -> tuple[Float[Array, " action_dim"], Float[Array, ""]]:
    """Action `offset + scale * tanh(mean + std * noise)` and its log-density.

    Change of variables: log pi(a) = log N(u) - sum log |da/du|, with da/du = scale (1 - tanh^2 u).
    log(1 - tanh^2 u) = 2 (log 2 - u - softplus(-2u)) is the stable form (no 1e-6 fudge).
    """
    u = mean + jnp.exp(log_std) * noise
    log_normal = -0.5 * noise**2 - log_std - 0.5 * math.log(2 * math.pi)
    log_det = jnp.log(scale) + 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return offset + scale * jnp.tanh(u), jnp.sum(log_normal - log_det)


def soft_td_target(
    reward: Float[Array, " batch"],
    terminated: Bool[Array, " batch"],
    next_q: Float[Array, "batch 2"],
    next_log_prob: Float[Array, " batch"],
    alpha: Float[Array, ""],
    gamma: float | Float[Array, ""],
) -> Float[Array, " batch"]:
    """r + gamma (min_i Q_i(s', a') - alpha log pi(a'|s')); only termination cuts it."""
    soft_value = jnp.min(next_q, axis=-1) - alpha * next_log_prob
    return reward + gamma * (1.0 - terminated) * soft_value


# Copied from algorithms/dqn.py::polyak_update
def polyak_update(online: PyTree, target: PyTree, tau: float | Float[Array, ""]) -> PyTree:
    """Polyak averaging `tau * online + (1 - tau) * target`; tau 0 keeps, tau 1 copies."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


def critic_loss(critic: TwinCritic, batch: Transition, target: Array) -> tuple[Array, Array]:
    """Squared TD error of both critics, summed over the two (CleanRL), and the mean Q."""
    q = jax.vmap(critic)(batch.obs, batch.action)
    return jnp.sum(jnp.mean((q - target[:, None]) ** 2, axis=0)), q.mean()


# --- training


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
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="sac.py")
    obs_dim = int(env.observation_space(env_params).shape[0])
    space = env.action_space(env_params)
    action_dim = int(space.shape[0])
    bound = lambda b: jnp.broadcast_to(jnp.asarray(b, jnp.float32), (action_dim,))  # noqa: E731
    low, high = bound(space.low), bound(space.high)
    scale, offset = (high - low) / 2.0, (high + low) / 2.0
    target_entropy = -config.target_entropy_scale * action_dim  # SAC heuristic: scale 1
    reset = jax.vmap(env.reset, in_axes=(0, None))
    actor_optimizer, critic_optimizer = optax.adam(config.policy_lr), optax.adam(config.q_lr)
    alpha_optimizer = optax.adam(config.q_lr if config.alpha_lr is None else config.alpha_lr)

    def sample_actions(actor: Actor, obs: Array, key: PRNGKeyArray) -> tuple[Array, Array]:
        mean, log_std = jax.vmap(actor)(obs)
        noise = jax.random.normal(key, mean.shape)
        return jax.vmap(squashed_gaussian, in_axes=(0, 0, 0, None, None))(
            mean, log_std, noise, scale, offset
        )

    def init(key: PRNGKeyArray) -> TrainState:
        actor_key, critic_key, env_key, key = jax.random.split(key, 4)
        actor = Actor(obs_dim, action_dim, config.hidden_size, actor_key)
        critic = TwinCritic(
            obs_dim, action_dim, config.hidden_size, critic_key, config.q_layer_norm
        )
        log_alpha = jnp.log(config.alpha) * jnp.ones(())
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zero_obs, zero_action = jnp.zeros(obs_dim), jnp.zeros(action_dim)
        example = Transition(zero_obs, zero_action, jnp.array(0.0), jnp.array(False), zero_obs)
        agent = Agent(
            actor,
            critic,
            critic,
            log_alpha,
            actor_optimizer.init(actor),
            critic_optimizer.init(critic),
            alpha_optimizer.init(log_alpha),
        )
        buffer = ReplayBuffer.create(example, config.buffer_size)
        return TrainState(agent, buffer, env_state, obs, jnp.array(0), key)

    def explore(actor: Actor, obs: Array, env_steps: Array, key: PRNGKeyArray) -> Array:
        """Policy samples; uniform random actions until `learning_starts` env steps."""
        policy_key, random_key = jax.random.split(key)
        policy_action, _ = sample_actions(actor, obs, policy_key)
        shape = (config.num_envs, action_dim)
        random_action = jax.random.uniform(random_key, shape, minval=low, maxval=high)
        return jnp.where(env_steps < config.learning_starts, random_action, policy_action)

    def actor_loss(
        actor: Actor, critic: TwinCritic, obs: Array, alpha: Array, key: PRNGKeyArray
    ) -> tuple[Array, Array]:
        action, log_prob = sample_actions(actor, obs, key)
        q = jax.vmap(critic)(obs, action)
        return jnp.mean(alpha * log_prob - jnp.min(q, axis=-1)), log_prob

    def alpha_loss(log_alpha: Array, log_prob: Array) -> Array:
        return jnp.mean(-jnp.exp(log_alpha) * (log_prob + target_entropy))  # CleanRL form

    def update(
        agent: Agent, buffer: ReplayBuffer, key: PRNGKeyArray, _count: Array
    ) -> tuple[Agent, dict[str, Array]]:
        sample_key, next_key, actor_key = jax.random.split(key, 3)
        batch = buffer.sample(sample_key, config.batch_size)
        alpha = jnp.exp(agent.log_alpha)
        next_action, next_log_prob = sample_actions(agent.actor, batch.next_obs, next_key)
        next_q = jax.vmap(agent.target_critic)(batch.next_obs, next_action)
        target = soft_td_target(
            batch.reward, batch.terminated, next_q, next_log_prob, alpha, config.gamma
        )
        (q_loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(
            agent.critic, batch, target
        )
        updates, critic_opt_state = critic_optimizer.update(grads, agent.critic_opt_state)
        critic = optax.apply_updates(agent.critic, updates)
        # The actor and the temperature see the freshly updated critics (CleanRL order).
        (pi_loss, log_prob), grads = jax.value_and_grad(actor_loss, has_aux=True)(
            agent.actor, critic, batch.obs, alpha, actor_key
        )
        updates, actor_opt_state = actor_optimizer.update(grads, agent.actor_opt_state)
        actor = optax.apply_updates(agent.actor, updates)
        log_alpha, alpha_opt_state = agent.log_alpha, agent.alpha_opt_state
        if config.autotune:
            grad = jax.grad(alpha_loss)(log_alpha, jax.lax.stop_gradient(log_prob))
            updates, alpha_opt_state = alpha_optimizer.update(grad, alpha_opt_state)
            log_alpha = optax.apply_updates(log_alpha, updates)
        target_critic = polyak_update(critic, agent.target_critic, config.tau)
        opt_states = (actor_opt_state, critic_opt_state, alpha_opt_state)
        agent = Agent(actor, critic, target_critic, log_alpha, *opt_states)
        return agent, dict(
            value_loss=q_loss,
            q_values=q_mean,
            actor_loss=pi_loss,
            alpha=jnp.exp(log_alpha),
            entropy=-jnp.mean(log_prob),  # entropy from samples
        )

    def act(state: TrainState, obs: Array, key: PRNGKeyArray | None = None) -> Array:
        """The squashed mean action, or with `key` a draw from the policy."""
        if key is not None:
            return sample_actions(state.agent.actor, obs, key)[0]
        mean, _ = jax.vmap(state.agent.actor)(obs)
        return offset + scale * jnp.tanh(mean)

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


# CleanRL's MuJoCo SAC (sac_continuous_action.py at fe8d8a0), but the actor updated every step
# (CleanRL: twice every second step). The tuned temperature starts at 1, as CleanRL's
# (log_alpha = 0); canter's default start is 0.2.
MUJOCO = dict(
    total_timesteps=10**6,
    alpha=1.0,
    eval_every=10_000,
    num_eval_envs=4,
    buffer_size=10**6,
    batch_size=256,
    learning_starts=5_000,
    hidden_size=256,
)
PRESETS = {task: dict(MUJOCO, env=f"gymnasium:{task}") for task in MUJOCO_TASKS}

# Playground's DM Control SAC (config/dm_control_suite_params.py, `brax_sac_config`, v0.2.0
# L111-150, as Brax 0.14.2's sac.train reads it; docs/notes/playground-reference.md): 128 envs,
# 8 updates of batch 512 after each step of them, replay 4,194,304 with 8,192 transitions before
# the first update, Adam lr 1e-3 (the temperature's 3e-4) from alpha 1 towards an entropy of
# -0.5 x action_dim, gamma 0.99, tau 0.005, 256 x 256 ReLU networks, LayerNorm in the critics.
# Budget: 5,000,960 env steps, Brax's count for the 5e6 asked (10,000,640 for Acrobot*, Finger*,
# Hopper*, SwimmerSwimmer6, CheetahRun, HumanoidWalk and WalkerRun), 9 evaluations of 128
# episodes. Deviations: uniform random actions before the first update (Brax: the initial
# policy's); CleanRL's policy head (log std squashed into [-5, 2]; Brax: std softplus + 0.001),
# update order (critic, actor on the new critic, temperature; Brax: temperature, critic, actor on
# the old critic) and critic loss (the two critics' squared errors summed; Brax: half their mean,
# the same step under Adam); no observation normalisation (Brax normalises; canter's SAC, like
# CleanRL's, reads raw observations); truncated transitions bootstrap (Brax leaves them out of
# the critic loss); greedy evaluation (Brax samples).
DM_CONTROL = dict(
    total_timesteps=5_000_960,
    eval_every=554_752,  # 4,334 steps of the 128 envs
    num_eval_envs=128,
    num_envs=128,
    buffer_size=4_194_304,
    batch_size=512,
    learning_starts=8_192,
    train_frequency=16,  # 128 / 16 = 8 updates per step of the envs
    policy_lr=1e-3,
    q_lr=1e-3,
    alpha=1.0,
    alpha_lr=3e-4,
    target_entropy_scale=0.5,
    hidden_size=256,
    q_layer_norm=True,
)
PRESETS |= {task: dict(DM_CONTROL, env=f"playground:{task}") for task in PLAYGROUND_TASKS}
LONGER = ("AcrobotSwingup", "AcrobotSwingupSparse", "FingerSpin", "FingerTurnEasy")
LONGER += ("FingerTurnHard", "HopperHop", "HopperStand", "SwimmerSwimmer6", "CheetahRun")
LONGER += ("HumanoidWalk", "WalkerRun")
PRESETS |= {task: dict(PRESETS[task], total_timesteps=10_000_640) for task in LONGER}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

"""PPO for continuous actions with a Gaussian policy (Schulman et al. 2017, arXiv:1707.06347).

Follows CleanRL's `ppo_continuous_action.py` and PureJaxRL's continuous PPO: a diagonal Gaussian
with a state-independent log-std, orthogonal init, Adam eps 1e-5, global-norm clipping,
observation normalisation and return-based reward scaling; actions are clipped only when
stepping (the log-prob is of the unclipped sample). Deviations: truncation bootstraps from the
final observation (as in `ppo.py`), and normalisation statistics are frozen during a rollout
and updated once per iteration, so stored observations are exactly what the policy saw.
Defaults are tuned for Pendulum-v1 (gamma 0.9, lr 3e-4: with 1e-3, 2 of 8 seeds collapsed);
MountainCarContinuous needs its preset (with gamma 0.9 the goal bonus is out of sight).
`--squash` swaps in Brax's policy head (a tanh-squashed Gaussian whose std the actor outputs),
which the presets for MuJoCo Playground's DM Control tasks and Brax's envs use, with Brax's
networks and reward scaling (the presets' comment).

    python algorithms/ppo_continuous.py --env Pendulum-v1 --num-seeds 8
    python algorithms/ppo_continuous.py --preset MountainCarContinuous-v0
    python algorithms/ppo_continuous.py --preset CheetahRun   # pip install -e ".[playground]"
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.clipping import clip_by_global_norm  # one sum off the CPU
from canter.common.blocks.layers import MLP
from canter.common.blocks.loops import scan
from canter.common.blocks.normalization import RunningStats, normalize, update_stats
from canter.common.config import (
    NonNegative,
    Positive,
    PositiveInt,
    PositiveOrInf,
    UnitInterval,
    check_budget,
    check_divides,
    pytree_config,
)
from canter.common.envs import PLAYGROUND_TASKS, ended_episodes, make_env, vector_step
from canter.common.run.devices import shard_minibatch
from jaxtyping import Array, Bool, Float, PRNGKeyArray, PyTree

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
    total_timesteps: PositiveInt = 1_000_000
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 81_920
    """Env steps per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 32
    """Environments (one episode each) per evaluation."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """What evaluation plays: the policy's mean action, clipped or squashed ("greedy"), or a
    draw from the policy as in training ("sampled")."""
    num_envs: PositiveInt = 16
    """Parallel environments per seed."""
    num_steps: PositiveInt = 256
    """Steps per environment per rollout."""
    learning_rate: NonNegative = 3e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 0.5
    """Global gradient-norm clipping threshold."""
    update_epochs: PositiveInt = 10
    """Passes over each rollout."""
    num_minibatches: PositiveInt = 32
    """Minibatches per epoch."""
    gamma: UnitInterval = 0.9
    """Discount factor (also the discount of the returns that scale rewards)."""
    gae_lambda: UnitInterval = 0.95
    """GAE lambda."""
    clip_coef: Positive = 0.2
    """Surrogate clipping coefficient (also clips the value update)."""
    clip_vloss: bool = True
    """Clip the value loss as in the PPO reference implementation."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    ent_coef: NonNegative = 0.0
    """Entropy bonus coefficient."""
    vf_coef: NonNegative = 0.5
    """Value loss coefficient."""
    norm_obs: bool = True
    """Normalise observations by running mean and variance (clipped to +-10)."""
    norm_reward: bool = True
    """Divide rewards by the running std of the discounted return (clipped to +-10)."""
    reward_scale: Positive = 1.0
    """Multiply rewards by this in the update (Brax's `reward_scaling`), after `norm_reward`."""
    squash: bool = False
    """Brax's policy head: a tanh-squashed Gaussian whose std (softplus + 0.001) the actor
    outputs beside the mean, instead of a state-independent log-std and clipped actions."""
    hidden_size: PositiveInt = 64
    """Width of the actor's hidden layers (and of the critic's unless `critic_hidden_size`)."""
    num_layers: PositiveInt = 2
    """Hidden layers of the actor (and of the critic unless `critic_num_layers`)."""
    critic_hidden_size: PositiveInt | None = None
    """Width of the critic's hidden layers, if not `hidden_size`."""
    critic_num_layers: PositiveInt | None = None
    """Hidden layers of the critic, if not `num_layers`."""
    activation: Literal["tanh", "relu", "swish"] = "tanh"
    """Activation of the hidden layers (Brax's networks: swish)."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


class ActorCritic(eqx.Module):
    """Gaussian actor (mean net, output gain 0.01; state-independent log-std, init 0) and
    critic; with `squash`, the actor outputs the mean and a raw scale, std = softplus + 0.001."""

    actor: MLP
    log_std: Float[Array, " action_dim"] | None
    critic: MLP

    def __init__(self, obs_dim: int, action_dim: int, config: Config, key: PRNGKeyArray):
        actor_key, critic_key = jax.random.split(key)
        outputs = 2 * action_dim if config.squash else action_dim
        actor = (obs_dim, config.hidden_size, outputs)
        self.actor = MLP(actor, 0.01, actor_key, config.activation, config.num_layers)
        self.log_std = None if config.squash else jnp.zeros(action_dim)
        critic = (obs_dim, config.critic_hidden_size or config.hidden_size, 1)
        depth = config.critic_num_layers or config.num_layers
        self.critic = MLP(critic, 1.0, critic_key, config.activation, depth)

    def policy(self, obs: Float[Array, " obs_dim"]) -> tuple[Array, Array]:
        """Mean and log-std of the Gaussian (before any squashing)."""
        if self.log_std is not None:
            return self.actor(obs), self.log_std
        mean, raw_scale = jnp.split(self.actor(obs), 2)
        return mean, jnp.log(jax.nn.softplus(raw_scale) + 0.001)  # Brax's min std 0.001

    def value(self, obs: Float[Array, " obs_dim"]) -> Float[Array, ""]:
        return self.critic(obs)[0]


# --- state


class Transition(eqx.Module):
    """One rollout step of every env, un-normalised; `next_obs` is the pre-reset final one."""

    obs: Float[Array, "num_envs obs_dim"]
    action: Float[Array, "num_envs action_dim"]  # the Gaussian sample, unclipped, unsquashed
    noise: Float[Array, "num_envs action_dim"] | None  # its standard normal draw (`squash`)
    log_prob: Float[Array, " num_envs"]
    reward: Float[Array, " num_envs"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_obs: Float[Array, "num_envs obs_dim"]
    discounted_return: Float[Array, " num_envs"]  # for the reward scale


class TrainState(eqx.Module):
    """Everything that changes during training, normalisation statistics included."""

    model: ActorCritic
    opt_state: optax.OptState
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs obs_dim"]  # raw (un-normalised)
    obs_stats: RunningStats
    return_stats: RunningStats
    discounted_return: Float[Array, " num_envs"]  # running discounted return, reward scaling
    key: PRNGKeyArray


# --- losses


# Copied from algorithms/ppo.py::compute_gae
def compute_gae(
    rewards: Float[Array, "num_steps num_envs"],
    values: Float[Array, "num_steps num_envs"],
    next_values: Float[Array, "num_steps num_envs"],
    terminated: Bool[Array, "num_steps num_envs"],
    truncated: Bool[Array, "num_steps num_envs"],
    gamma: float | Float[Array, ""],
    gae_lambda: float | Float[Array, ""],
) -> tuple[Float[Array, "num_steps num_envs"], Float[Array, "num_steps num_envs"]]:
    """GAE (Schulman et al. 2016); returns (advantages, value targets).

    `next_values[t]` is the value of the observation that step t led to (the final observation
    when the episode ended there). Termination zeroes it; truncation keeps it (time limits are
    not terminations). The recursion is cut at every episode end, whatever the cause.
    """
    deltas = rewards + gamma * next_values * (1.0 - terminated) - values
    continues = 1.0 - jnp.logical_or(terminated, truncated)

    def backward(advantage: Array, step: tuple[Array, Array]) -> tuple[Array, Array]:
        delta, cont = step
        advantage = delta + gamma * gae_lambda * cont * advantage
        return advantage, advantage

    # 16 steps per loop trip off the CPU: one fused kernel where a GPU ran four per step.
    zeros = jnp.zeros_like(deltas[0])
    _, advantages = scan(backward, zeros, (deltas, continues), reverse=True, unroll=16)
    return advantages, advantages + values


# Copied from algorithms/ppo.py::policy_loss
def policy_loss(
    log_ratio: Float[Array, " minibatch"],
    advantages: Float[Array, " minibatch"],
    clip_coef: float | Float[Array, ""],
) -> tuple[Float[Array, ""], Float[Array, ""], Float[Array, ""]]:
    """Clipped surrogate loss; also the clip fraction and approx KL ((r - 1) - log r)."""
    ratio = jnp.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_coef, 1.0 + clip_coef) * advantages
    loss = -jnp.mean(jnp.minimum(unclipped, clipped))
    clipfrac = jnp.mean(jnp.abs(ratio - 1.0) > clip_coef)
    approx_kl = jnp.mean((ratio - 1.0) - log_ratio)
    return loss, clipfrac, approx_kl


# Copied from algorithms/ppo.py::value_loss
def value_loss(
    values: Float[Array, " minibatch"],
    old_values: Float[Array, " minibatch"],
    returns: Float[Array, " minibatch"],
    clip_coef: float | Float[Array, ""],
    clip_vloss: bool,
) -> Float[Array, ""]:
    """Half squared error; with `clip_vloss`, the max over the clipped value update."""
    loss = (values - returns) ** 2
    if clip_vloss:
        clipped = old_values + jnp.clip(values - old_values, -clip_coef, clip_coef)
        loss = jnp.maximum(loss, (clipped - returns) ** 2)
    return 0.5 * jnp.mean(loss)


def tanh_log_det_jacobian(x: Float[Array, " action_dim"]) -> Float[Array, ""]:
    """log |d tanh(x) / dx| summed over action dimensions, stably: 2 (log 2 - x - softplus(-2x))."""
    return jnp.sum(2.0 * (jnp.log(2.0) - x - jax.nn.softplus(-2.0 * x)))


def gaussian_log_prob(
    action: Float[Array, " action_dim"],
    mean: Float[Array, " action_dim"],
    log_std: Float[Array, " action_dim"],
) -> Float[Array, ""]:
    """Log-density of a diagonal Gaussian, summed over action dimensions."""
    z = (action - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z**2 - log_std - 0.5 * jnp.log(2.0 * jnp.pi))


# --- training


# Copied from algorithms/ppo.py::shuffled_minibatches
def shuffled_minibatches(key: PRNGKeyArray, num_samples: int, num_minibatches: int) -> Array:
    """A random partition of `num_samples` sample indices: `[num_minibatches, minibatch]`.

    One sort of random bits: jax.random.permutation sorts several times, and a sort of 16,384
    entries took 6.0 ms against 2.8 ms on XLA:CPU (benchmarks/README.md).
    """
    return jnp.argsort(jax.random.bits(key, (num_samples,))).reshape(num_minibatches, -1)


# Copied from algorithms/ppo.py::update_epochs
def update_epochs(
    loss_fn: Callable,
    optimizer: optax.GradientTransformation,
    split: Callable[[PRNGKeyArray, int], Array],
    num_epochs: int,
    model: eqx.Module,
    opt_state: optax.OptState,
    batch: PyTree,
    key: PRNGKeyArray,
) -> tuple[eqx.Module, optax.OptState, dict[str, Array]]:
    """Minibatch SGD on a collected batch, the update of every on-policy file: `num_epochs`
    passes over `batch`, each cut afresh by `split(key, num_samples)` into minibatches of sample
    indices (axis 0 of every leaf: samples, or whole sequences for a recurrent policy), with one
    gradient step of `loss_fn(model, minibatch) -> (loss, stats)` per minibatch. The first four
    arguments fix the update (`functools.partial`). tests/test_minibatch.py checks it against
    a plain Python loop."""
    num_samples = jax.tree.leaves(batch)[0].shape[0]

    def update_minibatch(carry: tuple, indices: Array) -> tuple[tuple, dict[str, Array]]:
        model, opt_state = carry
        # Gathered here, one minibatch at a time: the batch is never copied whole in shuffled
        # order (less memory, the same speed: benchmarks/README.md).
        minibatch = shard_minibatch(jax.tree.map(lambda x: x[indices], batch))
        grads, stats = jax.grad(loss_fn, has_aux=True)(model, minibatch)
        updates, opt_state = optimizer.update(grads, opt_state, model)
        return (optax.apply_updates(model, updates), opt_state), stats

    def update_epoch(carry: tuple, epoch_key: PRNGKeyArray) -> tuple[tuple, dict[str, Array]]:
        return jax.lax.scan(update_minibatch, carry, split(epoch_key, num_samples))

    epoch_keys = jax.random.split(key, num_epochs)
    (model, opt_state), stats = jax.lax.scan(update_epoch, (model, opt_state), epoch_keys)
    return model, opt_state, stats


# Copied from algorithms/ppo.py::learning_rate_schedule
def learning_rate_schedule(config: Config) -> optax.ScalarOrSchedule:
    """The learning rate, annealed linearly to zero once per iteration with `anneal_lr`."""
    if not config.anneal_lr:
        return config.learning_rate
    updates_per_iteration = config.update_epochs * config.num_minibatches
    return lambda count: (
        config.learning_rate * (1.0 - (count // updates_per_iteration) / config.num_iterations)
    )


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_divides(config, "num_envs * num_steps", config.batch_size, "num_minibatches")
    check_budget(config, config.batch_size)
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="ppo_continuous.py")
    obs_dim = int(env.observation_space(env_params).shape[0])
    space = env.action_space(env_params)
    action_dim = int(space.shape[0])  # every gymnax Box action space is one-dimensional
    low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), (action_dim,))
    high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), (action_dim,))

    def env_action(action: Float[Array, "*batch action_dim"]) -> Float[Array, "*batch action_dim"]:
        """What the env gets: the sample clipped to the bounds, or squashed into them."""
        if config.squash:
            return low + 0.5 * (jnp.tanh(action) + 1.0) * (high - low)
        return jnp.clip(action, low, high)

    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step = vector_step(env)
    optimizer = optax.chain(
        clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate_schedule(config), eps=1e-5),  # PPO detail: Adam eps 1e-5
    )
    # Hyperparameters bound once, so that `step` reads as the algorithm.
    gae = functools.partial(compute_gae, gamma=config.gamma, gae_lambda=config.gae_lambda)
    split = functools.partial(shuffled_minibatches, num_minibatches=config.num_minibatches)

    def norm(obs: Float[Array, "*batch obs_dim"], stats: RunningStats) -> Float[Array, "..."]:
        return normalize(obs, stats) if config.norm_obs else obs

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        model = ActorCritic(obs_dim, action_dim, config, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        obs_stats, return_stats = RunningStats.create((obs_dim,)), RunningStats.create(())
        returns = jnp.zeros(config.num_envs)  # running discounted return, for the reward scale
        return TrainState(
            model, optimizer.init(model), env_state, obs, obs_stats, return_stats, returns, key
        )

    def rollout_step(
        model: ActorCritic, obs_stats: RunningStats, carry: tuple, _: None
    ) -> tuple[tuple, Transition]:
        """One step of every env; the model and the statistics stay fixed through a rollout."""
        env_state, obs, returns, key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        mean, log_std = jax.vmap(model.policy)(norm(obs, obs_stats))
        noise = jax.random.normal(action_key, mean.shape)
        action = mean + jnp.exp(log_std) * noise
        log_prob = jax.vmap(gaussian_log_prob)(action, mean, log_std)
        env_keys = jax.random.split(env_key, config.num_envs)
        # The env sees the clipped (or squashed) action; the update uses the raw sample's
        # log-prob (a squashing's Jacobian depends on the sample only: it cancels in the ratio).
        next_obs, env_state, reward, terminated, truncated, info = env_step(
            env_keys, env_state, env_action(action), env_params
        )
        # Running discounted return for reward scaling, restarted at every episode end.
        returns = returns * config.gamma + reward
        final, noise = info["final_observation"], noise if config.squash else None
        transition = Transition(
            obs, action, noise, log_prob, reward, terminated, truncated, final, returns
        )
        returns = jnp.where(terminated | truncated, 0.0, returns)
        return (env_state, next_obs, returns, key), transition

    def loss_fn(model: ActorCritic, batch: tuple[Array | None, ...]) -> tuple[Array, dict]:
        obs, action, noise, old_log_prob, old_values, advantages, returns = batch
        mean, log_std = jax.vmap(model.policy)(obs)
        values = jax.vmap(model.value)(obs)
        log_prob = jax.vmap(gaussian_log_prob)(action, mean, log_std)
        if config.norm_adv:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        log_ratio = log_prob - old_log_prob
        pg_loss, clipfrac, approx_kl = policy_loss(log_ratio, advantages, config.clip_coef)
        v_loss = value_loss(values, old_values, returns, config.clip_coef, config.clip_vloss)
        entropy = jnp.mean(jnp.sum(log_std + 0.5 * jnp.log(2.0 * jnp.pi * jnp.e), -1))
        if config.squash:  # plus the Jacobian at a reparametrised sample, as Brax estimates it
            sample = mean + jnp.exp(log_std) * noise
            entropy += jnp.mean(jax.vmap(tanh_log_det_jacobian)(sample))
        loss = pg_loss + config.vf_coef * v_loss - config.ent_coef * entropy
        stats = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy)
        return loss, {**stats, "approx_kl": approx_kl, "clipfrac": clipfrac}

    # One optimiser step per minibatch, `update_epochs` passes per rollout.
    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, update_key = jax.random.split(state.key)
        rollout = functools.partial(rollout_step, state.model, state.obs_stats)
        carry = (state.env_state, state.obs, state.discounted_return, key)
        (env_state, obs, returns, key), traj = jax.lax.scan(rollout, carry, None, config.num_steps)
        # Rewards only enter the update, so they are scaled with statistics including this batch.
        return_stats, reward = state.return_stats, traj.reward
        if config.norm_reward:
            return_stats = update_stats(return_stats, traj.discounted_return.reshape(-1))
            reward = jnp.clip(reward / jnp.sqrt(return_stats.var + 1e-8), -10.0, 10.0)
        reward = reward * config.reward_scale
        # Normalised with the statistics the rollout used: exactly what the policy saw.
        both = norm(jnp.stack([traj.obs, traj.next_obs]), state.obs_stats)
        values, next_values = jax.vmap(jax.vmap(jax.vmap(state.model.value)))(both)
        advantages, targets = gae(reward, values, next_values, traj.terminated, traj.truncated)
        batch = (both[0], traj.action, traj.noise, traj.log_prob, values, advantages, targets)
        batch = jax.tree.map(lambda x: x.reshape((config.batch_size,) + x.shape[2:]), batch)
        model, opt_state, stats = update(state.model, state.opt_state, batch, update_key)
        obs_stats = state.obs_stats
        if config.norm_obs:
            obs_stats = update_stats(obs_stats, traj.obs.reshape(-1, obs_dim))
        residual = jnp.var(targets - values)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,
            **jax.tree.map(jnp.mean, stats),
            "explained_variance": 1.0 - residual / jnp.maximum(jnp.var(targets), 1e-8),
        }
        state = TrainState(model, opt_state, env_state, obs, obs_stats, return_stats, returns, key)
        return state, metrics

    def act(state: TrainState, obs: Array, key: PRNGKeyArray | None = None) -> Array:
        """The mean action (with `key`, a draw from the policy), on observations normalised
        with the frozen training statistics."""
        mean, log_std = jax.vmap(state.model.policy)(norm(obs, state.obs_stats))
        if key is not None:
            mean = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        return env_action(mean)

    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=act,
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.batch_size,
    )


# --- presets


# Where the Pendulum defaults cannot serve: `--preset NAME`; other flags override.
MOUNTAIN_CAR = dict(env="MountainCarContinuous-v0", gamma=0.99, learning_rate=1e-3)
PRESETS = {"MountainCarContinuous-v0": MOUNTAIN_CAR}

# Brax's PPO as MuJoCo Playground and Brax's notebook configure it (Brax 0.14.2's ppo.train and
# default networks; docs/notes/playground-reference.md): a tanh-squashed Gaussian (std softplus
# + 0.001) from a 4 x 32 swish policy, a 5 x 256 swish value net, running observation
# normalisation, rewards scaled in the loss, Adam at a constant rate, no gradient clipping, GAE
# lambda 0.95, clip 0.3, the value loss unclipped (Brax's 0.5 x 0.5 x squared error is canter's
# vf_coef 0.5). A Brax update collects `num_envs` x (batch x minibatches / num_envs) unrolls of
# `unroll` steps: here one rollout of that many steps per env. Deviations: orthogonal init
# (Brax: LeCun uniform); GAE once per rollout across the unrolls (Brax recomputes it per
# unroll in every minibatch, with the current value net); minibatches of shuffled transitions
# (Brax: of whole unrolls, as many transitions); the entropy's squashing term at the rollout's
# noise (Brax: a fresh draw); observations clipped to +-10 and their statistics updated after
# the update (Brax: unclipped, before); truncation bootstraps (Brax gives a truncated step zero
# advantage); greedy evaluation (Brax samples).
BRAX_PPO = dict(
    anneal_lr=False,
    max_grad_norm=jnp.inf,
    gae_lambda=0.95,
    clip_coef=0.3,
    clip_vloss=False,
    norm_reward=False,
    squash=True,
    hidden_size=32,
    num_layers=4,
    critic_hidden_size=256,
    critic_num_layers=5,
    activation="swish",
)
# Playground's DM Control PPO (config/dm_control_suite_params.py, `brax_ppo_config`, v0.2.0
# L22-60): 2,048 envs x 480 steps (16 unrolls of 30), 16 epochs of 32 minibatches (30,720
# transitions), lr 1e-3, entropy 1e-2, gamma 0.995 (BallInCup, FingerSpin: 0.95), reward scale
# 10. Budget: 90 updates = 88,473,600 env steps, what Brax runs when asked for 6e7 (180 updates
# for AcrobotSwingup*, SwimmerSwimmer6 and WalkerRun, asked 1e8); 9 evaluations of 128 episodes.
# Deviation: full 1,000-step episodes (Playground resets every env after each update).
DM_CONTROL = dict(
    BRAX_PPO,
    total_timesteps=88_473_600,
    eval_every=9_830_400,
    num_eval_envs=128,
    num_envs=2048,
    num_steps=480,
    learning_rate=1e-3,
    update_epochs=16,
    num_minibatches=32,
    gamma=0.995,
    ent_coef=1e-2,
    reward_scale=10.0,
)
PRESETS |= {task: dict(DM_CONTROL, env=f"playground:{task}") for task in PLAYGROUND_TASKS}
LONGER = ("AcrobotSwingup", "AcrobotSwingupSparse", "SwimmerSwimmer6", "WalkerRun")
PRESETS |= {task: dict(PRESETS[task], total_timesteps=176_947_200) for task in LONGER}
PRESETS |= {task: dict(PRESETS[task], gamma=0.95) for task in ("BallInCup", "FingerSpin")}
# Brax's training notebook (notebooks/training.ipynb at 5294163, positional backend; it trains
# hopper and walker2d with SAC): ant 4,096 envs x 80 steps (16 unrolls of 5), 4 epochs, gamma
# 0.97, entropy 1e-2, reward scale 10; humanoid 2,048 x 160 (16 of 10), 8 epochs, 0.97, 1e-3,
# 0.1; halfcheetah 2,048 x 160 (8 of 20), 8 epochs, 0.95, 1e-3, 1; all 32 minibatches, lr 3e-4,
# 5e7 env steps asked (Brax runs 50,135,040; halfcheetah 56,033,280), 9 or 19 evaluations.
BRAX = dict(BRAX_PPO, num_minibatches=32, learning_rate=3e-4, num_eval_envs=128)
ANT = dict(
    BRAX,
    env="brax:ant",
    total_timesteps=50_135_040,
    eval_every=5_570_560,  # 17 updates
    num_envs=4096,
    num_steps=80,
    update_epochs=4,
    gamma=0.97,
    ent_coef=1e-2,
    reward_scale=10.0,
)
HUMANOID = dict(
    BRAX,
    env="brax:humanoid",
    total_timesteps=50_135_040,
    eval_every=5_570_560,  # 17 updates
    num_envs=2048,
    num_steps=160,
    update_epochs=8,
    gamma=0.97,
    ent_coef=1e-3,
    reward_scale=0.1,
)
HALFCHEETAH = dict(
    BRAX,
    env="brax:halfcheetah",
    total_timesteps=56_033_280,
    eval_every=2_949_120,  # 9 updates
    num_envs=2048,
    num_steps=160,
    update_epochs=8,
    gamma=0.95,
    ent_coef=1e-3,
    reward_scale=1.0,
)
PRESETS |= {"ant": ANT, "humanoid": HUMANOID, "halfcheetah": HALFCHEETAH}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

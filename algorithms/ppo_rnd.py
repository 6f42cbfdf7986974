"""PPO with Random Network Distillation for discrete actions (Burda et al. 2018, arXiv:1810.12894).

Exploration by novelty: a fixed, randomly initialised target network maps each observation to a
vector, a predictor network is trained to reproduce it on the observations the policy visits,
and the predictor's squared error on the state a step reaches is that step's intrinsic reward:
large where the agent has rarely been. The policy maximises a weighted sum of the extrinsic and
intrinsic advantages; each reward stream has its own critic head and discount, and the intrinsic
one is by default non-episodic (its return runs on across episode ends, as Burda et al. argue:
a novel state stays worth reaching after a death).

Follows Craftax_Baselines' `ppo_rnd.py` (the PPO of canter's ppo.py, separate actor, extrinsic
and intrinsic critic MLPs, the predictor trained by its own Adam after each PPO update) and adds
the paper's two normalisations, on by default: observations standardised by running statistics
and clipped to +-5 before the target and predictor (`norm_rnd_obs`), and intrinsic rewards
divided by the running standard deviation of their discounted return (`norm_int_reward`).
Craftax_Baselines uses neither (its preset turns both off). Deviations from both: a truncated
episode bootstraps its extrinsic value from its final observation; the intrinsic reward of a
step is the error on the observation it reached, the final one where an episode ended (CB scores
the next episode's first observation and zeroes it); the predictor is trained on the rollout's
observations, as CleanRL's `ppo_rnd_envpool.py` does; the observation statistics start from the
first reset's observations (the paper steps a random agent first); the predictor's loss is
unscaled and its gradient unclipped (CB scales the loss by 0.01 and clips at norm 1: under Adam
the scale cancels but for eps, and the clip binds only where the unscaled norm passes 100).

The defaults are ppo.py's PPO at 16 envs x 32 steps with target and predictor of 64, measured on
DeepSea-bsuite-16, where ppo.py at the same sizes never finds the treasure (docs/results.md).

    python algorithms/ppo_rnd.py --num-seeds 4  # DeepSea-bsuite-16
    python algorithms/ppo_rnd.py --preset Craftax-Symbolic-v1 --num-seeds 4
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Literal

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.clipping import clip_by_global_norm  # one sum off the CPU
from canter.common.blocks.layers import MLP
from canter.common.blocks.loops import scan
from canter.common.blocks.masking import masked_argmax, masked_logits, sample_masked
from canter.common.blocks.normalization import RunningStats, update_stats
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
from canter.common.envs import MINATAR_GAMES, ended_episodes, make_env, vector_mask, vector_step
from canter.common.envs.registry import CRAFTAX_GAMES
from canter.common.run.devices import shard_minibatch
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, PyTree

ACTION_SPACE = "discrete"


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "DeepSea-bsuite-16"
    """Environment (discrete actions): a gymnax id (MountainCar-v0, Breakout-MinAtar, ...), a
    registered name (DeepSea-bsuite-16, ...), or `gymnasium:<id>`; observations are flattened.
    See docs/environments.md."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 307_200
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 76_800
    """Env steps per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per evaluation."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """What evaluation plays: the most likely valid action ("greedy"), or a draw from the
    policy as in training ("sampled")."""
    num_envs: PositiveInt = 16
    """Parallel environments per seed."""
    num_steps: PositiveInt = 32
    """Steps per environment per rollout."""
    learning_rate: NonNegative = 2.5e-4
    """Adam learning rate of the actor and critics."""
    anneal_lr: bool = True
    """Anneal the actor-critic learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 0.5
    """Global gradient-norm clipping threshold of the actor-critic."""
    update_epochs: PositiveInt = 4
    """Passes of the actor-critic over each rollout."""
    num_minibatches: PositiveInt = 4
    """Minibatches per epoch (the predictor's too)."""
    gamma: UnitInterval = 0.99
    """Discount of the extrinsic reward."""
    gae_lambda: UnitInterval = 0.95
    """GAE lambda (both reward streams)."""
    clip_coef: Positive = 0.2
    """Surrogate clipping coefficient (also clips both value updates; the combined advantages
    are normalised per minibatch, as in ppo.py by default)."""
    ent_coef: NonNegative = 0.01
    """Entropy bonus coefficient."""
    vf_coef: NonNegative = 0.5
    """Coefficient of the sum of the two value losses."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation of the actor's and critics' hidden layers."""
    hidden_size: PositiveInt = 64
    """Width of the hidden layers of the actor and both critics."""
    num_layers: PositiveInt = 2
    """Hidden layers of the actor and of each critic (each its own MLP)."""
    int_coef: NonNegative = 0.5
    """Weight of the intrinsic advantage against the extrinsic one (the paper's 1 against 2)."""
    int_gamma: UnitInterval = 0.99
    """Discount of the intrinsic reward (the paper's 0.99, against its extrinsic 0.999)."""
    int_episodic: bool = False
    """End the intrinsic return at episode ends too (the paper's is non-episodic)."""
    norm_int_reward: bool = True
    """Divide intrinsic rewards by the running std of their discounted return (the paper's)."""
    norm_rnd_obs: bool = True
    """Standardise the target's and predictor's inputs by running statistics, clipped to +-5."""
    rnd_learning_rate: NonNegative = 3e-4
    """Adam learning rate of the predictor (constant)."""
    rnd_update_epochs: PositiveInt = 1
    """Passes of the predictor over each rollout (unclipped gradients, unscaled loss)."""
    rnd_hidden_size: PositiveInt = 64
    """Width of the three hidden (ReLU) layers of the target and predictor."""
    rnd_output_size: PositiveInt = 64
    """Size of the embedding the predictor learns to reproduce."""
    rnd_init: Literal["orthogonal", "lecun"] = "orthogonal"
    """Initialisation of the target and predictor: orthogonal (gain sqrt 2, output 1, as the
    policy's MLPs), or Flax's Dense default as Craftax_Baselines' `RNDNetwork` (LeCun normal,
    zero biases, no gains): on Craftax's observations the LeCun target's embedding is about half
    as large, so unnormalised intrinsic rewards a quarter (a 1M measurement of both: issue 71)."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


class ActorCritic(eqx.Module):
    """Separate actor (logits, output gain 0.01), extrinsic and intrinsic critic (value, gain 1)
    MLPs on the flat observation, orthogonally initialised (CB's `ActorCriticRND`)."""

    actor: MLP
    critic: MLP
    int_critic: MLP

    def __init__(self, obs_dim: int, num_actions: int, config: Config, key: PRNGKeyArray):
        actor_key, critic_key, int_key = jax.random.split(key, 3)
        activation, hidden, depth = config.activation, config.hidden_size, config.num_layers
        self.actor = MLP((obs_dim, hidden, num_actions), 0.01, actor_key, activation, depth)
        self.critic = MLP((obs_dim, hidden, 1), 1.0, critic_key, activation, depth)
        self.int_critic = MLP((obs_dim, hidden, 1), 1.0, int_key, activation, depth)

    def logits(self, obs: Float[Array, "*obs_shape"]) -> Float[Array, " num_actions"]:
        return self.actor(obs.reshape(-1))

    def value(self, obs: Float[Array, "*obs_shape"]) -> Float[Array, "2"]:
        """The extrinsic and the intrinsic value."""
        flat = obs.reshape(-1)
        return jnp.concatenate([self.critic(flat), self.int_critic(flat)])


# --- state


class Transition(eqx.Module):
    """One rollout step of every environment; `next_value` holds the critics' values of the
    pre-reset final observation, `mask` the valid actions (None for an env without masks),
    `novelty` the predictor's error on the observation the step reached, unscaled."""

    obs: Float[Array, "num_envs ..."]
    action: Int[Array, " num_envs"]
    mask: Bool[Array, "num_envs num_actions"] | None
    log_prob: Float[Array, " num_envs"]
    reward: Float[Array, " num_envs"]
    novelty: Float[Array, " num_envs"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_value: Float[Array, "num_envs 2"]


class RND(eqx.Module):
    """The exploration bonus: the fixed random target (kept so that a checkpoint holds it), the
    predictor and its optimiser state, and the running statistics that scale the networks'
    inputs and the intrinsic rewards (each env's discounted intrinsic return so far)."""

    target: MLP
    predictor: MLP
    opt_state: optax.OptState
    obs_stats: RunningStats
    int_return: Float[Array, " num_envs"]
    int_return_stats: RunningStats

    def novelty(self, inputs: Float[Array, "batch obs_dim"]) -> Float[Array, " batch"]:
        """The intrinsic reward before scaling: the predictor's error on the target."""
        error = jax.vmap(self.predictor)(inputs) - jax.vmap(self.target)(inputs)
        return jnp.mean(error**2, axis=-1)


def rnd_inputs(obs: Float[Array, "batch ..."], stats: RunningStats, normalize: bool) -> Array:
    """Flat observations, standardised and clipped to +-5 with `normalize` (Burda et al.)."""
    flat = obs.reshape(obs.shape[0], -1)
    standard = (flat - stats.mean) / jnp.sqrt(stats.var + 1e-8)
    return jnp.clip(standard, -5.0, 5.0) if normalize else flat


class TrainState(eqx.Module):
    """Everything that changes during training."""

    model: ActorCritic
    opt_state: optax.OptState
    rnd: RND
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs ..."]
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


def intrinsic_rewards(
    rnd: RND,
    novelty: Float[Array, "num_steps num_envs"],
    gamma: float | Float[Array, ""],
    scale: bool,
) -> tuple[Float[Array, "num_steps num_envs"], Float[Array, " num_envs"], RunningStats]:
    """Novelty divided, with `scale`, by the running std of each env's discounted sum of it
    (`g = gamma * g + r`, never reset: the paper's RewardForwardFilter); also the sums' last
    values and statistics, carried to the next rollout."""
    returns = jax.lax.scan(lambda g, r: (gamma * g + r,) * 2, rnd.int_return, novelty)[1]
    stats = update_stats(rnd.int_return_stats, returns.reshape(-1))
    return novelty / (jnp.sqrt(stats.var + 1e-8) if scale else 1.0), returns[-1], stats


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


# Copied from algorithms/ppo.py::act
def act(
    state: TrainState,
    obs: Float[Array, "n ..."],
    mask: Array | None = None,
    key: PRNGKeyArray | None = None,
) -> Array:
    """The most likely valid action under the policy, or with `key` a draw from it."""
    logits = jax.vmap(state.model.logits)(obs)
    return masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_divides(config, "num_envs * num_steps", config.batch_size, "num_minibatches")
    check_budget(config, config.batch_size)
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="ppo_rnd.py")
    obs_dim = math.prod(int(n) for n in env.observation_space(env_params).shape)
    sizes, init = (obs_dim, config.rnd_hidden_size, config.rnd_output_size), config.rnd_init
    rnd_network = functools.partial(MLP, sizes, 1.0, activation="relu", depth=3, init=init)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = optax.chain(
        clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate_schedule(config), eps=1e-5),  # PPO detail: Adam eps 1e-5
    )
    rnd_adam = optax.adam(config.rnd_learning_rate, eps=1e-5)
    gae = functools.partial(compute_gae, gae_lambda=config.gae_lambda)
    split = functools.partial(shuffled_minibatches, num_minibatches=config.num_minibatches)
    scaling = (config.int_gamma, config.norm_int_reward)  # of the intrinsic rewards

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, predictor_key, target_key, env_key, key = jax.random.split(key, 5)
        model = ActorCritic(obs_dim, int(env.action_space(env_params).n), config, model_key)
        predictor, target = rnd_network(key=predictor_key), rnd_network(key=target_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        obs_stats = update_stats(RunningStats.create((obs_dim,)), obs.reshape(obs.shape[0], -1))
        int_return, opt_state = jnp.zeros(config.num_envs), rnd_adam.init(predictor)
        rnd = RND(target, predictor, opt_state, obs_stats, int_return, RunningStats.create(()))
        return TrainState(model, optimizer.init(model), rnd, env_state, obs, key)

    def rollout_step(carry: tuple, _: None) -> tuple[tuple, Transition]:
        state, env_state, obs, key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        mask = valid(env_state, env_params)  # masked actions are never sampled
        action, log_prob = sample_masked(action_key, jax.vmap(state.model.logits)(obs), mask)
        next_obs, env_state, reward, terminated, truncated, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, action, env_params
        )
        final_obs = info["final_observation"]  # the state reached, before any reset
        bonus = state.rnd.novelty(rnd_inputs(final_obs, state.rnd.obs_stats, config.norm_rnd_obs))
        next_value = jax.vmap(state.model.value)(final_obs)
        ends = (terminated, truncated)
        record = Transition(obs, action, mask, log_prob, reward, bonus, *ends, next_value)
        return (state, env_state, next_obs, key), record

    def loss_fn(model: ActorCritic, batch: tuple[Array | None, ...]) -> tuple[Array, dict]:
        obs, action, mask, old_log_prob, old_values, advantages, returns = batch
        logits, values = jax.vmap(model.logits)(obs), jax.vmap(model.value)(obs)
        dist = distrax.Categorical(logits=masked_logits(logits, mask))  # entropy: valid actions
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        log_ratio = dist.log_prob(action) - old_log_prob
        pg_loss, clipfrac, approx_kl = policy_loss(log_ratio, advantages, config.clip_coef)
        # Both heads' clipped value losses (PPO detail), summed as CB sums them.
        clipped = old_values + jnp.clip(values - old_values, -config.clip_coef, config.clip_coef)
        v_losses = jnp.maximum((values - returns) ** 2, (clipped - returns) ** 2)
        v_loss = jnp.sum(0.5 * jnp.mean(v_losses, axis=0))
        entropy = dist.entropy().mean()
        loss = pg_loss + config.vf_coef * v_loss - config.ent_coef * entropy
        stats = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy)
        return loss, {**stats, "approx_kl": approx_kl, "clipfrac": clipfrac}

    def rnd_loss(predictor: MLP, batch: tuple[Array, Array]) -> tuple[Array, dict]:
        inputs, embedded = batch
        loss = jnp.mean((jax.vmap(predictor)(inputs) - embedded) ** 2)
        return loss, {"rnd_loss": loss}

    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)
    fit_rnd = functools.partial(update_epochs, rnd_loss, rnd_adam, split, config.rnd_update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, update_key, rnd_key = jax.random.split(state.key, 3)
        carry = (state, state.env_state, state.obs, key)
        (_, env_state, obs, key), traj = scan(rollout_step, carry, None, config.num_steps)
        critic = jax.vmap(state.model.value)
        values = jax.vmap(critic)(traj.obs)  # [num_steps, num_envs, 2]: extrinsic, intrinsic
        following = jnp.concatenate([values[1:], critic(obs)[None]])
        int_reward, int_return, return_stats = intrinsic_rewards(state.rnd, traj.novelty, *scaling)
        ends, (value, int_value) = (traj.terminated, traj.truncated), jnp.moveaxis(values, -1, 0)
        advantages, returns = gae(traj.reward, value, traj.next_value[..., 0], *ends, config.gamma)
        if config.int_episodic:
            int_next, int_ends = traj.next_value[..., 1], ends
        else:  # the intrinsic return runs on into the next episode
            int_next, int_ends = following[..., 1], (jnp.zeros_like(traj.terminated),) * 2
        int_adv, int_returns = gae(int_reward, int_value, int_next, *int_ends, config.int_gamma)
        combined = advantages + config.int_coef * int_adv
        both_returns = jnp.stack([returns, int_returns], axis=-1)
        batch = (traj.obs, traj.action, traj.mask, traj.log_prob, values, combined, both_returns)
        batch = jax.tree.map(lambda x: x.reshape((config.batch_size,) + x.shape[2:]), batch)
        model, opt_state, stats = update(state.model, state.opt_state, batch, update_key)
        # The predictor fits the observations just visited, under the statistics they update.
        visited, rnd = traj.obs.reshape(config.batch_size, -1), state.rnd
        obs_stats = update_stats(rnd.obs_stats, visited)
        inputs = rnd_inputs(visited, obs_stats, config.norm_rnd_obs)
        rnd_batch = (inputs, jax.vmap(rnd.target)(inputs))  # the fixed embeddings, once
        predictor, rnd_opt, rnd_stats = fit_rnd(rnd.predictor, rnd.opt_state, rnd_batch, rnd_key)
        rnd = RND(rnd.target, predictor, rnd_opt, obs_stats, int_return, return_stats)
        residual = jnp.var(returns - value)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,
            **jax.tree.map(jnp.mean, stats | rnd_stats),
            "intrinsic_reward": jnp.mean(int_reward),
            "explained_variance": 1.0 - residual / jnp.maximum(jnp.var(returns), 1e-8),
        }
        return TrainState(model, opt_state, rnd, env_state, obs, key), metrics

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


# gymnax-blines' MinAtar PPO, as in ppo.py's MinAtar presets (agents/<game>/ppo.yaml at 3f029d6:
# 64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-4 constant, gamma 0.999, ReLU MLPs 2x256,
# 1e7 env steps, evaluation sampled as its numbers are), with the defaults' RND (the paper's
# normalisations and weights, networks of 64); no RND reference on MinAtar.
MINATAR = dict(
    total_timesteps=10_000_000,
    eval_every=409_600,  # 50 iterations
    num_eval_envs=32,
    eval_policy="sampled",
    num_envs=64,
    num_minibatches=8,
    learning_rate=5e-4,
    anneal_lr=False,
    gamma=0.999,
    activation="relu",
    hidden_size=256,
)
PRESETS = {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}

# Craftax_Baselines' ppo_rnd.py at 7ce36fa (argparse L619-671): ppo.py's PPO (4 epochs x 8
# minibatches, gamma 0.99, GAE lambda 0.8, clip 0.2, entropy 0.01, value 0.5, grad norm 1, raw
# observations, 3 x 512 tanh MLPs for the actor and each critic) and its RND: target and predictor
# of 3 x 256 ReLU layers and a 512 output, the predictor's Adam at lr 3e-4 for one epoch per
# update, intrinsic advantages weighted 0.01 (`--rnd_gae_coeff`), intrinsic rewards unscaled
# (`--rnd_reward_coeff 1`) and non-episodic, discounted by the same 0.99; neither of the paper's
# normalisations. Its defaults (1024 envs x 64
# steps, lr 2e-4) are the 1e9 configuration: `Craftax-Symbolic-v1-1e9`. The 1M preset is CB's RND
# 1M sweep (branch rnd-sweep at fe238b4, sweeps/rnd_1m.yaml: `--num_envs 256 --num_steps 16`, 10
# seeds, lr left at 2e-4; PPO's 1M preset takes issue #4's 3e-4 instead). Craftax's README reports
# RND at 2.2% of the maximum (226) at 1e6 and 12.0% at 1e9: CB's training statistic, so the
# sampled policy is evaluated (ppo.py's Craftax comment). Deviations: the module docstring's.
CRAFTAX = dict(
    num_eval_envs=16,
    eval_policy="sampled",
    num_minibatches=8,
    gae_lambda=0.8,
    max_grad_norm=1.0,
    hidden_size=512,
    num_layers=3,
    int_coef=0.01,
    rnd_hidden_size=256,
    rnd_output_size=512,
    norm_int_reward=False,
    norm_rnd_obs=False,
)
CRAFTAX_1M = dict(
    CRAFTAX,
    total_timesteps=1_000_000,
    eval_every=249_856,  # 61 iterations of 4,096: 4 evaluations
    num_envs=256,
    num_steps=16,
    learning_rate=2e-4,
)
CRAFTAX_1E9 = dict(
    CRAFTAX,
    total_timesteps=1_000_000_000,
    eval_every=50_003_968,  # 763 iterations of 65,536: 20 evaluations, the last 761
    num_envs=1024,
    num_steps=64,
    learning_rate=2e-4,
)
PRESETS |= {game: dict(CRAFTAX_1M, env=f"craftax:{game}") for game in CRAFTAX_GAMES}
PRESETS |= {f"{game}-1e9": dict(CRAFTAX_1E9, env=f"craftax:{game}") for game in CRAFTAX_GAMES}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

"""PPO for Atari: discrete actions from 84x84x4 frame stacks, a Nature CNN shared by both heads.

PPO (Schulman et al. 2017, arXiv:1707.06347) with the configuration and implementation details
of CleanRL's `ppo_atari.py`: the Nature DQN torso (Mnih et al. 2015; pixels / 255), orthogonal
init, 8 envs x 128 steps, clip 0.1, Adam eps 1e-5 with the learning rate annealed, 4 epochs x 4
minibatches. The environment is Gymnasium's Atari (`gymnasium:ALE/<Game>-v5`, stepped on the
host) with the standard preprocessing (common/envs/host.py): no-op starts, frame skip 4 with
max-pooling, 84x84 greyscale, 4 frames stacked; training only (`--episodic-life`,
`--clip-rewards`), a lost life ends the learner's episode and rewards are clipped to their sign.
Deviates from CleanRL: on `ALE/<Game>-v5` sticky actions (0.25) stay on where CleanRL's
NoFrameskip-v4 has none (`--env gymnasium:BreakoutNoFrameskip-v4` is CleanRL's game), there is
no FIRE on reset, and a truncated episode bootstraps from the value of its final observation
(time limits are not terminations). Same loss math as algorithms/ppo.py.

    pip install -e ".[atari]"
    python algorithms/ppo_atari.py --env gymnasium:ALE/Breakout-v5 --num-seeds 2
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Literal

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.clipping import clip_by_global_norm  # one sum off the CPU
from canter.common.blocks.initializers import orthogonal, orthogonal_linear
from canter.common.blocks.layers import Conv2d  # eqx.nn.Conv2d, a patch matmul on the CPU
from canter.common.blocks.loops import scan
from canter.common.blocks.masking import masked_argmax, masked_logits, sample_masked
from canter.common.config import (
    ConfigError,
    NonNegative,
    Positive,
    PositiveInt,
    PositiveOrInf,
    UnitInterval,
    check_budget,
    check_divides,
    pytree_config,
)
from canter.common.envs import ended_episodes, make_env, vector_mask, vector_step
from canter.common.run.devices import shard_minibatch
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, PyTree

ACTION_SPACE = "discrete"
FRAME_SHAPE = (84, 84, 4)  # height, width, stacked frames: what the Nature CNN is sized for


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "gymnasium:ALE/Breakout-v5"
    """Atari game, `gymnasium:ALE/<Game>-v5` or, without sticky actions, `<Game>NoFrameskip-v4`
    (`pip install -e '.[atari]'`)."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 10_000_000
    """Env steps (agent steps, 4 frames each) per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 102_400
    """Env steps per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 4
    """Environments (one game each) per evaluation."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """What evaluation plays: the most likely valid action ("greedy"), or a draw from the
    policy as in training ("sampled")."""
    eval_max_steps: PositiveInt = 27_000
    """Step limit of an evaluation game (ALE's own: 27,000 steps, 30 minutes of play); lower it
    to bound evaluation time, as a greedy policy can stall (Breakout without FIRE)."""
    num_envs: PositiveInt = 8
    """Parallel environments per seed."""
    num_steps: PositiveInt = 128
    """Steps per environment per rollout."""
    episodic_life: bool = True
    """Training only: a lost life ends the learner's episode (the game goes on)."""
    clip_rewards: bool = True
    """Training only: rewards clipped to their sign."""
    learning_rate: NonNegative = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 0.5
    """Global gradient-norm clipping threshold."""
    update_epochs: PositiveInt = 4
    """Passes over each rollout."""
    num_minibatches: PositiveInt = 4
    """Minibatches per epoch."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    gae_lambda: UnitInterval = 0.95
    """GAE lambda."""
    clip_coef: Positive = 0.1
    """Surrogate clipping coefficient (also clips the value update)."""
    clip_vloss: bool = True
    """Clip the value loss as in the PPO reference implementation."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    ent_coef: NonNegative = 0.01
    """Entropy bonus coefficient."""
    vf_coef: NonNegative = 0.5
    """Value loss coefficient."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


def orthogonal_conv(
    in_channels: int, out_channels: int, kernel: int, stride: int, key: PRNGKeyArray
) -> Conv2d:
    """Convolution with orthogonal weights of gain sqrt(2) (over the flattened receptive field)
    and zero bias, as CleanRL's `layer_init`."""
    conv = Conv2d(in_channels, out_channels, kernel, stride=stride, key=key)
    weight = orthogonal(key, (out_channels, in_channels * kernel * kernel), 2**0.5)
    return eqx.tree_at(
        lambda c: (c.weight, c.bias),
        conv,
        (weight.reshape(conv.weight.shape), jnp.zeros_like(conv.bias)),
    )


class NatureCNN(eqx.Module):
    """The Nature DQN torso (Mnih et al. 2015): 32 8x8/4, 64 4x4/2, 64 3x3/1 convolutions and a
    512-unit dense layer, ReLU throughout, on pixels scaled to [0, 1]."""

    convs: tuple[Conv2d, ...]
    dense: eqx.nn.Linear

    def __init__(self, channels: int, key: PRNGKeyArray):
        keys = jax.random.split(key, 4)
        self.convs = (
            orthogonal_conv(channels, 32, 8, 4, keys[0]),
            orthogonal_conv(32, 64, 4, 2, keys[1]),
            orthogonal_conv(64, 64, 3, 1, keys[2]),
        )
        self.dense = orthogonal_linear(64 * 7 * 7, 512, 2**0.5, keys[3])

    def __call__(self, x: Float[Array, "84 84 channels"]) -> Float[Array, " 512"]:
        # Channels last throughout (no transposes between layers: faster on XLA:CPU), so the
        # dense layer reads the last feature map flattened (height, width, channels) where
        # CleanRL's reads (channels, height, width): a fixed permutation of its inputs, which
        # leaves its orthogonal initialisation's distribution unchanged.
        x = x / 255.0
        for conv in self.convs:
            x = jax.nn.relu(conv.channels_last(x))
        return jax.nn.relu(self.dense(x.reshape(-1)))


class AtariActorCritic(eqx.Module):
    """One `NatureCNN` under a linear actor (logits, gain 0.01) and critic (value, gain 1)."""

    torso: NatureCNN
    actor: eqx.nn.Linear
    critic: eqx.nn.Linear

    def __init__(self, channels: int, num_actions: int, key: PRNGKeyArray):
        torso_key, actor_key, critic_key = jax.random.split(key, 3)
        self.torso = NatureCNN(channels, torso_key)
        self.actor = orthogonal_linear(512, num_actions, 0.01, actor_key)
        self.critic = orthogonal_linear(512, 1, 1.0, critic_key)

    def logits(self, obs: Float[Array, "84 84 channels"]) -> Float[Array, " num_actions"]:
        return self.actor(self.torso(obs))

    def value(self, obs: Float[Array, "84 84 channels"]) -> Float[Array, ""]:
        return self.critic(self.torso(obs))[0]

    def __call__(self, obs: Float[Array, "84 84 channels"]) -> tuple[Array, Array]:
        """Logits and value, with the torso computed once."""
        features = self.torso(obs)
        return self.actor(features), self.critic(features)[0]


# --- state


class Transition(eqx.Module):
    """One rollout step of every environment; `next_value` is the critic's value of the
    pre-reset final observation (computed in the rollout, so that the rollout keeps one stack
    of frames per step, not two), `mask` the valid actions (None for every Atari game)."""

    obs: Float[Array, "num_envs 84 84 channels"]
    action: Int[Array, " num_envs"]
    mask: Bool[Array, "num_envs num_actions"] | None
    log_prob: Float[Array, " num_envs"]
    value: Float[Array, " num_envs"]
    reward: Float[Array, " num_envs"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_value: Float[Array, " num_envs"]


class TrainState(eqx.Module):
    """Everything that changes during training."""

    model: AtariActorCritic
    opt_state: optax.OptState
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs 84 84 channels"]
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
    env, env_params = make_env(
        config.env,
        action=ACTION_SPACE,
        algorithm="ppo_atari.py",
        image=True,
        image_hint="it trains on Atari frames (gymnasium:ALE/<Game>-v5); for other envs use "
        "algorithms/ppo.py",
        episodic_life=config.episodic_life,
        clip_rewards=config.clip_rewards,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    if obs_shape[:2] != FRAME_SHAPE[:2]:
        raise ConfigError(
            f"ppo_atari.py's Nature CNN needs 84x84 frames (height x width x stack), but "
            f"{config.env} gives {obs_shape}; use gymnasium:ALE/<Game>-v5, or algorithms/ppo.py "
            "--network cnn for MinAtar's 10x10 grids."
        )
    num_actions = int(env.action_space(env_params).n)
    # The host env's params set the evaluation's step limit only (Gymnasium ends training games).
    limit = min(config.eval_max_steps, env_params.max_steps_in_episode)
    env_params = dataclasses.replace(env_params, max_steps_in_episode=limit)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = optax.chain(
        clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate_schedule(config), eps=1e-5),  # PPO detail: Adam eps 1e-5
    )
    # Hyperparameters bound once, so that `step` reads as the algorithm.
    gae = functools.partial(compute_gae, gamma=config.gamma, gae_lambda=config.gae_lambda)
    split = functools.partial(shuffled_minibatches, num_minibatches=config.num_minibatches)

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        model = AtariActorCritic(obs_shape[-1], num_actions, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        return TrainState(model, optimizer.init(model), env_state, obs, key)

    def rollout_step(carry: tuple, _: None) -> tuple[tuple, Transition]:
        model, env_state, obs, key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        logits, value = jax.vmap(model)(obs)  # one torso pass for both heads
        mask = valid(env_state, env_params)  # masked actions are never sampled
        action, log_prob = sample_masked(action_key, logits, mask)
        next_obs, env_state, reward, terminated, truncated, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, action, env_params
        )
        next_value = jax.vmap(model.value)(info["final_observation"])  # for bootstrapping
        step = Transition(
            obs, action, mask, log_prob, value, reward, terminated, truncated, next_value
        )
        return (model, env_state, next_obs, key), step

    def loss_fn(model: AtariActorCritic, batch: tuple[Array | None, ...]) -> tuple[Array, dict]:
        obs, action, mask, old_log_prob, old_values, advantages, returns = batch
        logits, values = jax.vmap(model)(obs)
        dist = distrax.Categorical(logits=masked_logits(logits, mask))  # entropy: valid actions
        if config.norm_adv:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        log_ratio = dist.log_prob(action) - old_log_prob
        pg_loss, clipfrac, approx_kl = policy_loss(log_ratio, advantages, config.clip_coef)
        v_loss = value_loss(values, old_values, returns, config.clip_coef, config.clip_vloss)
        entropy = dist.entropy().mean()
        loss = pg_loss + config.vf_coef * v_loss - config.ent_coef * entropy
        stats = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy)
        return loss, {**stats, "approx_kl": approx_kl, "clipfrac": clipfrac}

    # One optimiser step per minibatch, `update_epochs` passes per rollout.
    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, update_key = jax.random.split(state.key)
        carry = (state.model, state.env_state, state.obs, key)
        (_, env_state, obs, key), traj = jax.lax.scan(rollout_step, carry, None, config.num_steps)
        advantages, returns = gae(
            traj.reward, traj.value, traj.next_value, traj.terminated, traj.truncated
        )
        batch = (traj.obs, traj.action, traj.mask, traj.log_prob, traj.value, advantages, returns)
        batch = jax.tree.map(lambda x: x.reshape((config.batch_size,) + x.shape[2:]), batch)
        model, opt_state, stats = update(state.model, state.opt_state, batch, update_key)
        residual = jnp.var(returns - traj.value)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,  # whole games, raw scores (not the clipped rewards)
            **jax.tree.map(jnp.mean, stats),
            "explained_variance": 1.0 - residual / jnp.maximum(jnp.var(returns), 1e-8),
        }
        return TrainState(model, opt_state, env_state, obs, key), metrics

    def act(
        state: TrainState,
        obs: Float[Array, "n 84 84 channels"],
        mask: Array | None = None,
        key: PRNGKeyArray | None = None,
    ) -> Int[Array, " n"]:
        """The most likely valid action under the policy, or with `key` a draw from it."""
        logits = jax.vmap(state.model.logits)(obs)
        return masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]

    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=act,
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.batch_size,
    )


if __name__ == "__main__":
    trainer.cli(Config, make_train)

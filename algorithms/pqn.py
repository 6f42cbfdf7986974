"""PQN for discrete actions (Gallici et al. 2024, "Simplifying Deep Temporal Difference
Learning", arXiv:2407.04811): Q(lambda) over parallel environments, LayerNorm, no replay buffer
and no target network.

Follows purejaxql's `pqn_gymnax.py` (epsilon-greedy rollouts from many envs, Q(lambda) returns
computed once per rollout, several epochs of minibatch regression, RAdam with global-norm
clipping and a linearly decaying learning rate); the defaults are its CartPole config. Deviates
on time limits: a truncated episode bootstraps from the value of its final observation, and the
lambda recursion is cut at every episode end (purejaxql and rejax shipped off-by-one returns).
MinAtar (`--preset Breakout-MinAtar`, one per game) follows `pqn_minatar.py`: a CNN (16 3x3
filters, LayerNorm, ReLU) under one LayerNorm-ReLU layer of 128, 128 envs x 32 steps, lambda 0.65.

    python algorithms/pqn.py --env CartPole-v1 --num-seeds 4
    python algorithms/pqn.py --preset Breakout-MinAtar --num-seeds 4
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.clipping import clip_by_global_norm  # one sum off the CPU
from canter.common.blocks.layers import Conv2d  # eqx.nn.Conv2d, a patch matmul on the CPU
from canter.common.blocks.loops import scan
from canter.common.blocks.masking import masked_argmax, masked_max, random_action
from canter.common.config import (
    NonNegative,
    Positive,
    PositiveFraction,
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
    env: str = "CartPole-v1"
    """Environment (discrete actions): a gymnax id (CartPole-v1, Breakout-MinAtar, ...), a
    registered name (CartPole-v1-NoVelocity, or yours: `register_env`), or `gymnasium:<id>` for
    any Gymnasium id (gymnasium:ALE/Breakout-v5, ...). See docs/environments.md."""
    sticky_action_prob: UnitInterval = 0.0
    """Probability that the env repeats its last action instead (MinAtar games only)."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 500_000
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 51_200
    """Env steps per seed between greedy evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per greedy evaluation."""
    num_envs: PositiveInt = 32
    """Parallel environments per seed."""
    num_steps: PositiveInt = 64
    """Steps per environment per rollout."""
    learning_rate: NonNegative = 1e-4
    """RAdam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 10.0
    """Global gradient-norm clipping threshold."""
    update_epochs: PositiveInt = 4
    """Passes over each rollout."""
    num_minibatches: PositiveInt = 16
    """Minibatches per epoch."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    q_lambda: UnitInterval = 0.95
    """Lambda of the Q(lambda) returns (0: one-step Q-learning targets)."""
    start_e: UnitInterval = 1.0
    """Exploration epsilon at the start."""
    end_e: UnitInterval = 0.2
    """Exploration epsilon at the end of the schedule."""
    exploration_fraction: PositiveFraction = 0.2
    """Fraction of total_timesteps over which epsilon decays linearly."""
    reward_scale: Positive = 0.1
    """Rewards are multiplied by this before the targets (purejaxql's REW_SCALE)."""
    network: Literal["mlp", "cnn"] = "mlp"
    """Torso under the hidden layers: none (flat observation), or a CNN (image observations)."""
    hidden_size: PositiveInt = 256
    """Width of the hidden layers."""
    num_layers: PositiveInt = 2
    """Hidden layers, each Linear -> LayerNorm -> ReLU."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


def variance_scaled(layer: eqx.Module, scale: float, key: PRNGKeyArray) -> eqx.Module:
    """`layer` (Linear or Conv2d) with truncated-normal weights of variance scale / fan_in and
    zero bias: flax's `he_normal` (scale 2) and `lecun_normal` (scale 1), as purejaxql's CNN."""
    init = jax.nn.initializers.variance_scaling(scale, "fan_in", "truncated_normal", 1, 0)
    weight, bias = init(key, layer.weight.shape), layer.bias * 0
    return eqx.tree_at(lambda lay: (lay.weight, lay.bias), layer, (weight, bias))


class ConvTorso(eqx.Module):
    """purejaxql's MinAtar convolution: 16 3x3 filters (stride 1, no padding), LayerNorm over
    each cell's channels, ReLU; flattened. He-normal weights, zero bias."""

    conv: Conv2d
    norm: eqx.nn.LayerNorm

    def __init__(self, channels: int, key: PRNGKeyArray):
        self.conv = variance_scaled(Conv2d(channels, 16, 3, key=key), 2.0, key)
        self.norm = eqx.nn.LayerNorm(16)

    def __call__(self, x: Float[Array, "height width channels"]) -> Float[Array, " features"]:
        x = jnp.moveaxis(self.conv(jnp.moveaxis(x, -1, 0)), 0, -1)  # Conv2d is channels-first
        return jax.nn.relu(jax.vmap(jax.vmap(self.norm))(x)).reshape(-1)


class QNetwork(eqx.Module):
    """MLP with LayerNorm before each ReLU (the PQN stabiliser); one Q-value per action; on the
    flat observation, or on a `ConvTorso`'s features.

    MLP: Equinox's default init (PyTorch's Kaiming-uniform). CNN: purejaxql's (he-normal hidden
    layers, lecun-normal output, zero biases).
    """

    torso: ConvTorso | None
    layers: tuple[eqx.nn.Linear, ...]
    norms: tuple[eqx.nn.LayerNorm, ...]

    def __init__(
        self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key: PRNGKeyArray
    ):
        self.torso, features = None, math.prod(obs_shape)
        if config.network == "cnn":
            height, width, channels = obs_shape
            self.torso = ConvTorso(channels, jax.random.fold_in(key, 1))
            features = 16 * (height - 2) * (width - 2)
        hidden, depth = config.hidden_size, config.num_layers
        sizes = (features,) + (hidden,) * depth + (num_actions,)
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = tuple(
            eqx.nn.Linear(i, o, key=k) for i, o, k in zip(sizes[:-1], sizes[1:], keys, strict=True)
        )
        if self.torso is not None:
            scales = (2.0,) * depth + (1.0,)
            self.layers = tuple(map(variance_scaled, self.layers, scales, keys))
        self.norms = tuple(eqx.nn.LayerNorm(hidden) for _ in range(depth))

    def __call__(self, x: Float[Array, "*obs_shape"]) -> Float[Array, " num_actions"]:
        x = x.reshape(-1) if self.torso is None else self.torso(x)
        for layer, norm in zip(self.layers[:-1], self.norms, strict=True):
            x = jax.nn.relu(norm(layer(x)))
        return self.layers[-1](x)


# --- state


class Transition(eqx.Module):
    """One rollout step of every environment; `next_max_q` is the largest Q-value over the
    valid actions of the pre-reset final observation (computed in the rollout, so that the
    rollout keeps one observation per step, not two)."""

    obs: Float[Array, "num_envs ..."]
    action: Int[Array, " num_envs"]
    reward: Float[Array, " num_envs"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_max_q: Float[Array, " num_envs"]


class TrainState(eqx.Module):
    """Everything that changes during training."""

    q_network: QNetwork
    opt_state: optax.OptState
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs ..."]
    env_steps: Int[Array, ""]
    key: PRNGKeyArray


# --- losses


def q_lambda_returns(
    rewards: Float[Array, "num_steps num_envs"],
    next_values: Float[Array, "num_steps num_envs"],
    terminated: Bool[Array, "num_steps num_envs"],
    truncated: Bool[Array, "num_steps num_envs"],
    gamma: float | Float[Array, ""],
    q_lambda: float | Float[Array, ""],
) -> Float[Array, "num_steps num_envs"]:
    """Peng's Q(lambda) returns G_t = r_t + gamma [(1 - lambda) V_t + lambda G_{t+1}].

    `next_values[t]` is max_a Q of the observation step t led to (the final observation when the
    episode ended there). Termination zeroes the bootstrap; truncation bootstraps from
    `next_values[t]` alone; the last rollout step bootstraps from its own `next_values`.
    """
    continues = 1.0 - jnp.logical_or(terminated, truncated)

    def backward(next_return: Array, step: tuple[Array, ...]) -> tuple[Array, Array]:
        reward, value, term, cont = step
        # At an episode end the next return belongs to another episode: use the value alone.
        mixed = value + q_lambda * cont * (next_return - value)
        ret = reward + gamma * (1.0 - term) * mixed
        return ret, ret

    steps = (rewards, next_values, terminated, continues)
    # 16 steps per loop trip off the CPU, as ppo.py's GAE: one fused kernel for 16 steps.
    _, returns = scan(backward, next_values[-1], steps, reverse=True, unroll=16)
    return returns


def td_loss(
    q_taken: Float[Array, " minibatch"], target: Float[Array, " minibatch"]
) -> Float[Array, ""]:
    """Half mean squared error between Q(s, a) and its lambda-return (purejaxql)."""
    return 0.5 * jnp.mean((q_taken - target) ** 2)


def linear_epsilon(config: Config, env_steps: Int[Array, ""]) -> Float[Array, ""]:
    """Exploration rate decaying linearly from start_e to end_e over a fraction of the run, as
    purejaxql's EPS_DECAY (DQN's schedule counts env steps instead)."""
    slope = (config.end_e - config.start_e) / (config.exploration_fraction * config.total_timesteps)
    return jnp.maximum(config.start_e + slope * env_steps, config.end_e)


# Copied from algorithms/dqn.py::epsilon_greedy
def epsilon_greedy(
    key: PRNGKeyArray,
    q_values: Float[Array, "num_envs num_actions"],
    epsilon: Float[Array, ""],
    mask: Bool[Array, "num_envs num_actions"] | None,
) -> Int[Array, " num_envs"]:
    """The greedy valid action, or with probability epsilon a uniformly random valid one, per
    env (every action is valid where `mask` is None)."""
    explore_key, action_key = jax.random.split(key)
    num_envs, num_actions = q_values.shape
    random = random_action(action_key, mask, num_envs, num_actions)
    explore = jax.random.uniform(explore_key, (num_envs,)) < epsilon
    return jnp.where(explore, random, masked_argmax(q_values, mask))


# Copied from algorithms/dqn.py::act
def act(state: TrainState, obs: Float[Array, "n ..."], mask: Array | None = None) -> Array:
    """Greedy actions: the valid action of the highest Q-value."""
    return masked_argmax(jax.vmap(state.q_network)(obs), mask)


# Copied from algorithms/ppo.py::learning_rate_schedule
def learning_rate_schedule(config: Config) -> optax.ScalarOrSchedule:
    """The learning rate, annealed linearly to zero once per iteration with `anneal_lr`."""
    if not config.anneal_lr:
        return config.learning_rate
    updates_per_iteration = config.update_epochs * config.num_minibatches
    return lambda count: (
        config.learning_rate * (1.0 - (count // updates_per_iteration) / config.num_iterations)
    )


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


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_divides(config, "num_envs * num_steps", config.batch_size, "num_minibatches")
    check_budget(config, config.batch_size)
    env, env_params = make_env(
        config.env,
        action=ACTION_SPACE,
        algorithm="pqn.py",
        image=config.network == "cnn",
        sticky_action_prob=config.sticky_action_prob,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)

    optimizer = optax.chain(
        clip_by_global_norm(config.max_grad_norm),
        optax.radam(learning_rate_schedule(config)),  # purejaxql
    )
    split = functools.partial(shuffled_minibatches, num_minibatches=config.num_minibatches)

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        q_network = QNetwork(obs_shape, num_actions, config, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        opt_state = optimizer.init(q_network)
        return TrainState(q_network, opt_state, env_state, obs, jnp.array(0), key)

    def rollout_step(carry: tuple, key: PRNGKeyArray) -> tuple[tuple, Transition]:
        q_network, env_state, obs, env_steps = carry
        action_key, env_key = jax.random.split(key)
        epsilon = linear_epsilon(config, env_steps)
        mask = valid(env_state, env_params)  # masked actions are never taken
        action = epsilon_greedy(action_key, jax.vmap(q_network)(obs), epsilon, mask)
        env_keys = jax.random.split(env_key, config.num_envs)
        next_obs, env_state, reward, terminated, truncated, info = env_step(
            env_keys, env_state, action, env_params
        )
        final_q = jax.vmap(q_network)(info["final_observation"])
        next_max_q = masked_max(final_q, info.get("final_action_mask"))  # over valid actions
        transition = Transition(obs, action, reward, terminated, truncated, next_max_q)
        return (q_network, env_state, next_obs, env_steps + config.num_envs), transition

    def loss_fn(q_network: QNetwork, batch: dict[str, Array]) -> tuple[Array, dict[str, Array]]:
        q_values = jax.vmap(q_network)(batch["obs"])
        q_taken = jnp.take_along_axis(q_values, batch["action"][:, None], axis=-1)[:, 0]
        loss = td_loss(q_taken, batch["target"])
        return loss, dict(td_loss=loss, q_values=q_taken.mean())

    # One optimiser step per minibatch, `update_epochs` passes per rollout.
    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, rollout_key, update_key = jax.random.split(state.key, 3)
        carry = (state.q_network, state.env_state, state.obs, state.env_steps)
        rollout_keys = jax.random.split(rollout_key, config.num_steps)
        (_, env_state, obs, env_steps), traj = jax.lax.scan(rollout_step, carry, rollout_keys)
        # Targets once per rollout, from the parameters that collected it (purejaxql).
        targets = q_lambda_returns(
            config.reward_scale * traj.reward,
            traj.next_max_q,
            traj.terminated,
            traj.truncated,
            config.gamma,
            config.q_lambda,
        )
        batch = dict(obs=traj.obs, action=traj.action, target=targets)
        batch = jax.tree.map(lambda x: x.reshape((config.batch_size,) + x.shape[2:]), batch)
        q_network, opt_state, stats = update(state.q_network, state.opt_state, batch, update_key)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,
            **jax.tree.map(jnp.mean, stats),
            "epsilon": linear_epsilon(config, env_steps),
            "env_steps": env_steps.astype(jnp.float32),
        }
        return TrainState(q_network, opt_state, env_state, obs, env_steps, key), metrics

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


# purejaxql's MinAtar PQN (config/alg/pqn_minatar.yaml, all games alike): 128 envs x 32 steps,
# 2 epochs x 32 minibatches, RAdam lr 5e-4 decayed linearly, epsilon 1 -> 0.05 over the first
# 10%, lambda 0.65, no reward scaling, the CNN torso and one hidden layer of 128, 1e7 env steps.
# Deviations: no /255 on MinAtar's 0/1 grids (an Atari leftover there); 32 greedy evaluation
# episodes (purejaxql: 128); no sticky actions, as gymnax's MinAtar has none (MinAtar's: 0.1).
MINATAR = dict(
    total_timesteps=10_000_000,
    eval_every=409_600,  # 100 iterations
    num_eval_envs=32,
    num_envs=128,
    num_steps=32,
    learning_rate=5e-4,
    update_epochs=2,
    num_minibatches=32,
    q_lambda=0.65,
    end_e=0.05,
    exploration_fraction=0.1,
    reward_scale=1.0,
    network="cnn",
    hidden_size=128,
    num_layers=1,
)
PRESETS = {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}

# purejaxql's Craftax PQN (config/alg/pqn_craftax.yaml, script pqn_craftax.py; read in
# docs/notes/craftax-reference.md): 1024 envs x 1 step, one epoch of one minibatch, RAdam lr 1e-4
# decayed linearly, grad norm 1, epsilon 0.1 -> 0.005 over the first 20%, one-step targets
# (lambda 0) from the network that collected the step (no target network), gamma 0.99, no reward
# scaling, 4 hidden layers of 1024 with LayerNorm and ReLU, a world generated per 16 envs each step
# for resets (canter's Craftax adapter does the same), 1e9 env steps. Deviations: no BatchRenorm
# on the input (purejaxql's only observation normalisation; canter has none); Equinox's default
# init of the MLP (purejaxql: flax's lecun-normal kernels, zero biases); greedy evaluations of 16
# episodes every 1e7 env steps (purejaxql: none during training). purejaxql decays lr and
# epsilon over 1e9 steps whatever the budget; canter over the run, so a shorter
# `--total-timesteps` compresses both schedules. The published 16.0% is PQN-RNN's, not this.
CRAFTAX = dict(
    total_timesteps=1_000_000_000,
    eval_every=10_240_000,  # 10,000 iterations
    num_eval_envs=16,
    num_envs=1024,
    num_steps=1,
    max_grad_norm=1.0,
    update_epochs=1,
    num_minibatches=1,
    q_lambda=0.0,
    start_e=0.1,
    end_e=0.005,
    reward_scale=1.0,
    hidden_size=1024,
    num_layers=4,
)
PRESETS |= {game: dict(CRAFTAX, env=f"craftax:{game}") for game in CRAFTAX_GAMES}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

"""QR-DQN: quantile-regression distributional DQN for discrete actions (Dabney et al. 2018,
arXiv:1710.10044).

Follows SB3-contrib's `qrdqn.py` (Stable-Baselines-Team/stable-baselines3-contrib at 0ca7fdd)
and the paper: a network that outputs, per action, `num_quantiles` return samples at the fixed
fractions (2i + 1) / 2N; the target network's quantiles of the next state's greedy action
(greedy by its mean), through `r + gamma * theta`; the quantile Huber loss (kappa 1) summed over
the quantiles and averaged over the targets (common/blocks/distributional.py); uniform replay, a
hard-copied target network, a linear epsilon schedule, Adam with eps 0.01 / batch_size. The
defaults are rl-baselines3-zoo's tuned CartPole-v1 configuration (hyperparams/qrdqn.yml at
22e3ff2; the zoo's benchmark: 500.0 +- 0.0 at 5e4 steps): 10 quantiles, 256-256 ReLU layers, lr
2.3e-3, 128 updates of 64 transitions after every 256 env steps, target copy every 10 steps.
Deviations: a truncated episode bootstraps from its final observation (SB3 stores it and its
`dones` are terminations: the same); epsilon's schedule is in env steps (the zoo's fraction of
the budget times its budget) so a longer run keeps it; updates start at the first whole
iteration past `learning_starts`; every seed draws from its own keys; action masks (every
discrete env canter runs) restrict exploration, the greedy choice and the bootstrap.

    python algorithms/qr_dqn.py --env CartPole-v1 --num-seeds 4
    python algorithms/qr_dqn.py --preset Acrobot-v1 --num-seeds 4
"""

import dataclasses
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.buffer import ReplayBuffer
from canter.common.blocks.distributional import quantile_huber_loss, quantile_midpoints
from canter.common.blocks.layers import Conv2d  # eqx.nn.Conv2d, a patch matmul on the CPU
from canter.common.blocks.masking import masked_argmax, random_action
from canter.common.config import (
    ConfigError,
    NonNegative,
    NonNegativeInt,
    PositiveFraction,
    PositiveInt,
    UnitInterval,
    check_budget,
    check_replay,
    pytree_config,
)
from canter.common.envs import MINATAR_GAMES, ended_episodes, make_env, vector_mask, vector_step
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
    total_timesteps: PositiveInt = 50_000
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 5_120
    """Env steps per seed between greedy evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per greedy evaluation."""
    num_envs: PositiveInt = 1
    """Parallel environments per seed."""
    buffer_size: PositiveInt = 100_000
    """Replay buffer capacity in transitions."""
    batch_size: PositiveInt = 64
    """Transitions sampled from the buffer per update."""
    learning_starts: NonNegativeInt = 1_000
    """Env steps of warm-up before the first update."""
    train_frequency: PositiveInt = 256
    """Env steps (all envs together) between training phases; divides num_envs or is a
    multiple of it."""
    gradient_steps: PositiveInt = 128
    """Updates per training phase (SB3's gradient_steps; its -1 is train_frequency)."""
    learning_rate: NonNegative = 2.3e-3
    """Adam learning rate (Adam's eps is 0.01 / batch_size, as the paper and SB3-contrib)."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    tau: PositiveFraction = 1.0
    """Target network update rate (1.0: hard copy); k updates due at once apply 1-(1-tau)^k."""
    target_network_frequency: PositiveInt = 10
    """Env steps between target network updates."""
    start_e: UnitInterval = 1.0
    """Exploration epsilon at the start."""
    end_e: UnitInterval = 0.04
    """Exploration epsilon at the end of the schedule."""
    exploration_delay: NonNegativeInt = 0
    """Env steps at start_e before epsilon starts to decay."""
    exploration_steps: PositiveInt = 8_000
    """Env steps over which epsilon then decays linearly to end_e."""
    num_quantiles: PositiveInt = 10
    """Return samples per action, at the fractions (2i + 1) / 2N (the paper's Atari 200)."""
    kappa: NonNegative = 1.0
    """Huber threshold of the quantile loss (0: the plain quantile loss)."""
    network: Literal["mlp", "cnn"] = "mlp"
    """Torso under the hidden layers: none (flat observation), or a CNN (image observations)."""
    hidden_sizes: tuple[int, ...] = (256, 256)
    """Widths of the ReLU hidden layers."""
    iteration_unroll: PositiveInt = 1
    """Iterations per loop trip on a GPU or TPU (the CPU runs one): fewer kernels, same math."""

    @property
    def vector_steps_per_iteration(self) -> int:
        return max(1, self.train_frequency // self.num_envs)

    @property
    def updates_per_iteration(self) -> int:
        return self.gradient_steps * max(1, self.num_envs // self.train_frequency)

    @property
    def env_steps_per_iteration(self) -> int:
        return self.num_envs * self.vector_steps_per_iteration

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.env_steps_per_iteration


# --- networks


class QuantileNetwork(eqx.Module):
    """ReLU MLP from observation to `num_quantiles` return samples per action; on the flat
    observation, or on the MinAtar paper's convolution (16 3x3 filters, stride 1, ReLU).

    Equinox's default init (PyTorch's Kaiming-uniform), as SB3's PyTorch layers.
    """

    conv: Conv2d | None
    layers: tuple[eqx.nn.Linear, ...]
    num_quantiles: int = eqx.field(static=True)

    def __init__(
        self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key: PRNGKeyArray
    ):
        self.conv, features = None, math.prod(obs_shape)
        if config.network == "cnn":
            height, width, channels = obs_shape
            self.conv = Conv2d(channels, 16, 3, key=jax.random.fold_in(key, 1))
            features = 16 * (height - 2) * (width - 2)
        self.num_quantiles = config.num_quantiles
        sizes = (features, *config.hidden_sizes, num_actions * config.num_quantiles)
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = tuple(
            eqx.nn.Linear(i, o, key=k) for i, o, k in zip(sizes[:-1], sizes[1:], keys, strict=False)
        )

    def __call__(self, x: Float[Array, "*obs_shape"]) -> Float[Array, "num_actions num_quantiles"]:
        if self.conv is None:
            x = x.reshape(-1)
        else:  # Equinox's Conv2d is channels-first
            x = jax.nn.relu(self.conv(jnp.moveaxis(x, -1, 0))).reshape(-1)
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x).reshape(-1, self.num_quantiles)

    def q_values(self, x: Float[Array, "*obs_shape"]) -> Float[Array, " num_actions"]:
        """The mean of each action's quantiles: its expected return."""
        return self(x).mean(axis=-1)


# --- state


# Copied from algorithms/dqn.py::Transition
class Transition(eqx.Module):
    """Replayed experience; `next_obs` is the final observation when the episode ended there,
    `next_mask` its valid actions (None for an env without action masks)."""

    obs: Float[Array, "..."]  # [*batch, *obs_shape]
    action: Int[Array, "*batch"]
    reward: Float[Array, "*batch"]
    terminated: Bool[Array, "*batch"]
    next_obs: Float[Array, "..."]
    next_mask: Bool[Array, "*batch num_actions"] | None


class TrainState(eqx.Module):
    """Everything that changes during training."""

    quantile_network: QuantileNetwork
    target_network: QuantileNetwork
    opt_state: optax.OptState
    buffer: ReplayBuffer
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs ..."]
    env_steps: Int[Array, ""]
    key: PRNGKeyArray


# --- losses


def quantile_target(
    reward: Float[Array, " batch"],
    terminated: Bool[Array, " batch"],
    next_quantiles: Float[Array, "batch num_actions num_quantiles"],
    next_mask: Bool[Array, "batch num_actions"] | None,
    gamma: float | Float[Array, ""],
) -> Float[Array, "batch num_quantiles"]:
    """The target samples: `reward + gamma * theta`, theta the next state's quantiles (from the
    target network) of its valid action of highest mean. Termination cuts the bootstrap (not
    truncation), as does a next state with no valid action."""
    best = masked_argmax(next_quantiles.mean(axis=-1), next_mask)
    chosen = jnp.take_along_axis(next_quantiles, best[:, None, None], axis=1)[:, 0]
    bootstrap = 1.0 - terminated
    if next_mask is not None:
        bootstrap = bootstrap * jnp.any(next_mask, axis=-1)
    return reward[:, None] + (gamma * bootstrap)[:, None] * chosen


# Copied from algorithms/dqn.py::polyak_update
def polyak_update(online: PyTree, target: PyTree, tau: float | Float[Array, ""]) -> PyTree:
    """Polyak averaging `tau * online + (1 - tau) * target`; tau 0 keeps, tau 1 copies."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


# Copied from algorithms/dqn.py::linear_epsilon
def linear_epsilon(config: Config, env_steps: Int[Array, ""]) -> Float[Array, ""]:
    """Exploration rate: start_e for exploration_delay env steps, then linear to end_e over
    exploration_steps, then end_e. In env steps, not a fraction of the budget, so a run can be
    continued to a larger budget unchanged."""
    progress = (env_steps - config.exploration_delay) / config.exploration_steps
    return config.start_e + jnp.clip(progress, 0.0, 1.0) * (config.end_e - config.start_e)


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


def act(state: TrainState, obs: Float[Array, "n ..."], mask: Array | None = None) -> Array:
    """Greedy actions: the valid action of the highest mean return."""
    return masked_argmax(jax.vmap(state.quantile_network.q_values)(obs), mask)


# --- training


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    if not all(size > 0 for size in config.hidden_sizes):
        raise ConfigError(f"hidden_sizes must be positive, got {config.hidden_sizes}.")
    check_replay(config)
    check_budget(config, config.env_steps_per_iteration)
    env, env_params = make_env(
        config.env,
        action=ACTION_SPACE,
        algorithm="qr_dqn.py",
        image=config.network == "cnn",
        sticky_action_prob=config.sticky_action_prob,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = optax.adam(config.learning_rate, eps=0.01 / config.batch_size)
    taus = quantile_midpoints(config.num_quantiles)

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        network = QuantileNetwork(obs_shape, num_actions, config, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zeros = jnp.zeros(obs_shape)
        mask = jax.tree.map(lambda m: m[0], valid(env_state, env_params))  # None: no masks
        example = Transition(zeros, jnp.array(0), jnp.array(0.0), jnp.array(False), zeros, mask)
        buffer = ReplayBuffer.create(example, config.buffer_size)
        opt_state = optimizer.init(network)
        return TrainState(network, network, opt_state, buffer, env_state, obs, jnp.array(0), key)

    def collect_step(carry: tuple, key: PRNGKeyArray) -> tuple[tuple, None]:
        quantile_network, env_state, obs, buffer, env_steps = carry
        action_key, env_key = jax.random.split(key)
        mask = valid(env_state, env_params)  # masked actions are never taken
        q_values = jax.vmap(quantile_network.q_values)(obs)
        action = epsilon_greedy(action_key, q_values, linear_epsilon(config, env_steps), mask)
        env_keys = jax.random.split(env_key, config.num_envs)
        next_obs, env_state, reward, terminated, _, info = env_step(
            env_keys, env_state, action, env_params
        )
        # Stored next_obs is the pre-reset observation: truncated episodes bootstrap from it.
        final_obs, final_mask = info["final_observation"], info.get("final_action_mask")
        buffer = buffer.add(Transition(obs, action, reward, terminated, final_obs, final_mask))
        return (quantile_network, env_state, next_obs, buffer, env_steps + config.num_envs), None

    def loss_fn(network: QuantileNetwork, batch: Transition, target: Array) -> tuple[Array, Array]:
        quantiles = jax.vmap(network)(batch.obs)
        taken = jnp.take_along_axis(quantiles, batch.action[:, None, None], axis=1)[:, 0]
        return quantile_huber_loss(taken, target, taus[None], config.kappa), taken.mean()

    def update(
        carry: tuple, target_network: QuantileNetwork, buffer: ReplayBuffer, key: PRNGKeyArray
    ) -> tuple[tuple, dict[str, Array]]:
        network, opt_state = carry
        batch = buffer.sample(key, config.batch_size)
        next_quantiles = jax.vmap(target_network)(batch.next_obs)
        target = quantile_target(
            batch.reward, batch.terminated, next_quantiles, batch.next_mask, config.gamma
        )
        (loss, q_mean), grads = jax.value_and_grad(loss_fn, has_aux=True)(network, batch, target)
        updates, opt_state = optimizer.update(grads, opt_state, network)
        network = optax.apply_updates(network, updates)
        return (network, opt_state), dict(loss=loss, q_values=q_mean)

    def learn(
        carry: tuple, target_network: QuantileNetwork, buffer: ReplayBuffer, keys: Array
    ) -> tuple[tuple, dict[str, Array]]:
        """`len(keys)` updates in turn, their statistics averaged."""
        carry, stats = jax.lax.scan(lambda c, k: update(c, target_network, buffer, k), carry, keys)
        return carry, jax.tree.map(jnp.mean, stats)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, collect_key, update_key = jax.random.split(state.key, 3)
        carry = (state.quantile_network, state.env_state, state.obs, state.buffer, state.env_steps)
        collect_keys = jax.random.split(collect_key, config.vector_steps_per_iteration)
        (_, env_state, obs, buffer, env_steps), _ = jax.lax.scan(collect_step, carry, collect_keys)
        # No updates during warm-up (NaN metrics). The test reads `iteration`, the same for
        # every seed, so vmapped seeds run one branch (a test on `env_steps` would run both).
        warm = (iteration + 1) * config.env_steps_per_iteration >= config.learning_starts
        update_keys = jax.random.split(update_key, config.updates_per_iteration)
        (network, opt_state), stats = trainer.when(
            warm,
            learn,
            (state.quantile_network, state.opt_state),
            state.target_network,
            buffer,
            update_keys,
        )
        # Target updates fall due when the env-step counter crosses multiples of the frequency;
        # k of them at once (num_envs > frequency) blend as k Polyak steps: 1 - (1 - tau)^k.
        freq = config.target_network_frequency
        due = env_steps // freq - state.env_steps // freq
        tau = 1.0 - (1.0 - config.tau) ** due
        target_network = polyak_update(network, state.target_network, tau)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,
            **stats,
            "epsilon": linear_epsilon(config, env_steps),
            "env_steps": env_steps.astype(jnp.float32),
        }
        state = TrainState(
            network, target_network, opt_state, buffer, env_state, obs, env_steps, key
        )
        return state, metrics

    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=act,
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.env_steps_per_iteration,
        unroll=config.iteration_unroll,
    )


# --- presets


# rl-baselines3-zoo's tuned Acrobot-v1 configuration (hyperparams/qrdqn.yml at 22e3ff2; its
# benchmark: -69.1 +- 10.0 at 1e5 steps): 25 quantiles, 256-256, lr 6.3e-4, 4 updates of 128
# after every 4 env steps (gradient_steps -1), target copy every 250 steps, epsilon 1 -> 0.1 over
# 12,000 steps, replay 50,000, learning from the start. The defaults are its CartPole-v1 one.
ACROBOT = dict(
    env="Acrobot-v1",
    total_timesteps=100_000,
    eval_every=10_000,
    buffer_size=50_000,
    batch_size=128,
    learning_starts=0,
    train_frequency=4,
    gradient_steps=4,
    learning_rate=6.3e-4,
    target_network_frequency=250,
    end_e=0.1,
    exploration_steps=12_000,
    num_quantiles=25,
)
# No QR-DQN configuration is published for MinAtar; by the rule of docs/results.md (presets),
# the nearest published set-up at this scale is the MinAtar paper's DQN (Young & Tian 2019,
# dqn.py's preset): one env, sticky actions 0.1, 5,000 random steps, epsilon 1 -> 0.1 over
# 100,000 steps, an update of 32 transitions every env step from a 100,000 replay, target copied
# every 1,000 steps, gamma 0.99, conv + 128 ReLU units, 5e6 steps. QR-DQN's own parts follow its
# Atari configuration (the paper, SB3-contrib's defaults): 200 quantiles, kappa 1, Adam with
# eps 0.01 / 32; the learning rate is the MinAtar DQN's 2.5e-4 (the paper's Atari 5e-5 belongs
# to a 5e7-step budget).
MINATAR = dict(
    sticky_action_prob=0.1,
    total_timesteps=5_000_000,
    eval_every=250_000,
    num_eval_envs=32,
    num_envs=1,
    buffer_size=100_000,
    batch_size=32,
    learning_starts=5_000,
    train_frequency=1,
    gradient_steps=1,
    learning_rate=2.5e-4,
    target_network_frequency=1_000,
    end_e=0.1,
    exploration_delay=5_000,
    exploration_steps=100_000,
    num_quantiles=200,
    network="cnn",
    hidden_sizes=(128,),
    iteration_unroll=4,  # as dqn.py's: fewer kernels on a GPU, the same numbers
)
PRESETS = {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}
PRESETS["Acrobot-v1"] = ACROBOT

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

"""DQN for discrete actions (Mnih et al. 2015, doi:10.1038/nature14236).

Follows CleanRL's `dqn.py` and PureJaxRL's `dqn.py` (uniform replay, target network, linear
epsilon schedule, Adam, MSE TD loss); the defaults are PureJaxRL's CartPole config. Optional
Huber loss, double Q-learning (van Hasselt et al. 2016) and a dueling head (Wang et al. 2016).
Deviates from both on time limits (a truncated episode bootstraps from its final observation)
and on schedules: updates and target updates are counted, never found by `step % freq == 0` on
a counter that advances by `num_envs`, and every seed draws from its own keys.
MinAtar (`--preset Breakout-MinAtar`, one per game) follows the MinAtar paper's DQN (Young & Tian
2019, `examples/dqn.py`): its CNN, replay and centred RMSProp, with sticky actions.

    python algorithms/dqn.py --env CartPole-v1 --num-seeds 4
    python algorithms/dqn.py --preset Breakout-MinAtar --num-seeds 4
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
from canter.common.blocks.layers import Conv2d  # eqx.nn.Conv2d, a patch matmul on the CPU
from canter.common.blocks.masking import masked_argmax, masked_max, random_action
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
    total_timesteps: PositiveInt = 500_000
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 25_000
    """Env steps per seed between greedy evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per greedy evaluation."""
    num_envs: PositiveInt = 10
    """Parallel environments per seed."""
    buffer_size: PositiveInt = 10_000
    """Replay buffer capacity in transitions."""
    batch_size: PositiveInt = 128
    """Transitions sampled from the buffer per update."""
    learning_starts: NonNegativeInt = 10_000
    """Env steps of warm-up before the first update."""
    train_frequency: PositiveInt = 10
    """Env steps (all envs together) per update; divides num_envs or is a multiple of it."""
    optimizer: Literal["adam", "rmsprop"] = "adam"
    """Adam, or the MinAtar paper's centred RMSProp (decay 0.95, eps 0.01, no momentum)."""
    learning_rate: NonNegative = 2.5e-4
    """Learning rate."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    tau: PositiveFraction = 1.0
    """Target network update rate (1.0: hard copy); k updates due at once apply 1-(1-tau)^k."""
    target_network_frequency: PositiveInt = 500
    """Env steps between target network updates."""
    start_e: UnitInterval = 1.0
    """Exploration epsilon at the start."""
    end_e: UnitInterval = 0.05
    """Exploration epsilon at the end of the schedule."""
    exploration_delay: NonNegativeInt = 0
    """Env steps at start_e before epsilon starts to decay."""
    exploration_steps: PositiveInt = 250_000
    """Env steps over which epsilon then decays linearly to end_e."""
    loss: Literal["mse", "huber"] = "mse"
    """TD loss: squared error, or Huber with delta 1."""
    double_q: bool = False
    """Double Q-learning: the online network picks the next action, the target one rates it."""
    dueling: bool = False
    """Dueling head: Q = V + A - mean(A)."""
    network: Literal["mlp", "cnn"] = "mlp"
    """Torso under the hidden layers: none (flat observation), or a CNN (image observations)."""
    hidden_sizes: tuple[int, ...] = (120, 84)
    """Widths of the ReLU hidden layers."""
    iteration_unroll: PositiveInt = 1
    """Iterations per loop trip on a GPU or TPU (the CPU runs one): fewer kernels, same math."""

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


class QNetwork(eqx.Module):
    """ReLU MLP from observation to one Q-value per action, optionally with a dueling head; on
    the flat observation, or on the MinAtar paper's convolution (16 3x3 filters, stride 1, ReLU).

    Equinox's default init (PyTorch's Kaiming-uniform), as in CleanRL's and MinAtar's DQN.
    """

    conv: Conv2d | None
    layers: tuple[eqx.nn.Linear, ...]
    value_head: eqx.nn.Linear | None

    def __init__(
        self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key: PRNGKeyArray
    ):
        self.conv, features = None, math.prod(obs_shape)
        if config.network == "cnn":
            height, width, channels = obs_shape
            self.conv = Conv2d(channels, 16, 3, key=jax.random.fold_in(key, 1))
            features = 16 * (height - 2) * (width - 2)
        sizes = (features, *config.hidden_sizes, num_actions)
        keys = jax.random.split(key, len(sizes))
        self.layers = tuple(
            eqx.nn.Linear(i, o, key=k) for i, o, k in zip(sizes[:-1], sizes[1:], keys, strict=False)
        )
        self.value_head = eqx.nn.Linear(sizes[-2], 1, key=keys[-1]) if config.dueling else None

    def __call__(self, x: Float[Array, "*obs_shape"]) -> Float[Array, " num_actions"]:
        if self.conv is None:
            x = x.reshape(-1)
        else:  # Equinox's Conv2d is channels-first
            x = jax.nn.relu(self.conv(jnp.moveaxis(x, -1, 0))).reshape(-1)
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        advantages = self.layers[-1](x)
        if self.value_head is None:
            return advantages
        return self.value_head(x) + advantages - advantages.mean()


# --- state


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

    q_network: QNetwork
    target_network: QNetwork
    opt_state: optax.OptState
    buffer: ReplayBuffer
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs ..."]
    env_steps: Int[Array, ""]
    key: PRNGKeyArray


# --- losses


def td_target(
    reward: Float[Array, " batch"],
    terminated: Bool[Array, " batch"],
    next_q_target: Float[Array, "batch num_actions"],
    next_q_online: Float[Array, "batch num_actions"],
    next_mask: Bool[Array, "batch num_actions"] | None,
    gamma: float | Float[Array, ""],
    double_q: bool,
) -> Float[Array, " batch"]:
    """One-step Q-learning target over the next state's valid actions (`next_mask`; all where
    None); only termination cuts the bootstrap (not truncation)."""
    if double_q:
        best = masked_argmax(next_q_online, next_mask)
        next_value = jnp.take_along_axis(next_q_target, best[:, None], axis=-1)[:, 0]
        if next_mask is not None:  # no valid action: nothing to bootstrap from (as masked_max)
            next_value = jnp.where(jnp.any(next_mask, axis=-1), next_value, 0.0)
    else:
        next_value = masked_max(next_q_target, next_mask)
    return reward + gamma * (1.0 - terminated) * next_value


def td_loss(
    q_taken: Float[Array, " batch"], target: Float[Array, " batch"], loss: str
) -> Float[Array, ""]:
    """Mean squared TD error (PureJaxRL, CleanRL), or mean Huber loss with delta 1."""
    if loss == "huber":
        return jnp.mean(optax.huber_loss(q_taken, target, delta=1.0))
    return jnp.mean((q_taken - target) ** 2)


def polyak_update(online: PyTree, target: PyTree, tau: float | Float[Array, ""]) -> PyTree:
    """Polyak averaging `tau * online + (1 - tau) * target`; tau 0 keeps, tau 1 copies."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


def linear_epsilon(config: Config, env_steps: Int[Array, ""]) -> Float[Array, ""]:
    """Exploration rate: start_e for exploration_delay env steps, then linear to end_e over
    exploration_steps, then end_e. In env steps, not a fraction of the budget, so a run can be
    continued to a larger budget unchanged."""
    progress = (env_steps - config.exploration_delay) / config.exploration_steps
    return config.start_e + jnp.clip(progress, 0.0, 1.0) * (config.end_e - config.start_e)


def make_optimizer(config: Config) -> optax.GradientTransformation:
    """Adam, or PyTorch's centred RMSprop as the MinAtar reference builds it: eps outside the
    square root, no momentum (a momentum of 0.95 would make the steady step ~20x larger)."""
    if config.optimizer == "rmsprop":
        return optax.rmsprop(
            config.learning_rate, decay=0.95, eps=0.01, eps_in_sqrt=False, centered=True
        )
    return optax.adam(config.learning_rate)


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
    """Greedy actions: the valid action of the highest Q-value."""
    return masked_argmax(jax.vmap(state.q_network)(obs), mask)


# --- training


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    if not all(size > 0 for size in config.hidden_sizes):
        raise ConfigError(f"hidden_sizes must be positive, got {config.hidden_sizes}.")
    check_replay(config)
    if config.loss not in ("mse", "huber"):
        raise ConfigError(f"loss must be 'mse' or 'huber', got '{config.loss}'.")
    check_budget(config, config.env_steps_per_iteration)
    env, env_params = make_env(
        config.env,
        action=ACTION_SPACE,
        algorithm="dqn.py",
        image=config.network == "cnn",
        sticky_action_prob=config.sticky_action_prob,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = make_optimizer(config)

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        q_network = QNetwork(obs_shape, num_actions, config, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zeros = jnp.zeros(obs_shape)
        mask = jax.tree.map(lambda m: m[0], valid(env_state, env_params))  # None: no masks
        example = Transition(zeros, jnp.array(0), jnp.array(0.0), jnp.array(False), zeros, mask)
        buffer = ReplayBuffer.create(example, config.buffer_size)
        opt_state = optimizer.init(q_network)
        return TrainState(
            q_network, q_network, opt_state, buffer, env_state, obs, jnp.array(0), key
        )

    def collect_step(carry: tuple, key: PRNGKeyArray) -> tuple[tuple, None]:
        q_network, env_state, obs, buffer, env_steps = carry
        action_key, env_key = jax.random.split(key)
        epsilon = linear_epsilon(config, env_steps)
        mask = valid(env_state, env_params)  # masked actions are never taken
        action = epsilon_greedy(action_key, jax.vmap(q_network)(obs), epsilon, mask)
        env_keys = jax.random.split(env_key, config.num_envs)
        next_obs, env_state, reward, terminated, _, info = env_step(
            env_keys, env_state, action, env_params
        )
        # Stored next_obs is the pre-reset observation: truncated episodes bootstrap from it.
        final_obs, final_mask = info["final_observation"], info.get("final_action_mask")
        buffer = buffer.add(Transition(obs, action, reward, terminated, final_obs, final_mask))
        return (q_network, env_state, next_obs, buffer, env_steps + config.num_envs), None

    def loss_fn(q_network: QNetwork, batch: Transition, target: Array) -> tuple[Array, Array]:
        q_values = jax.vmap(q_network)(batch.obs)
        q_taken = jnp.take_along_axis(q_values, batch.action[:, None], axis=-1)[:, 0]
        return td_loss(q_taken, target, config.loss), q_taken.mean()

    def update(
        carry: tuple, target_network: QNetwork, buffer: ReplayBuffer, key: PRNGKeyArray
    ) -> tuple[tuple, dict[str, Array]]:
        q_network, opt_state = carry
        batch = buffer.sample(key, config.batch_size)
        next_q_target = jax.vmap(target_network)(batch.next_obs)
        next_q_online = jax.vmap(q_network)(batch.next_obs) if config.double_q else next_q_target
        target = td_target(
            batch.reward,
            batch.terminated,
            next_q_target,
            next_q_online,
            batch.next_mask,
            config.gamma,
            config.double_q,
        )
        (loss, q_mean), grads = jax.value_and_grad(loss_fn, has_aux=True)(q_network, batch, target)
        updates, opt_state = optimizer.update(grads, opt_state, q_network)
        q_network = optax.apply_updates(q_network, updates)
        return (q_network, opt_state), dict(td_loss=loss, q_values=q_mean)

    def learn(
        carry: tuple, target_network: QNetwork, buffer: ReplayBuffer, key: PRNGKeyArray
    ) -> tuple[tuple, dict[str, Array]]:
        keys = jax.random.split(key, config.updates_per_iteration)
        carry, stats = jax.lax.scan(lambda c, k: update(c, target_network, buffer, k), carry, keys)
        return carry, jax.tree.map(jnp.mean, stats)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, collect_key, update_key = jax.random.split(state.key, 3)
        carry = (state.q_network, state.env_state, state.obs, state.buffer, state.env_steps)
        collect_keys = jax.random.split(collect_key, config.vector_steps_per_iteration)
        (_, env_state, obs, buffer, env_steps), _ = jax.lax.scan(collect_step, carry, collect_keys)
        # No updates during warm-up (NaN metrics). The test reads `iteration`, the same for
        # every seed, so vmapped seeds run one branch (a test on `env_steps` would run both).
        warm = (iteration + 1) * config.env_steps_per_iteration >= config.learning_starts
        (q_network, opt_state), stats = trainer.when(
            warm,
            learn,
            (state.q_network, state.opt_state),
            state.target_network,
            buffer,
            update_key,
        )
        # Target updates fall due when the env-step counter crosses multiples of the frequency;
        # k of them at once (num_envs > frequency) blend as k Polyak steps: 1 - (1 - tau)^k.
        freq = config.target_network_frequency
        due = env_steps // freq - state.env_steps // freq
        tau = 1.0 - (1.0 - config.tau) ** due
        target_network = polyak_update(q_network, state.target_network, tau)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,
            **stats,
            "epsilon": linear_epsilon(config, env_steps),
            "env_steps": env_steps.astype(jnp.float32),
        }
        state = TrainState(
            q_network, target_network, opt_state, buffer, env_state, obs, env_steps, key
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


# The MinAtar paper's DQN (Young & Tian 2019; kenjyoung/MinAtar examples/dqn.py, all games
# alike): one env; 5,000 uniformly random steps, then epsilon 1 -> 0.1 over 100,000 steps; an
# update of 32 transitions per env step from a 100,000 replay; target copied every 1,000 updates;
# Huber loss; centred RMSprop (lr 2.5e-4, alpha 0.95, eps 0.01, no momentum: the reference's
# GRAD_MOMENTUM is unused); gamma 0.99; conv + 128 ReLU units; sticky actions 0.1.
# Deviations: updates start after 5,000 stored transitions (the reference's first follows the
# 5,002nd: it tests t > 5000 after storing transition t) and the target is copied every 1,000 env
# steps (the reference counts updates, one per step after warm-up: the same cadence, shifted by
# a few steps); returns are greedy evaluations (the paper plots training episodes, a running
# average; with one env canter's train return is the last episode ended in an interval).
# Budget: 5e6 env steps, where the paper's curves end (examples/dqn.py's NUM_FRAMES); every
# schedule here is in absolute steps, so a shorter run (the CPU rows' 4e5) compresses nothing.
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
    optimizer="rmsprop",
    target_network_frequency=1_000,
    end_e=0.1,
    exploration_delay=5_000,
    exploration_steps=100_000,
    loss="huber",
    network="cnn",
    hidden_sizes=(128,),
    iteration_unroll=4,  # canter's: on a GPU 75 kernels per env step against 126 (not the CPU's)
)
PRESETS = {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

"""IQN: implicit quantile networks for discrete actions (Dabney et al. 2018, arXiv:1806.06923).

DQN with a return distribution: the network maps an observation and a fraction tau in [0, 1]
to the tau-quantile of each action's return. Fractions are embedded as ReLU(Linear(cos(pi i
tau))), i = 0 .. num_cosines - 1, and multiplied elementwise into the torso's features before
the last hidden layers. The loss is the quantile Huber loss (kappa 1) between N quantiles of
the taken action, at fractions drawn per transition, and N' target samples; actions rank by the
mean of K quantiles.
Follows rejax's `iqn.py` and `ImplicitQuantileNetwork` (keraJLi/rejax at d751095: fractions
drawn per transition and per sample, the embedding width that of the torso's last layer, one
hidden layer after the product, swish in its presets), and the paper and its authors' Dopamine
agent where rejax is loose: the target quantiles come from the target network (rejax computes
both the greedy next action and its quantiles with the online parameters, so its target network
never enters the loss), at N' fresh fractions, for the target network's greedy action by the
mean of K fresh fractions. Evaluation is greedy on the K midpoints (2k + 1) / 2K, so
deterministic (rejax evaluates epsilon-greedy, epsilon 0.005, on K random fractions). A
truncated episode bootstraps from its final observation (rejax's gymnax `done` also ends the
bootstrap at a time limit). The defaults are dqn.py's (PureJaxRL's CartPole schedule: 10 envs,
an update of 128 every 10 env steps) with 64 cosines, kappa 1, Adam's eps 0.01 / batch (the
authors' Dopamine config, google/dopamine at 5873f54) and N = N' = K = 8, where the paper has
64, 64 and 32: a CPU's choice (every update pushes batch x (N + N' + K) rows through the head:
8x cheaper), measured on CartPole (docs/results.md); the MinAtar presets keep the paper's.
Counted updates and target updates, action masks and initialisation as dqn.py.
MinAtar (`--preset Breakout-MinAtar`): the MinAtar paper's DQN set-up with IQN's head.

    python algorithms/iqn.py --env CartPole-v1 --num-seeds 4
    python algorithms/iqn.py --preset CartPole-v1 --num-seeds 4
"""

import dataclasses
import functools
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.buffer import ReplayBuffer
from canter.common.blocks.distributional import (
    cosine_features,
    quantile_huber_loss,
    quantile_midpoints,
)
from canter.common.blocks.layers import Conv2d  # eqx.nn.Conv2d, a patch matmul on the CPU
from canter.common.blocks.masking import masked_argmax, random_action
from canter.common.config import (
    ConfigError,
    NonNegative,
    NonNegativeInt,
    Positive,
    PositiveFraction,
    PositiveInt,
    PositiveOrInf,
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
    adam_eps: Positive = 0.01 / 128
    """Adam's eps: 0.01 / batch size, as the IQN authors' Dopamine config (0.01 / 32)."""
    grad_clip: PositiveOrInf = math.inf
    """Clip each gradient entry to [-grad_clip, grad_clip] before the optimiser (rejax's
    `optax.clip`, which its configs call max_grad_norm); inf: no clipping."""
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
    num_tau_samples: PositiveInt = 8
    """N: fractions drawn per transition for the quantiles the loss fits (the paper's 64)."""
    num_tau_prime_samples: PositiveInt = 8
    """N': fractions drawn per transition for the target network's target samples (64)."""
    num_quantile_samples: PositiveInt = 8
    """K: fractions whose mean quantile ranks the actions (acting, the target's greedy action;
    evaluation takes the K midpoints)."""
    num_cosines: PositiveInt = 64
    """Cosine features cos(pi i tau), i = 0 .. num_cosines - 1, of each fraction's embedding."""
    kappa: NonNegative = 1.0
    """Threshold of the quantile Huber loss (0: the plain quantile loss)."""
    network: Literal["mlp", "cnn"] = "mlp"
    """Torso: the flat observation, or the MinAtar paper's CNN (image observations)."""
    torso_sizes: tuple[int, ...] = (120,)
    """Widths of the hidden layers before the product with the fraction embedding; the last
    (or the observation's or the CNN's features, if none) is the embedding's width."""
    hidden_sizes: tuple[int, ...] = (84,)
    """Widths of the hidden layers after the product, before the quantiles."""
    activation: Literal["relu", "swish"] = "relu"
    """Activation of the torso and hidden layers (the embedding is ReLU, the CNN ReLU)."""
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


def linears(sizes: tuple[int, ...], key: PRNGKeyArray) -> tuple[eqx.nn.Linear, ...]:
    """Linear layers from `sizes[0]` features through each later size in turn."""
    keys = jax.random.split(key, len(sizes))
    pairs = zip(sizes[:-1], sizes[1:], keys[1:], strict=True)
    return tuple(eqx.nn.Linear(i, o, key=k) for i, o, k in pairs)


class QNetwork(eqx.Module):
    """Implicit quantile network: psi(x), the torso's features, times the fraction embedding
    phi(tau) = ReLU(Linear(cos(pi i tau))), through the hidden layers to one quantile per action.

    Equinox's default init (PyTorch's Kaiming-uniform), as dqn.py; rejax's Flax layers are
    LeCun-normal with zero biases.
    """

    conv: Conv2d | None
    torso: tuple[eqx.nn.Linear, ...]
    embedding: eqx.nn.Linear
    head: tuple[eqx.nn.Linear, ...]
    activation: str = eqx.field(static=True)

    def __init__(
        self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key: PRNGKeyArray
    ):
        conv_key, torso_key, embed_key, head_key = jax.random.split(key, 4)
        self.conv, features = None, math.prod(obs_shape)
        if config.network == "cnn":
            height, width, channels = obs_shape
            self.conv = Conv2d(channels, 16, 3, key=conv_key)
            features = 16 * (height - 2) * (width - 2)
        torso = (features, *config.torso_sizes)
        head = (torso[-1], *config.hidden_sizes, num_actions)
        self.torso, self.head = linears(torso, torso_key), linears(head, head_key)
        self.embedding = eqx.nn.Linear(config.num_cosines, torso[-1], key=embed_key)
        self.activation = config.activation

    def __call__(
        self, x: Float[Array, "*obs_shape"], taus: Float[Array, " num_taus"]
    ) -> Float[Array, "num_taus num_actions"]:
        activation = getattr(jax.nn, self.activation)
        if self.conv is None:
            x = x.reshape(-1)
        else:  # Equinox's Conv2d is channels-first
            x = jax.nn.relu(self.conv(jnp.moveaxis(x, -1, 0))).reshape(-1)
        for layer in self.torso:
            x = activation(layer(x))
        cosines = cosine_features(taus, self.embedding.in_features)
        x = x * jax.nn.relu(jax.vmap(self.embedding)(cosines))  # [num_taus, features]
        for layer in self.head[:-1]:
            x = activation(jax.vmap(layer)(x))
        return jax.vmap(self.head[-1])(x)


def mean_quantiles(
    network: QNetwork, obs: Float[Array, "n ..."], taus: Float[Array, "n num_taus"]
) -> Float[Array, "n num_actions"]:
    """Q-values: each action's quantiles at an observation's fractions, averaged."""
    return jax.vmap(network)(obs, taus).mean(axis=1)


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


# Copied from algorithms/dqn.py::TrainState
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


def quantile_target(
    reward: Float[Array, " batch"],
    terminated: Bool[Array, " batch"],
    next_quantiles: Float[Array, "batch num_tau_prime_samples num_actions"],
    next_q: Float[Array, "batch num_actions"],
    next_mask: Bool[Array, "batch num_actions"] | None,
    gamma: float | Float[Array, ""],
) -> Float[Array, "batch num_tau_prime_samples"]:
    """Target samples r + gamma Z(s', a*, tau'_j): a* the next state's valid action of highest
    `next_q`, its quantiles `next_quantiles` (both from the target network). Termination cuts
    the bootstrap (not truncation), as does a next state with no valid action."""
    best = masked_argmax(next_q, next_mask)
    chosen = jnp.take_along_axis(next_quantiles, best[:, None, None], axis=2)[:, :, 0]
    bootstrap = 1.0 - terminated
    if next_mask is not None:
        bootstrap = bootstrap * jnp.any(next_mask, axis=-1)
    return reward[:, None] + gamma * bootstrap[:, None] * chosen


# Copied from algorithms/dqn.py::polyak_update
def polyak_update(online: PyTree, target: PyTree, tau: float | Float[Array, ""]) -> PyTree:
    """Polyak averaging `tau * online + (1 - tau) * target`; tau 0 keeps, tau 1 copies."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


def target_update(
    online: QNetwork, state: TrainState, env_steps: Int[Array, ""], config: Config
) -> QNetwork:
    """`state`'s target network once the env-step counter moved on to `env_steps`: updates
    fall due at each multiple of target_network_frequency crossed; k at once (num_envs above
    the frequency) blend as k Polyak steps, 1 - (1 - tau)^k."""
    freq = config.target_network_frequency
    due = env_steps // freq - state.env_steps // freq
    return polyak_update(online, state.target_network, 1.0 - (1.0 - config.tau) ** due)


# Copied from algorithms/dqn.py::linear_epsilon
def linear_epsilon(config: Config, env_steps: Int[Array, ""]) -> Float[Array, ""]:
    """Exploration rate: start_e for exploration_delay env steps, then linear to end_e over
    exploration_steps, then end_e. In env steps, not a fraction of the budget, so a run can be
    continued to a larger budget unchanged."""
    progress = (env_steps - config.exploration_delay) / config.exploration_steps
    return config.start_e + jnp.clip(progress, 0.0, 1.0) * (config.end_e - config.start_e)


def make_optimizer(config: Config) -> optax.GradientTransformation:
    """Adam with eps `adam_eps`, or PyTorch's centred RMSprop as the MinAtar reference builds it
    (dqn.py's: eps outside the square root, no momentum)."""
    if config.optimizer == "rmsprop":
        return optax.rmsprop(
            config.learning_rate, decay=0.95, eps=0.01, eps_in_sqrt=False, centered=True
        )
    return optax.adam(config.learning_rate, eps=config.adam_eps)


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


def act(
    state: TrainState,
    obs: Float[Array, "n ..."],
    mask: Array | None = None,
    num_quantile_samples: int = 32,
) -> Array:
    """Greedy actions: the valid action of the highest mean quantile at the K midpoints
    (2k + 1) / 2K, a fixed quadrature of the mean, so evaluation draws nothing."""
    taus = jnp.tile(quantile_midpoints(num_quantile_samples), (obs.shape[0], 1))
    return masked_argmax(mean_quantiles(state.q_network, obs, taus), mask)


# --- training


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    sizes = (*config.torso_sizes, *config.hidden_sizes)
    if not all(size > 0 for size in sizes):
        raise ConfigError(f"torso_sizes and hidden_sizes must be positive, got {sizes}.")
    check_replay(config)
    check_budget(config, config.env_steps_per_iteration)
    env, env_params = make_env(
        config.env,
        action=ACTION_SPACE,
        algorithm="iqn.py",
        image=config.network == "cnn",
        sticky_action_prob=config.sticky_action_prob,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = optax.chain(optax.clip(config.grad_clip), make_optimizer(config))

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        network = QNetwork(obs_shape, num_actions, config, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zeros = jnp.zeros(obs_shape)
        mask = jax.tree.map(lambda m: m[0], valid(env_state, env_params))  # None: no masks
        example = Transition(zeros, jnp.array(0), jnp.array(0.0), jnp.array(False), zeros, mask)
        buffer = ReplayBuffer.create(example, config.buffer_size)
        opt = optimizer.init(network)
        return TrainState(network, network, opt, buffer, env_state, obs, jnp.array(0), key)

    def collect_step(carry: tuple, key: PRNGKeyArray) -> tuple[tuple, None]:
        q_network, env_state, obs, buffer, env_steps = carry
        tau_key, action_key, env_key = jax.random.split(key, 3)
        mask = valid(env_state, env_params)  # masked actions are never taken
        taus = jax.random.uniform(tau_key, (config.num_envs, config.num_quantile_samples))
        q_values = mean_quantiles(q_network, obs, taus)
        action = epsilon_greedy(action_key, q_values, linear_epsilon(config, env_steps), mask)
        env_keys = jax.random.split(env_key, config.num_envs)
        next_obs, env_state, reward, terminated, _, info = env_step(
            env_keys, env_state, action, env_params
        )
        # Stored next_obs is the pre-reset observation: truncated episodes bootstrap from it.
        final_obs, final_mask = info["final_observation"], info.get("final_action_mask")
        buffer = buffer.add(Transition(obs, action, reward, terminated, final_obs, final_mask))
        return (q_network, env_state, next_obs, buffer, env_steps + config.num_envs), None

    def loss_fn(
        q_network: QNetwork, batch: Transition, target: Array, taus: Array
    ) -> tuple[Array, Array]:
        quantiles = jax.vmap(q_network)(batch.obs, taus)  # [batch, N, num_actions]
        taken = jnp.take_along_axis(quantiles, batch.action[:, None, None], axis=2)[:, :, 0]
        return quantile_huber_loss(taken, target, taus, config.kappa), taken.mean()

    def update(
        carry: tuple, target_network: QNetwork, buffer: ReplayBuffer, key: PRNGKeyArray
    ) -> tuple[tuple, dict[str, Array]]:
        q_network, opt_state = carry
        sample_key, tau_key, prime_key, action_key = jax.random.split(key, 4)
        batch = buffer.sample(sample_key, config.batch_size)
        # Fresh fractions per transition, uniform on [0, 1) (rejax, Dopamine). The target
        # network both picks the greedy next action (the mean of K quantiles) and gives its N'
        # target samples, as the paper's Dopamine agent; rejax uses the online network for both.
        next_taus = jax.random.uniform(action_key, (config.batch_size, config.num_quantile_samples))
        next_q = mean_quantiles(target_network, batch.next_obs, next_taus)
        prime = jax.random.uniform(prime_key, (config.batch_size, config.num_tau_prime_samples))
        next_quantiles = jax.vmap(target_network)(batch.next_obs, prime)
        target = quantile_target(
            batch.reward, batch.terminated, next_quantiles, next_q, batch.next_mask, config.gamma
        )
        taus = jax.random.uniform(tau_key, (config.batch_size, config.num_tau_samples))
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, q_mean), grads = grad_fn(q_network, batch, target, taus)
        updates, opt_state = optimizer.update(grads, opt_state, q_network)
        q_network = optax.apply_updates(q_network, updates)
        return (q_network, opt_state), dict(td_loss=loss, q_values=q_mean)

    def learn(
        carry: tuple, target_network: QNetwork, buffer: ReplayBuffer, key: PRNGKeyArray
    ) -> tuple[tuple, dict[str, Array]]:
        """`updates_per_iteration` updates in turn, their statistics averaged."""
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
        target_network = target_update(q_network, state, env_steps, config)
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
        act=functools.partial(act, num_quantile_samples=config.num_quantile_samples),
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.env_steps_per_iteration,
        unroll=config.iteration_unroll,
    )


# --- presets


# rejax's IQN configs (configs/gymnax/{cartpole,acrobot}.yaml at d751095), 1e5 env steps each,
# their budget; rejax's network: two swish layers of 64, the 64-wide embedding, one swish layer
# of 64. rejax acts uniformly for its first 1,000 steps (fill_buffer), canter epsilon-greedily
# with epsilon from the schedule (above 0.98 there); it evaluates on 128 envs, as here.
# CartPole: one env, an update of one transition (the paper has no minibatches, rejax says) every
# env step, Polyak 0.99 of the target every step, epsilon 1 -> 0.01 over half the run.
CARTPOLE = dict(
    total_timesteps=100_000,
    eval_every=5_000,
    num_eval_envs=128,
    num_envs=1,
    buffer_size=100_000,
    batch_size=1,
    learning_starts=1_000,
    train_frequency=1,
    learning_rate=3e-4,
    adam_eps=1e-8,  # optax's default, rejax's
    tau=0.01,
    target_network_frequency=1,
    end_e=0.01,
    exploration_steps=50_000,
    torso_sizes=(64, 64),
    hidden_sizes=(64,),
    activation="swish",
)
# Acrobot: 10 envs, 5 updates of 100 per 10 env steps, gradient entries clipped at 10. rejax
# blends its (unused) target by Polyak 0.99 every 500 env steps; canter's loss reads the target,
# which at 0.01 per 500 steps would trail the online network by ~50,000 steps, so it is copied
# (tau 1) every 500 env steps, as dqn.py's and the paper's.
ACROBOT = dict(
    CARTPOLE,
    env="Acrobot-v1",
    num_envs=10,
    batch_size=100,
    train_frequency=2,
    grad_clip=10.0,
    tau=1.0,
    target_network_frequency=500,
)
# MinAtar: no IQN configuration is published for it; by the rule of docs/results.md (the nearest
# published configuration), the MinAtar paper's DQN set-up as dqn.py's preset (Young & Tian 2019,
# examples/dqn.py: one env, sticky actions 0.1, 5,000 random steps then epsilon 1 -> 0.1 over
# 100,000 steps, an update of 32 every env step from a 100,000 replay, target copied every 1,000
# steps, centred RMSprop lr 2.5e-4, gamma 0.99, the conv and 128 ReLU units, 5e6 env steps),
# with IQN's head as the paper puts it on Atari's torso: the conv features times the embedding,
# then the 128 units; the paper's N = N' = 64, K = 32, 64 cosines, kappa 1.
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
    num_tau_samples=64,
    num_tau_prime_samples=64,
    num_quantile_samples=32,
    network="cnn",
    torso_sizes=(),
    hidden_sizes=(128,),
    iteration_unroll=4,  # as dqn.py's MinAtar preset, for a GPU
)
PRESETS = {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}
PRESETS |= {"CartPole-v1": dict(CARTPOLE, env="CartPole-v1"), "Acrobot-v1": ACROBOT}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

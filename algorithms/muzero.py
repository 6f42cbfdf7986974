"""Gumbel MuZero for single-agent discrete envs (Schrittwieser et al. 2020, arXiv:1911.08265;
Danihelka et al. 2022, "Policy improvement by planning with Gumbel", ICLR).

MuZero plans with a model it learns: a representation network maps an observation to a latent
state, a dynamics network maps a latent state and an action to the next latent state and the
reward, and a prediction network maps a latent state to a policy and a value. Every env step
runs `mctx.gumbel_muzero_policy` over that model from the current observation and plays the
search's action; the search's root value and improved policy (`action_weights`) are stored with
the step in a replay of trajectories. Each update samples windows of consecutive steps, unrolls
the model K steps from the first observation along the actions taken, and trains the policy on
the improved policies, the value on n-step returns that bootstrap from the stored root values,
and the reward on the rewards; values and rewards are categorical on integer atoms of the
squashed scalar h(x) (common/blocks/distributional.py), read back as h^-1 of their mean.

Follows Stoix's `ff_mz.py` (EdanToledo/Stoix at 8fff19c, read in docs/notes/muzero-reference.md):
its networks (SiLU MLP torsos; a dynamics of two stacked GRU layers whose states are the latent's
halves, fed an embedding of the one-hot action, with a residual; the reward read from the top
layer; separate actor and critic), its optimiser (Adam eps 1e-5 after clipping at 0.5, constant
rate), its acting (the search's action, the root's value and `action_weights` stored), its
value weight 0.25 and its replay (uniform windows that never cross the write position, no
priorities, no reanalyse). Deviations, each towards the paper's pseudocode or canter's rules:
Gumbel search (Stoix's default is PUCT with Dirichlet noise: this file is Gumbel MuZero); the
value and policy are also trained at the K-th unrolled state, and the K recurrent steps' losses
weigh 1/K each against the first step's 1 (Stoix: K predictions, all divided by K); the latent
gradient is halved on its way into the next dynamics step, after the heads have read it (the
pseudocode's place; Stoix halves it before every dynamics step, the first included); the latent is
min-max scaled to [0, 1] with eps 1e-5 after the representation and after each dynamics step
(the paper; Stoix scales the dynamics input to [-1, 1], without eps); the GRU candidate is
tanh (Stoix: sigmoid); each value target is a full n-step return (the window reaches n steps past
the unroll; Stoix's stops at its window's end) and the first step of a window is always trained
(Stoix masks it where that step ends an episode); past a termination the targets are the
absorbing state's (value and reward 0, no policy loss), past a truncation nothing is trained,
and a truncated step bootstraps from the value of its final observation (Stoix treats time
limits as terminations). Evaluation searches the learned model without Gumbel noise (the
search's choice; `--eval-policy sampled` adds the noise, Stoix's evaluation). Masked actions are
excluded at the root, the only node where the env's mask is known.
The defaults are canter's CartPole-v1 configuration for a CPU (docs/results.md); `--preset
Stoix-CartPole-v1` is Stoix's own (1,024 envs, 256-unit networks, 601 atoms: a GPU's).

    python algorithms/muzero.py --num-seeds 8  # CartPole-v1
    python algorithms/muzero.py --preset Breakout-MinAtar --num-seeds 4
"""

import dataclasses
import functools
import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import mctx
import optax
from canter.algorithms import trainer
from canter.common.blocks.buffer import ReplayBuffer
from canter.common.blocks.clipping import clip_by_global_norm  # one sum off the CPU
from canter.common.blocks.distributional import signed_hyperbolic, two_hot, two_hot_scalar
from canter.common.blocks.initializers import lecun_linear
from canter.common.blocks.layers import MLP
from canter.common.config import (
    ConfigError,
    NonNegative,
    NonNegativeInt,
    Positive,
    PositiveInt,
    UnitInterval,
    check_budget,
    pytree_config,
)
from canter.common.envs import MINATAR_GAMES, ended_episodes, make_env, vector_mask, vector_step
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

ACTION_SPACE = "discrete"


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """Environment (discrete actions): a gymnax id, a registered name or a JAX-native suite's
    id (docs/environments.md); observations are flattened."""
    sticky_action_prob: UnitInterval = 0.0
    """Probability that the env repeats its last action instead (MinAtar games only)."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 204_800
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 20_480
    """Env steps per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 16
    """Environments (one episode each) per evaluation."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """Evaluation plays the search's choice without Gumbel noise ("greedy") or with it
    ("sampled", as in training and Stoix's evaluation)."""
    num_envs: PositiveInt = 16
    """Parallel environments per seed."""
    num_steps: PositiveInt = 8
    """Env steps per env between updates (Stoix's rollout_length)."""
    learning_starts: NonNegativeInt = 2_048
    """Env steps of warm-up (the initial network searching) before the first update."""
    buffer_size: PositiveInt = 1_024
    """Replay length in steps per env (the replay holds buffer_size x num_envs steps)."""
    batch_size: PositiveInt = 128
    """Windows of consecutive steps per gradient step."""
    updates_per_iteration: PositiveInt = 16
    """Gradient steps per iteration, each on a fresh batch (Stoix's epochs)."""
    unroll_steps: PositiveInt = 5
    """K: steps the model is unrolled along the actions taken."""
    n_steps: PositiveInt = 5
    """Rewards summed in a value target before it bootstraps from a stored root value."""
    gamma: UnitInterval = 0.99
    """Discount factor (also the search's, between model steps)."""
    num_simulations: PositiveInt = 16
    """Simulations of the Gumbel search per env step."""
    max_num_considered_actions: PositiveInt = 16
    """Actions the search's sequential halving starts from at the root (mctx's default)."""
    learning_rate: NonNegative = 1e-3
    """Adam learning rate (constant)."""
    max_grad_norm: Positive = 0.5
    """Global gradient-norm clip."""
    vf_coef: NonNegative = 0.25
    """Weight of the value loss (the reward and policy losses weigh 1)."""
    hidden_size: PositiveInt = 64
    """Width of the two SiLU hidden layers of every MLP (representation, reward, actor, critic)."""
    latent_size: PositiveInt = 64
    """Size of the latent state (even: the two GRU layers' states are its halves)."""
    support_bound: PositiveInt = 20
    """Values and rewards live on the integer atoms -B .. B of h(x): |x| up to h^-1(B) (20:
    about 460; Stoix's 300: about 9e4)."""

    @property
    def env_steps_per_iteration(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.env_steps_per_iteration

    @property
    def window(self) -> int:
        """Steps per sampled window: the K + 1 unrolled positions, then n more for targets."""
        return self.unroll_steps + self.n_steps + 1


# --- networks


class Dynamics(eqx.Module):
    """The next latent state and the reward logits of an action: two stacked GRU layers whose
    states are the latent's halves, fed the action's embedding, plus the latent (a residual)."""

    embed: eqx.nn.Linear
    lower: eqx.nn.GRUCell
    upper: eqx.nn.GRUCell
    reward: MLP
    num_actions: int = eqx.field(static=True)

    def __init__(self, num_actions: int, config: Config, atoms: int, key: PRNGKeyArray):
        keys = jax.random.split(key, 4)
        half, hidden = config.latent_size // 2, config.hidden_size
        self.embed = lecun_linear(num_actions, config.latent_size, keys[0])
        self.lower = eqx.nn.GRUCell(config.latent_size, half, key=keys[1])
        self.upper = eqx.nn.GRUCell(half, half, key=keys[2])
        self.reward = MLP((half, hidden, atoms), 1.0, keys[3], "swish")
        self.num_actions = num_actions

    def __call__(self, latent: Float[Array, " latent"], action: Int[Array, ""]) -> tuple:
        embedding = self.embed(jax.nn.one_hot(action, self.num_actions))
        low, high = jnp.split(latent, 2)
        low = self.lower(embedding, low)
        high = self.upper(low, high)
        return scale_latent(jnp.concatenate([low, high]) + latent), self.reward(high)


class MuZeroNet(eqx.Module):
    """Representation (a SiLU MLP to the latent), dynamics, and prediction (separate actor and
    critic MLPs: logits, output gain 0.01, and value logits on the atoms)."""

    represent_net: MLP
    dynamics: Dynamics
    actor: MLP
    critic: MLP

    def __init__(self, obs_dim: int, num_actions: int, config: Config, key: PRNGKeyArray):
        keys = jax.random.split(key, 4)
        hidden, latent, atoms = config.hidden_size, config.latent_size, 2 * config.support_bound + 1
        self.represent_net = MLP((obs_dim, hidden, latent), 1.0, keys[0], "swish")
        self.dynamics = Dynamics(num_actions, config, atoms, keys[1])
        self.actor = MLP((latent, hidden, num_actions), 0.01, keys[2], "swish")
        self.critic = MLP((latent, hidden, atoms), 1.0, keys[3], "swish")

    def represent(self, obs: Float[Array, "..."]) -> Float[Array, " latent"]:
        return scale_latent(self.represent_net(obs.reshape(-1)))

    def predict(self, latent: Float[Array, " latent"]) -> tuple[Array, Array]:
        """Policy logits and value logits."""
        return self.actor(latent), self.critic(latent)


def scale_latent(latent: Float[Array, " latent"]) -> Float[Array, " latent"]:
    """Min-max scaled to [0, 1] (the paper's appendix; eps 1e-5 keeps a flat latent finite)."""
    low, high = latent.min(), latent.max()
    return (latent - low) / jnp.maximum(high - low, 1e-5)


def scale_gradient(x: Array, scale: float) -> Array:
    """`x`, its gradient multiplied by `scale` (the pseudocode's `scale_gradient`)."""
    return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


# --- state


class Step(eqx.Module):
    """Env steps as the replay keeps them (leading axes: steps, envs or windows, as held): the
    observation searched from, the action played, the reward, how the episode ended there, the
    search's root value and improved policy, and the value of the final observation (what a
    truncated step bootstraps from)."""

    obs: Float[Array, "..."]
    action: Int[Array, "..."]
    reward: Float[Array, "..."]
    terminated: Bool[Array, "..."]
    truncated: Bool[Array, "..."]
    value: Float[Array, "..."]
    policy: Float[Array, "... num_actions"]
    final_value: Float[Array, "..."]


class TrainState(eqx.Module):
    """Everything that changes during training (the replay's leaves are [buffer_size, num_envs,
    ...])."""

    network: MuZeroNet
    opt_state: optax.OptState
    buffer: ReplayBuffer
    env_state: eqx.Module
    obs: Float[Array, "num_envs ..."]
    key: PRNGKeyArray


# --- search


def search(
    network: MuZeroNet,
    obs: Float[Array, "n ..."],
    mask: Bool[Array, "n num_actions"] | None,
    key: PRNGKeyArray,
    config: Config,
    gumbel_scale: ArrayLike = 1.0,
) -> mctx.PolicyOutput:
    """mctx's Gumbel MuZero policy over the learned model from a batch of observations; masked
    actions are excluded at the root."""
    latent = jax.vmap(network.represent)(obs)
    logits, value_logits = jax.vmap(network.predict)(latent)
    value = two_hot_scalar(value_logits)
    root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=latent)
    return mctx.gumbel_muzero_policy(
        network,
        key,
        root,
        functools.partial(recurrent_fn, gamma=config.gamma),
        config.num_simulations,
        invalid_actions=None if mask is None else ~mask,
        max_num_considered_actions=config.max_num_considered_actions,
        gumbel_scale=gumbel_scale,
    )


def recurrent_fn(
    network: MuZeroNet, key: PRNGKeyArray | None, action: Array, latent: Array, gamma: ArrayLike
) -> tuple[mctx.RecurrentFnOutput, Array]:
    """One step of the learned model: its reward, the discount gamma (the model predicts no
    ends), and the prediction at the next latent state."""
    latent, reward_logits = jax.vmap(network.dynamics)(latent, action)
    logits, value_logits = jax.vmap(network.predict)(latent)
    reward, value = two_hot_scalar(reward_logits), two_hot_scalar(value_logits)
    discount = jnp.full_like(reward, gamma)
    out = mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value)
    return out, latent


def act(
    state: TrainState,
    obs: Float[Array, "n ..."],
    mask: Array | None = None,
    key: PRNGKeyArray | None = None,
    config: Config | None = None,
) -> Array:
    """Evaluation's action: the search's, without Gumbel noise, or with it (`key`)."""
    noise = 0.0 if key is None else 1.0
    key = jax.random.key(0) if key is None else key  # unused without noise
    return search(state.network, obs, mask, key, config, noise).action


# --- losses


def sample_windows(buffer: ReplayBuffer, key: PRNGKeyArray, count: int, length: int) -> Step:
    """`count` windows of `length` consecutive steps ([count, length, ...]), each from an env
    drawn uniformly and starting uniformly among the steps whose whole window lies between the
    oldest step kept and the newest (a window never crosses the write position)."""
    env_key, start_key = jax.random.split(key)
    num_envs = jax.tree.leaves(buffer.data)[0].shape[1]
    envs = jax.random.randint(env_key, (count, 1), 0, num_envs)
    starts = jax.random.randint(start_key, (count, 1), 0, buffer.size - length + 1)
    oldest = (buffer.position - buffer.size) % buffer.buffer_size
    rows = (oldest + starts + jnp.arange(length)) % buffer.buffer_size
    return jax.tree.map(lambda store: store[rows, envs], buffer.data)


def value_targets(window: Step, gamma: ArrayLike, unroll: int, n: int) -> Float[Array, "batch k"]:
    """The n-step return of each of the K + 1 unrolled positions: n rewards, then the stored
    root value n steps on; a termination ends the sum with 0, a truncation with the value of
    its final observation."""
    target = window.value[:, n : n + unroll + 1]
    for i in reversed(range(n)):
        span = slice(i, i + unroll + 1)
        following = jnp.where(window.truncated[:, span], window.final_value[:, span], target)
        target = window.reward[:, span] + gamma * jnp.where(
            window.terminated[:, span], 0.0, following
        )
    return target


def episode_status(window: Step, unroll: int) -> Int[Array, "batch k"]:
    """Where each unrolled position lies against the first episode end before it: 0 inside the
    window's first episode, 1 past a termination (the absorbing state: value and reward 0), 2
    past a truncation (unknown: not trained)."""

    def forward(status: Array, ends: tuple[Array, Array]) -> tuple[Array, Array]:
        terminated, truncated = ends
        ended = jnp.where(terminated, 1, jnp.where(truncated, 2, 0))
        return jnp.where(status == 0, ended, status), status

    ends = (window.terminated[:, : unroll + 1].T, window.truncated[:, : unroll + 1].T)
    return jax.lax.scan(forward, jnp.zeros(window.action.shape[0], jnp.int32), ends)[1].T


def loss_fn(network: MuZeroNet, window: Step, config: Config) -> tuple[Array, dict]:
    """The unrolled model's losses over a batch of windows: policy cross-entropy to the improved
    policy, value and reward cross-entropy to two-hot targets of h(target); the first position
    weighs 1, each of the K recurrent ones 1/K (their losses, summed)."""
    k, bound = config.unroll_steps, config.support_bound
    status = episode_status(window, k)
    value_target = value_targets(window, config.gamma, k, config.n_steps)
    value_target = jnp.where(status == 1, 0.0, value_target)
    reward_target = jnp.where(status == 1, 0.0, window.reward[:, : k + 1])

    def cross_entropy(logits: Array, target: Array) -> Array:
        return optax.softmax_cross_entropy(logits, two_hot(signed_hyperbolic(target), bound))

    def position(latent: Array, i: int) -> tuple[Array, Array]:
        logits, value_logits = jax.vmap(network.predict)(latent)
        policy = optax.softmax_cross_entropy(logits, window.policy[:, i]) * (status[:, i] == 0)
        value = cross_entropy(value_logits, value_target[:, i]) * (status[:, i] < 2)
        return policy, value

    latent = jax.vmap(network.represent)(window.obs[:, 0])
    policy, value = position(latent, 0)
    reward = jnp.zeros_like(value)
    for i in range(k):
        latent, reward_logits = jax.vmap(network.dynamics)(latent, window.action[:, i])
        step_reward = cross_entropy(reward_logits, reward_target[:, i]) * (status[:, i] < 2)
        step_policy, step_value = position(latent, i + 1)
        policy, value = policy + step_policy / k, value + step_value / k
        reward = reward + step_reward / k
        latent = scale_gradient(latent, 0.5)  # only on the way into the next dynamics step
    policy, value, reward = policy.mean(), value.mean(), reward.mean()
    loss = policy + config.vf_coef * value + reward
    return loss, dict(policy_loss=policy, value_loss=value, reward_loss=reward)


# --- training


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    if config.latent_size % 2:
        raise ConfigError(f"latent_size = {config.latent_size} must be even (two GRU halves).")
    if config.buffer_size < max(config.window, config.num_steps):
        raise ConfigError(
            f"buffer_size = {config.buffer_size} steps per env must hold a window of "
            f"unroll_steps + n_steps + 1 = {config.window} steps and one rollout of num_steps "
            f"= {config.num_steps}."
        )
    if config.learning_starts < config.window * config.num_envs:
        raise ConfigError(
            f"learning_starts = {config.learning_starts} env steps is less than one window of "
            f"{config.window} steps in each of the {config.num_envs} envs."
        )
    check_budget(config, config.env_steps_per_iteration)
    env, env_params = make_env(
        config.env,
        action=ACTION_SPACE,
        algorithm="muzero.py",
        sticky_action_prob=config.sticky_action_prob,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = optax.chain(
        clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate, eps=1e-5)
    )

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        network = MuZeroNet(math.prod(obs_shape), num_actions, config, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zero, false = jnp.zeros(config.num_envs), jnp.zeros(config.num_envs, bool)
        policy = jnp.zeros((config.num_envs, num_actions))
        example = Step(obs, zero.astype(jnp.int32), zero, false, false, zero, policy, zero)
        buffer = ReplayBuffer.create(example, config.buffer_size)
        return TrainState(network, optimizer.init(network), buffer, env_state, obs, key)

    def rollout_step(carry: tuple, key: PRNGKeyArray) -> tuple[tuple, Step]:
        network, env_state, obs = carry
        search_key, env_key = jax.random.split(key)
        mask = valid(env_state, env_params)  # masked actions are never taken
        out = search(network, obs, mask, search_key, config)
        next_obs, env_state, reward, terminated, truncated, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, out.action, env_params
        )
        final_latent = jax.vmap(network.represent)(info["final_observation"])
        final_value = two_hot_scalar(jax.vmap(network.predict)(final_latent)[1])
        root_value = out.search_tree.node_values[:, mctx.Tree.ROOT_INDEX]
        ends = (terminated, truncated)
        record = Step(obs, out.action, reward, *ends, root_value, out.action_weights, final_value)
        return (network, env_state, next_obs), record

    def update(carry: tuple, key: PRNGKeyArray, buffer: ReplayBuffer) -> tuple[tuple, dict]:
        network, opt_state = carry
        window = sample_windows(buffer, key, config.batch_size, config.window)
        grads, stats = jax.grad(loss_fn, has_aux=True)(network, window, config)
        updates, opt_state = optimizer.update(grads, opt_state, network)
        return (optax.apply_updates(network, updates), opt_state), stats

    def learn(carry: tuple, buffer: ReplayBuffer, key: PRNGKeyArray) -> tuple[tuple, dict]:
        keys = jax.random.split(key, config.updates_per_iteration)
        carry, stats = jax.lax.scan(functools.partial(update, buffer=buffer), carry, keys)
        return carry, jax.tree.map(jnp.mean, stats)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, rollout_key, update_key = jax.random.split(state.key, 3)
        carry = (state.network, state.env_state, state.obs)
        rollout_keys = jax.random.split(rollout_key, config.num_steps)
        (_, env_state, obs), steps = jax.lax.scan(rollout_step, carry, rollout_keys)
        buffer = state.buffer.add(steps)
        # No updates during warm-up (NaN metrics); `iteration` is the same for every seed.
        warm = (iteration + 1) * config.env_steps_per_iteration >= config.learning_starts
        (network, opt_state), stats = trainer.when(
            warm, learn, (state.network, state.opt_state), buffer, update_key
        )
        episodes, env_state = ended_episodes(env_state)
        metrics = {**episodes, **stats, "search_value": steps.value.mean()}
        return TrainState(network, opt_state, buffer, env_state, obs, key), metrics

    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=functools.partial(act, config=config),
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.env_steps_per_iteration,
    )


# --- presets


# Stoix's ff_mz defaults (8fff19c: configs/arch/anakin.yaml, system/search/ff_mz.yaml,
# network/muzero.yaml) on gymnax CartPole-v1: 1,024 envs x 8 steps, 16 warm-up steps per env,
# 8 gradient steps of 32 windows per rollout, a replay of 25,000 steps (24 per env), 256-unit
# MLPs, a 512 latent, 601 atoms, 25 simulations, 1e7 env steps. A GPU's configuration. Stoix
# publishes no number for it; its deviations are the module docstring's.
STOIX = dict(
    total_timesteps=10_000_000,
    eval_policy="sampled",  # Stoix's evaluator plays the search as in training, noise and all
    eval_every=500_000,
    num_eval_envs=128,
    num_envs=1024,
    num_steps=8,
    learning_starts=16_384,
    buffer_size=24,
    batch_size=32,
    updates_per_iteration=8,
    num_simulations=25,
    learning_rate=3e-4,
    hidden_size=256,
    latent_size=512,
    support_bound=300,
)
# MinAtar: canter's CPU configuration (the defaults, 128-unit networks) at the budget and with
# the sticky actions (0.1, the MinAtar paper's) of dqn's MinAtar rows on this CPU
# (docs/results.md), on the flat observation as Stoix's MinAtar configs flatten it.
MINATAR = dict(
    total_timesteps=409_600,
    eval_every=102_400,
    sticky_action_prob=0.1,
    hidden_size=128,
    latent_size=128,
)
PRESETS = {"Stoix-CartPole-v1": dict(STOIX, env="CartPole-v1")}
PRESETS |= {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

"""SAC for discrete actions (Christodoulou 2019, arXiv:1910.07207).

Follows CleanRL's `sac_atari.py` (at 004f8a0): a softmax policy and twin Q-networks that give a
value per action, so the soft value, the policy loss and the temperature loss are expectations
over the actions, computed exactly instead of from samples; the critics' squared errors summed,
the actor trained on the freshly updated critics, the temperature tuned towards an entropy of
`target_entropy_scale x log(num_actions)` (CleanRL: 0.89) in CleanRL's form of its loss, Adam
with eps 1e-4, Kaiming-normal weights and zero biases, uniform random actions during warm-up.
Deviates from it in:
- time limits: a truncated episode bootstraps from its final observation (as CleanRL's);
- the losses: summed over the actions and averaged over the batch, as rejax's `sac.py` (CleanRL
  averages over both, which scales the actor's and the temperature's loss by 1 / num_actions:
  the same steps under Adam, up to its eps);
- the cadence: updates and target updates are counted per iteration of `num_envs` env steps
  (k target updates due at once blend as 1 - (1 - tau)^k), never found by `step % freq == 0`;
- action masks: masked actions get probability 0 (their `pi log pi` terms are 0, not NaN), are
  never sampled or explored, and the target entropy counts each state's valid actions:
  `target_entropy_scale x log(valid actions)`, 0 where one is valid;
- the torso: an MLP on the flat observation, or the MinAtar paper's convolution (16 3x3 filters)
  with `--network cnn`; CleanRL's Atari CNN is not in this file (ppo_atari.py has it).
The defaults learn CartPole-v1 in 50,000 env steps on a CPU.

    python algorithms/sac_discrete.py --env CartPole-v1 --num-seeds 4
    python algorithms/sac_discrete.py --preset Breakout-MinAtar --num-seeds 4
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
from canter.common.blocks.masking import masked_argmax, masked_logits, random_action, sample_masked
from canter.common.config import (
    ConfigError,
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
from canter.common.envs import MINATAR_GAMES, ended_episodes, make_env, vector_mask, vector_step
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, PyTree

ACTION_SPACE = "discrete"


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "CartPole-v1"
    """Environment (discrete actions): a gymnax id (CartPole-v1, Breakout-MinAtar, ...), a
    registered name (yours: `register_env`), or `gymnasium:<id>` for any Gymnasium id. See
    docs/environments.md."""
    sticky_action_prob: UnitInterval = 0.0
    """Probability that the env repeats its last action instead (MinAtar games only)."""
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
    """What evaluation plays: the most likely valid action ("greedy"), or a draw from the
    policy as in training ("sampled")."""
    num_envs: PositiveInt = 4
    """Parallel environments per seed."""
    buffer_size: PositiveInt = 50_000
    """Replay buffer capacity in transitions."""
    batch_size: PositiveInt = 128
    """Transitions sampled from the buffer per update (CleanRL: 64)."""
    learning_starts: NonNegativeInt = 1_000
    """Env steps of uniformly random valid actions before the first update."""
    train_frequency: PositiveInt = 2
    """Env steps (all envs together) per update; divides num_envs or is a multiple of it
    (CleanRL's `update_frequency`: 4)."""
    policy_lr: NonNegative = 3e-4
    """Adam learning rate of the actor."""
    q_lr: NonNegative = 1e-3
    """Adam learning rate of the critics and of the entropy temperature."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    tau: PositiveFraction = 0.01
    """Target network update rate (1.0: hard copy, CleanRL's); k updates due at once apply
    1 - (1 - tau)^k."""
    target_network_frequency: PositiveInt = 2
    """Env steps between target network updates (CleanRL: 8,000)."""
    autotune: bool = True
    """Tune the entropy temperature towards a target entropy (`target_entropy_scale`)."""
    alpha: Positive = 1.0
    """Entropy temperature when not autotuned, and its initial value when autotuned (CleanRL:
    1, its log_alpha 0; 0.2 without autotune)."""
    target_entropy_scale: NonNegative = 0.89
    """The tuned temperature aims at an entropy of target_entropy_scale x log(valid actions),
    the uniform policy's times the scale (CleanRL: 0.89)."""
    network: Literal["mlp", "cnn"] = "mlp"
    """Torso under the hidden layers: none (flat observation), or a CNN (image observations)."""
    hidden_sizes: tuple[int, ...] = (64, 64)
    """Widths of the ReLU hidden layers of the actor and of each critic."""

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


def kaiming_normal(layer: eqx.Module, key: PRNGKeyArray) -> eqx.Module:
    """`layer` with N(0, 2 / fan_in) weights and zero biases: CleanRL's `layer_init` in
    sac_atari.py (PyTorch's `kaiming_normal_`)."""
    fan_in = math.prod(layer.weight.shape[1:])
    weight = jax.random.normal(key, layer.weight.shape) * math.sqrt(2.0 / fan_in)
    return eqx.tree_at(lambda m: (m.weight, m.bias), layer, (weight, jnp.zeros_like(layer.bias)))


class Network(eqx.Module):
    """ReLU MLP from observation to one output per action (the actor's logits, a critic's
    Q-values); on the flat observation, or on the MinAtar paper's convolution (16 3x3 filters,
    stride 1, ReLU)."""

    conv: Conv2d | None
    layers: tuple[eqx.nn.Linear, ...]

    def __init__(
        self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key: PRNGKeyArray
    ):
        self.conv, features = None, math.prod(obs_shape)
        if config.network == "cnn":
            height, width, channels = obs_shape
            conv_key = jax.random.fold_in(key, 1)
            self.conv = kaiming_normal(Conv2d(channels, 16, 3, key=conv_key), conv_key)
            features = 16 * (height - 2) * (width - 2)
        sizes = (features, *config.hidden_sizes, num_actions)
        keys = jax.random.split(key, len(sizes) - 1)
        self.layers = tuple(
            kaiming_normal(eqx.nn.Linear(i, o, key=k), k)
            for i, o, k in zip(sizes[:-1], sizes[1:], keys, strict=True)
        )

    def __call__(self, x: Float[Array, "*obs_shape"]) -> Float[Array, " num_actions"]:
        if self.conv is None:
            x = x.reshape(-1)
        else:  # Equinox's Conv2d is channels-first
            x = jax.nn.relu(self.conv(jnp.moveaxis(x, -1, 0))).reshape(-1)
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x)


class TwinCritic(eqx.Module):
    """Two independent Q-networks stored stacked, evaluated in one vmapped call."""

    nets: Network  # every leaf has a leading axis of 2

    def __init__(
        self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key: PRNGKeyArray
    ):
        make = lambda k: Network(obs_shape, num_actions, config, k)  # noqa: E731
        self.nets = eqx.filter_vmap(make)(jax.random.split(key, 2))

    def __call__(self, obs: Float[Array, "*obs_shape"]) -> Float[Array, "2 num_actions"]:
        return eqx.filter_vmap(lambda net: net(obs))(self.nets)


# --- state


class Transition(eqx.Module):
    """Replayed experience; `next_obs` is the final observation when the episode ended there,
    `mask` and `next_mask` the valid actions of `obs` and `next_obs` (None without masks)."""

    obs: Float[Array, "..."]  # [*batch, *obs_shape]
    action: Int[Array, "*batch"]
    reward: Float[Array, "*batch"]
    terminated: Bool[Array, "*batch"]
    next_obs: Float[Array, "..."]
    mask: Bool[Array, "*batch num_actions"] | None
    next_mask: Bool[Array, "*batch num_actions"] | None


class Agent(eqx.Module):
    """What the updates change: networks, temperature, optimiser states."""

    actor: Network
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
    obs: Float[Array, "num_envs ..."]
    env_steps: Int[Array, ""]
    key: PRNGKeyArray


# --- losses


def policy_probs(
    logits: Float[Array, "batch num_actions"], mask: Bool[Array, "batch num_actions"] | None
) -> tuple[Float[Array, "batch num_actions"], Float[Array, "batch num_actions"]]:
    """The policy's probabilities and log-probabilities over the valid actions; a masked
    action's are both 0, so every `pi log pi` term there is 0 (never 0 x -inf = NaN)."""
    log_probs = jax.nn.log_softmax(masked_logits(logits, mask), axis=-1)
    if mask is None:
        return jnp.exp(log_probs), log_probs
    return jnp.where(mask, jnp.exp(log_probs), 0.0), jnp.where(mask, log_probs, 0.0)


def soft_value(
    probs: Float[Array, "batch num_actions"],
    log_probs: Float[Array, "batch num_actions"],
    q: Float[Array, "batch 2 num_actions"],
    alpha: Float[Array, ""],
) -> Float[Array, " batch"]:
    """sum_a pi(a|s) (min_i Q_i(s, a) - alpha log pi(a|s)): the soft value, an expectation over
    the actions, not a sample; the actor's loss is minus its mean over states."""
    return jnp.sum(probs * (jnp.min(q, axis=1) - alpha * log_probs), axis=-1)


def soft_td_target(
    reward: Float[Array, " batch"],
    terminated: Bool[Array, " batch"],
    next_probs: Float[Array, "batch num_actions"],
    next_log_probs: Float[Array, "batch num_actions"],
    next_q: Float[Array, "batch 2 num_actions"],
    alpha: Float[Array, ""],
    gamma: float | Float[Array, ""],
) -> Float[Array, " batch"]:
    """r + gamma V(s'), V the soft value of the target critics under the current policy; only
    termination cuts it (not truncation)."""
    next_value = soft_value(next_probs, next_log_probs, next_q, alpha)
    return reward + gamma * (1.0 - terminated) * next_value


def target_entropy(
    mask: Bool[Array, "batch num_actions"] | None, num_actions: int, scale: float | Array
) -> Float[Array, "*batch"]:
    """CleanRL's `-scale x log(1 / num_actions)`; with masks, per state over its valid actions
    (0 where one or none is valid)."""
    valid = num_actions if mask is None else jnp.maximum(jnp.sum(mask, axis=-1), 1)
    return scale * jnp.log(jnp.asarray(valid, jnp.float32))


def temperature_loss(
    log_alpha: Float[Array, ""],
    probs: Float[Array, "batch num_actions"],
    log_probs: Float[Array, "batch num_actions"],
    entropy_target: Float[Array, "*batch"],
) -> Float[Array, ""]:
    """CleanRL's form, -alpha sum_a pi(a|s) (log pi(a|s) + target), in alpha (not log alpha),
    the policy held fixed: alpha falls while the entropy is above its target."""
    terms = probs * (log_probs + jnp.expand_dims(entropy_target, -1))
    return jnp.mean(-jnp.exp(log_alpha) * jnp.sum(terms, axis=-1))


def critic_loss(
    critic: TwinCritic,
    obs: Float[Array, "batch ..."],
    action: Int[Array, " batch"],
    target: Float[Array, " batch"],
) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """Squared TD error of both critics at the taken action, summed over the two (CleanRL),
    and their mean Q-value there."""
    q = jax.vmap(critic)(obs)
    q_taken = jnp.take_along_axis(q, action[:, None, None], axis=-1)[..., 0]
    return jnp.sum(jnp.mean((q_taken - target[:, None]) ** 2, axis=0)), q_taken.mean()


# Copied from algorithms/dqn.py::polyak_update
def polyak_update(online: PyTree, target: PyTree, tau: float | Float[Array, ""]) -> PyTree:
    """Polyak averaging `tau * online + (1 - tau) * target`; tau 0 keeps, tau 1 copies."""
    return jax.tree.map(lambda o, t: tau * o + (1.0 - tau) * t, online, target)


def act(
    state: TrainState,
    obs: Float[Array, "n ..."],
    mask: Array | None = None,
    key: PRNGKeyArray | None = None,
) -> Array:
    """The most likely valid action under the policy, or with `key` a draw from it."""
    logits = jax.vmap(state.agent.actor)(obs)
    return masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]


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
        algorithm="sac_discrete.py",
        image=config.network == "cnn",
        sticky_action_prob=config.sticky_action_prob,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    adam = lambda lr: optax.adam(lr, eps=1e-4)  # noqa: E731  CleanRL: eps 1e-4 "for stability"
    learning_rates = (config.policy_lr, config.q_lr, config.q_lr)  # the temperature's: q_lr
    actor_optimizer, critic_optimizer, alpha_optimizer = map(adam, learning_rates)

    def init(key: PRNGKeyArray) -> TrainState:
        actor_key, critic_key, env_key, key = jax.random.split(key, 4)
        actor = Network(obs_shape, num_actions, config, actor_key)
        critic = TwinCritic(obs_shape, num_actions, config, critic_key)
        log_alpha = jnp.log(config.alpha) * jnp.ones(())
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        zeros = jnp.zeros(obs_shape)
        mask = jax.tree.map(lambda m: m[0], valid(env_state, env_params))  # None: no masks
        false = jnp.array(False)
        example = Transition(zeros, jnp.array(0), jnp.array(0.0), false, zeros, mask, mask)
        opt_states = (actor_optimizer.init(actor), critic_optimizer.init(critic))
        agent = Agent(
            actor, critic, critic, log_alpha, *opt_states, alpha_optimizer.init(log_alpha)
        )
        buffer = ReplayBuffer.create(example, config.buffer_size)
        return TrainState(agent, buffer, env_state, obs, jnp.array(0), key)

    def collect_step(carry: tuple, key: PRNGKeyArray) -> tuple[tuple, None]:
        actor, env_state, obs, buffer, env_steps = carry
        policy_key, random_key, env_key = jax.random.split(key, 3)
        mask = valid(env_state, env_params)  # masked actions are never taken
        policy_action, _ = sample_masked(policy_key, jax.vmap(actor)(obs), mask)
        random = random_action(random_key, mask, config.num_envs, num_actions)
        action = jnp.where(env_steps < config.learning_starts, random, policy_action)
        next_obs, env_state, reward, terminated, _, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, action, env_params
        )
        # Stored next_obs is the pre-reset observation: truncated episodes bootstrap from it.
        final_obs, final_mask = info["final_observation"], info.get("final_action_mask")
        buffer = buffer.add(
            Transition(obs, action, reward, terminated, final_obs, mask, final_mask)
        )
        return (actor, env_state, next_obs, buffer, env_steps + config.num_envs), None

    def actor_loss(actor: Network, obs: Array, mask: Array | None, q: Array, alpha: Array) -> tuple:
        probs, log_probs = policy_probs(jax.vmap(actor)(obs), mask)
        return -jnp.mean(soft_value(probs, log_probs, q, alpha)), (probs, log_probs)

    def update(agent: Agent, buffer: ReplayBuffer, key: PRNGKeyArray) -> tuple[Agent, dict]:
        batch = buffer.sample(key, config.batch_size)
        alpha = jnp.exp(agent.log_alpha)
        next_logits = jax.vmap(agent.actor)(batch.next_obs)
        next_probs, next_log_probs = policy_probs(next_logits, batch.next_mask)
        next_q = jax.vmap(agent.target_critic)(batch.next_obs)
        target = soft_td_target(
            batch.reward, batch.terminated, next_probs, next_log_probs, next_q, alpha, config.gamma
        )
        (q_loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(
            agent.critic, batch.obs, batch.action, target
        )
        updates, critic_opt_state = critic_optimizer.update(grads, agent.critic_opt_state)
        critic = optax.apply_updates(agent.critic, updates)
        # The actor and the temperature see the freshly updated critics (CleanRL order).
        q = jax.vmap(critic)(batch.obs)
        (pi_loss, (probs, log_probs)), grads = jax.value_and_grad(actor_loss, has_aux=True)(
            agent.actor, batch.obs, batch.mask, q, alpha
        )
        updates, actor_opt_state = actor_optimizer.update(grads, agent.actor_opt_state)
        actor = optax.apply_updates(agent.actor, updates)
        log_alpha, alpha_opt_state = agent.log_alpha, agent.alpha_opt_state
        if config.autotune:  # on the probabilities before the actor's update (CleanRL)
            goal = target_entropy(batch.mask, num_actions, config.target_entropy_scale)
            grad = jax.grad(temperature_loss)(log_alpha, probs, log_probs, goal)
            updates, alpha_opt_state = alpha_optimizer.update(grad, alpha_opt_state)
            log_alpha = optax.apply_updates(log_alpha, updates)
        opt_states = (actor_opt_state, critic_opt_state, alpha_opt_state)
        agent = Agent(actor, critic, agent.target_critic, log_alpha, *opt_states)
        return agent, dict(
            value_loss=q_loss,
            q_values=q_mean,
            actor_loss=pi_loss,
            alpha=jnp.exp(log_alpha),
            entropy=-jnp.mean(jnp.sum(probs * log_probs, axis=-1)),  # exact, not sampled
        )

    def learn(agent: Agent, buffer: ReplayBuffer, key: PRNGKeyArray) -> tuple[Agent, dict]:
        keys = jax.random.split(key, config.updates_per_iteration)
        agent, stats = jax.lax.scan(lambda a, k: update(a, buffer, k), agent, keys)
        return agent, jax.tree.map(jnp.mean, stats)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, collect_key, update_key = jax.random.split(state.key, 3)
        carry = (state.agent.actor, state.env_state, state.obs, state.buffer, state.env_steps)
        collect_keys = jax.random.split(collect_key, config.vector_steps_per_iteration)
        (_, env_state, obs, buffer, env_steps), _ = jax.lax.scan(collect_step, carry, collect_keys)
        # No updates during warm-up (NaN metrics). The test reads `iteration`, the same for
        # every seed, so vmapped seeds run one branch (a test on `env_steps` would run both).
        warm = (iteration + 1) * config.env_steps_per_iteration >= config.learning_starts
        agent, stats = trainer.when(warm, learn, state.agent, buffer, update_key)
        # Target updates fall due when the env-step counter crosses multiples of the frequency;
        # k of them at once (num_envs > frequency) blend as k Polyak steps: 1 - (1 - tau)^k.
        freq = config.target_network_frequency
        due = env_steps // freq - state.env_steps // freq
        tau = 1.0 - (1.0 - config.tau) ** due
        agent = dataclasses.replace(
            agent, target_critic=polyak_update(agent.critic, agent.target_critic, tau)
        )
        episodes, env_state = ended_episodes(env_state)
        metrics = {**episodes, **stats, "env_steps": env_steps.astype(jnp.float32)}
        return TrainState(agent, buffer, env_state, obs, env_steps, key), metrics

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


# CleanRL's sac_atari.py settings (at 004f8a0) on MinAtar, as rejax's benchmark/cleanRL/
# sac_minatar.py runs them (with the MinAtar paper's convolution): one env, 20,000 uniformly
# random steps, then an update of 64 transitions every 4 env steps; the target critics copied
# every 8,000 env steps; Adam lr 3e-4 (eps 1e-4) for the actor, the critics and the
# temperature; target entropy 0.89 x log(num_actions); gamma 0.99; sticky actions 0.1 (MinAtar's
# own default). Deviations: a replay of 100,000 (CleanRL: 1e6, 5.6 GB a seed of MinAtar's float
# observations here), 128 hidden units in the actor too (that file: 512; its critics 128).
# Budget: 1e6 env steps, that file's.
MINATAR = dict(
    sticky_action_prob=0.1,
    total_timesteps=1_000_000,
    eval_every=50_000,
    num_eval_envs=32,
    num_envs=1,
    buffer_size=100_000,
    batch_size=64,
    learning_starts=20_000,
    train_frequency=4,
    policy_lr=3e-4,
    q_lr=3e-4,
    tau=1.0,
    target_network_frequency=8_000,
    network="cnn",
    hidden_sizes=(128,),
)
PRESETS = {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

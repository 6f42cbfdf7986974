"""FastTD3: TD3 for massively parallel simulators (Seo et al. 2025, arXiv:2505.22642).

Follows younggyoseo/FastTD3 (train.py, fast_td3.py, fast_td3_utils.py, hyperparams.py at
229ed59): many parallel envs, each with its own replay ring (`buffer_size` vector steps per env)
and an equal share of every large batch; n-step returns that stop at the first episode end; a
distributional critic pair (C51 over a fixed support, the projected Bellman target) whose lower-
valued target distribution trains both critics (clipped double Q); a target critic updated by
Polyak averaging after every critic update and no target actor (the online actor picks the next
action, with a little smoothing noise); `num_updates` critic updates per vector step, the actor
every `policy_frequency`-th; exploration noise whose std each env redraws from U(std_min,
std_max) at each episode start; running observation normalisation updated from the rollout and
from every replayed batch; AdamW with weight decay 0.1; 512-256-128 actor and 1024-512-256
critics (ReLU). Truncated episodes bootstrap from their final observation, as FastTD3's patched
Playground gives it. Deviations: the n-step windows never cross the replay ring's write
position (FastTD3 marks the newest row truncated but still sums the rewards past it), and the
first update waits for n rows; observation statistics start from gym's count of 1e-4 and merge
batches by Chan et al.'s formula (FastTD3 counts from 0 and merges with the updated mean); the
actor updates after every policy_frequency-th critic update counted across vector steps
(FastTD3 counts within one; the same for its num_updates of 2 and 8); a window ending on a step
both terminated and truncated does not bootstrap (FastTD3's does); ended episodes restart from
fresh initial states (FastTD3's Playground wrapper replays each env's first); the actions map
from [-1, 1] to the env's bounds. The defaults are sized for Pendulum on a CPU; `--preset
CheetahRun` (and every other DM Control task) sets FastTD3's DM Control configuration at its
sizes, `--preset ant` (or humanoid) its MuJoCo Playground defaults on Brax.

    python algorithms/fast_td3.py --env Pendulum-v1 --num-seeds 4
    python algorithms/fast_td3.py --preset CheetahRun   # a GPU's command (the playground extra)
"""

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.buffer import ReplayBuffer
from canter.common.blocks.distributional import categorical_projection
from canter.common.blocks.normalization import RunningStats, update_stats
from canter.common.config import (
    ConfigError,
    Finite,
    NonNegative,
    NonNegativeInt,
    PositiveFraction,
    PositiveInt,
    UnitInterval,
    check_budget,
    pytree_config,
)
from canter.common.envs import PLAYGROUND_TASKS, ended_episodes, make_env, vector_step
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

ACTION_SPACE = "continuous"


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "Pendulum-v1"
    """Environment (continuous actions): a gymnax id (Pendulum-v1, ...), `playground:<Task>`
    (DM Control on MJX), `brax:<name>`, or `gymnasium:<id>`. See docs/environments.md."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 40_960
    """Env steps per seed (all envs together); rounded down to whole vector steps."""
    eval_every: PositiveInt = 4_096
    """Env steps per seed between deterministic evaluations, in whole vector steps."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per evaluation."""
    num_envs: PositiveInt = 16
    """Parallel environments per seed (FastTD3 on Playground: 1,024)."""
    buffer_size: PositiveInt = 2_560
    """Replay capacity in vector steps, one ring per env (FastTD3 on Playground: 10,240)."""
    batch_size: PositiveInt = 1_024
    """Transitions per update, batch_size // num_envs (at least 1) from each env (FastTD3:
    32,768)."""
    learning_starts: NonNegativeInt = 160
    """Updates start at the first vector step with more env steps before it (FastTD3: 10
    vector steps, so from the 12th); no random-action phase."""
    num_updates: PositiveInt = 2
    """Critic updates after each vector step; the actor updates every policy_frequency-th."""
    policy_frequency: PositiveInt = 2
    """Critic updates per actor update."""
    n_steps: PositiveInt = 1
    """Rewards summed into each target (stopping at an episode end), gamma^n on the bootstrap."""
    gamma: UnitInterval = 0.99
    """Discount factor (FastTD3 on Playground: 0.97)."""
    tau: PositiveFraction = 0.1
    """Polyak rate of the target critics, applied after every critic update."""
    learning_rate: NonNegative = 3e-4
    """AdamW learning rate of actor and critics (FastTD3's cosine schedule keeps it constant)."""
    weight_decay: NonNegative = 0.1
    """AdamW's decoupled weight decay, on every parameter."""
    num_atoms: PositiveInt = 101
    """Atoms of the critics' categorical return distribution (C51)."""
    v_min: Finite = -1_600.0
    """Lowest atom (FastTD3 on Playground: -10; CheetahRun -500)."""
    v_max: Finite = 0.0
    """Highest atom (FastTD3 on Playground: 10; CheetahRun 500)."""
    std_min: NonNegative = 0.001
    """Lowest exploration noise std (in action units of [-1, 1]) an env can draw."""
    std_max: NonNegative = 0.4
    """Highest exploration noise std; each env redraws its std at every episode start."""
    policy_noise: NonNegative = 0.001
    """Std of the noise on the next action in the target (FastTD3's default: almost none)."""
    noise_clip: NonNegative = 0.5
    """Bound on that noise."""
    actor_hidden: PositiveInt = 128
    """Width of the actor's first layer; the next two halve it (FastTD3: 512, 256, 128)."""
    critic_hidden: PositiveInt = 256
    """Width of each critic's first layer; the next two halve it (FastTD3: 1024, 512, 256)."""
    use_cdq: bool = True
    """Clipped double Q: both critics learn the lower-valued target distribution and the actor
    maximises the lower expected value; else each its own, and the actor the mean."""

    @property
    def env_steps_per_iteration(self) -> int:
        return self.num_envs

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.num_envs


# --- networks


class MLP(eqx.Module):
    """ReLU layers of widths hidden, hidden / 2, hidden / 4 (FastTD3's actor and critic), PyTorch's
    default init; `out_scale` draws the output layer's weights from N(0, out_scale^2) with zero
    bias (FastTD3's actor: 0.01)."""

    layers: tuple[eqx.nn.Linear, ...]

    def __init__(
        self, in_size: int, out_size: int, hidden: int, key: PRNGKeyArray, out_scale: float = 0.0
    ):
        keys = jax.random.split(key, 5)
        sizes = (in_size, hidden, hidden // 2, hidden // 4, out_size)
        pairs = zip(sizes[:-1], sizes[1:], keys[:4], strict=True)
        layers = [eqx.nn.Linear(i, o, key=k) for i, o, k in pairs]
        if out_scale:
            weight = out_scale * jax.random.normal(keys[4], layers[-1].weight.shape)
            layers[-1] = eqx.tree_at(
                lambda x: (x.weight, x.bias), layers[-1], (weight, jnp.zeros(out_size))
            )
        self.layers = tuple(layers)

    def __call__(self, x: Float[Array, " in_size"]) -> Float[Array, " out_size"]:
        for layer in self.layers[:-1]:
            x = jax.nn.relu(layer(x))
        return self.layers[-1](x)


class TwinCritic(eqx.Module):
    """Two distributional Q(s, a) networks (logits over the atoms), stacked, one vmapped call."""

    nets: MLP  # every leaf has a leading axis of 2

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: int, num_atoms: int, key: PRNGKeyArray
    ):
        make = lambda k: MLP(obs_dim + action_dim, num_atoms, hidden, k)  # noqa: E731
        self.nets = eqx.filter_vmap(make)(jax.random.split(key, 2))

    def __call__(
        self, obs: Float[Array, " obs_dim"], action: Float[Array, " action_dim"]
    ) -> Float[Array, "2 num_atoms"]:
        x = jnp.concatenate([obs, action])
        return eqx.filter_vmap(lambda net: net(x))(self.nets)


# --- state


class Transition(eqx.Module):
    """One vector step of every env (a replay row); `next_obs` is the final observation where an
    episode ended. `action` is the noisy action before clipping, as FastTD3 stores it."""

    obs: Float[Array, "num_envs obs_dim"]
    action: Float[Array, "num_envs action_dim"]
    reward: Float[Array, " num_envs"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_obs: Float[Array, "num_envs obs_dim"]


class Agent(eqx.Module):
    """What the updates change: actor, critics, target critics, optimiser states, statistics."""

    actor: MLP  # the policy is tanh(actor(normalised obs)) in [-1, 1]
    critic: TwinCritic
    target_critic: TwinCritic
    actor_opt_state: optax.OptState
    critic_opt_state: optax.OptState
    obs_stats: RunningStats


class TrainState(eqx.Module):
    """Everything that changes during training."""

    agent: Agent
    buffer: ReplayBuffer  # rows of Transition: [buffer_size, num_envs, ...]
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs obs_dim"]
    noise_std: Float[Array, " num_envs"]  # each env's exploration std for its current episode
    key: PRNGKeyArray


# --- losses


def sample_windows(buffer: ReplayBuffer, key: PRNGKeyArray, per_env: int, n: int) -> Transition:
    """`per_env` windows of `n` consecutive rows from each env's ring ([num_envs * per_env, n,
    ...], env-major), their starts uniform over the rows whose whole window lies between the
    oldest row and the newest (a window never crosses the write position)."""
    num_envs = jax.tree.leaves(buffer.data)[0].shape[1]
    starts = jax.random.randint(key, (num_envs, per_env), 0, jnp.maximum(buffer.size - n + 1, 1))
    oldest = (buffer.position - buffer.size) % buffer.buffer_size
    rows = (oldest + starts[..., None] + jnp.arange(n)) % buffer.buffer_size
    envs = jnp.arange(num_envs)[:, None, None]
    return jax.tree.map(
        lambda store: store[rows, envs].reshape(-1, n, *store.shape[2:]), buffer.data
    )


def n_step_target(
    reward: Float[Array, "batch n"],
    terminated: Bool[Array, "batch n"],
    truncated: Bool[Array, "batch n"],
    next_obs: Float[Array, "batch n obs_dim"],
    gamma: float | Float[Array, ""],
) -> tuple[Float[Array, " batch"], Float[Array, " batch"], Float[Array, "batch obs_dim"]]:
    """(sum_k gamma^k r_k up to and including the window's first episode end, the discount of
    the bootstrap: gamma^(steps summed), 0 where the episode terminated there, and the final
    observation it bootstraps from). A truncation ends the sum but bootstraps (FastTD3)."""
    n = reward.shape[1]
    done = jnp.logical_or(terminated, truncated)
    before = jnp.concatenate([jnp.zeros_like(done[:, :1]), done[:, :-1]], axis=1)
    alive = jnp.cumprod(1.0 - before, axis=1)  # 1 up to and including the first end
    summed = jnp.sum(alive * gamma ** jnp.arange(n) * reward, axis=1)
    last = jnp.where(done.any(axis=1), jnp.argmax(done, axis=1), n - 1)[:, None]
    ends = jnp.take_along_axis(terminated, last, axis=1)[:, 0]
    final = jnp.take_along_axis(next_obs, last[..., None], axis=1)[:, 0]
    return summed, jnp.where(ends, 0.0, gamma ** alive.sum(axis=1)), final


def critic_loss(
    critic: TwinCritic,
    obs: Float[Array, "batch obs_dim"],
    action: Float[Array, "batch action_dim"],
    target: Float[Array, "batch 2 num_atoms"],
    support: Float[Array, " num_atoms"],
) -> tuple[Array, Array]:
    """Cross-entropy of each critic's distribution against its target, summed over the two
    (FastTD3), and the mean expected Q."""
    logits = jax.vmap(critic)(obs, action)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    loss = -jnp.sum(jnp.mean(jnp.sum(target * log_probs, axis=-1), axis=0))
    return loss, jnp.mean(jnp.sum(jax.nn.softmax(logits) * support, axis=-1))


def distributional_target(
    next_probs: Float[Array, "batch 2 num_atoms"],
    target: Float[Array, " batch"],
    discount: Float[Array, " batch"],
    support: Float[Array, " num_atoms"],
    use_cdq: bool,
) -> Float[Array, "batch 2 num_atoms"]:
    """Each target critic's next distribution projected through the n-step return; with
    clipped double Q both critics learn, per sample, the projection of lower expected value."""
    project = lambda p: categorical_projection(p, target, discount, support)  # noqa: E731
    targets = jax.vmap(project, in_axes=1, out_axes=1)(next_probs)
    if not use_cdq:
        return targets
    values = jnp.sum(targets * support, axis=-1)
    lower = jnp.where((values[:, 0] < values[:, 1])[:, None], targets[:, 0], targets[:, 1])
    return jnp.stack([lower, lower], axis=1)


def normalize_obs(x: Float[Array, "*batch obs_dim"], stats: RunningStats) -> Array:
    """FastTD3's observation normalisation: (x - mean) / (std + 0.01), not clipped."""
    return (x - stats.mean) / (jnp.sqrt(stats.var) + 0.01)


def observe(stats: RunningStats, x: Float[Array, "batch obs_dim"]) -> tuple[RunningStats, Array]:
    """The statistics with `x` merged in, and `x` normalised by them (FastTD3 updates before
    it normalises, from rollouts and replayed batches alike)."""
    stats = update_stats(stats, x)
    return stats, normalize_obs(x, stats)


def noise_stds(key: PRNGKeyArray, config: Config) -> Float[Array, " num_envs"]:
    """Each env's exploration std for an episode, from U(std_min, std_max) (FastTD3)."""
    return jax.random.uniform(key, (config.num_envs,), minval=config.std_min, maxval=config.std_max)


# --- training


def to_bounds(action: Float[Array, "n action_dim"], bounds: tuple) -> Array:
    """Actions in [-1, 1] mapped linearly onto the env's [low, high]."""
    low, high = bounds
    return low + (action + 1.0) * (high - low) / 2.0


def rollout_step(
    state: TrainState, *, config: Config, env: Any, env_params: Any, bounds: tuple
) -> TrainState:
    """One vector step of every env with the noisy policy (its [-1, 1] actions clipped, then
    mapped to the env's `bounds`) into the replay rings; each env that starts a new episode
    draws its noise std afresh (FastTD3)."""
    key, noise_key, env_key, std_key = jax.random.split(state.key, 4)
    stats, obs = observe(state.agent.obs_stats, state.obs)
    mean = jnp.tanh(jax.vmap(state.agent.actor)(obs))
    action = mean + state.noise_std[:, None] * jax.random.normal(noise_key, mean.shape)
    env_action = to_bounds(jnp.clip(action, -1.0, 1.0), bounds)
    keys = jax.random.split(env_key, config.num_envs)
    next_obs, env_state, reward, terminated, truncated, info = vector_step(env)(
        keys, state.env_state, env_action, env_params
    )
    ended = jnp.logical_or(terminated, truncated)
    noise_std = jnp.where(ended, noise_stds(std_key, config), state.noise_std)
    # Stored next_obs is the pre-reset observation: truncated episodes bootstrap from it.
    row = Transition(state.obs, action, reward, terminated, truncated, info["final_observation"])
    buffer = state.buffer.add(jax.tree.map(lambda x: x[None], row))
    agent = dataclasses.replace(state.agent, obs_stats=stats)
    return TrainState(agent, buffer, env_state, next_obs, noise_std, key)


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_budget(config, config.env_steps_per_iteration)
    if config.n_steps > config.buffer_size or config.num_atoms < 2:
        raise ConfigError(
            f"n_steps = {config.n_steps} must fit in buffer_size = {config.buffer_size} rows, "
            f"and num_atoms = {config.num_atoms} be at least 2."
        )
    if isinstance(config.v_min, float) and not config.v_min < config.v_max:  # not swept
        raise ConfigError(f"v_min = {config.v_min} must be below v_max = {config.v_max}.")
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="fast_td3.py")
    obs_dim = int(env.observation_space(env_params).shape[0])
    space = env.action_space(env_params)
    action_dim = int(space.shape[0])
    low = jnp.broadcast_to(jnp.asarray(space.low, jnp.float32), (action_dim,))
    high = jnp.broadcast_to(jnp.asarray(space.high, jnp.float32), (action_dim,))
    per_env = max(1, config.batch_size // config.num_envs)  # FastTD3's share per env
    support = jnp.linspace(config.v_min, config.v_max, config.num_atoms)
    optimizer = optax.adamw(config.learning_rate, weight_decay=config.weight_decay)
    tau = config.tau

    def init(key: PRNGKeyArray) -> TrainState:
        actor_key, critic_key, env_key, std_key, key = jax.random.split(key, 5)
        actor = MLP(obs_dim, action_dim, config.actor_hidden, actor_key, out_scale=0.01)
        critic = TwinCritic(obs_dim, action_dim, config.critic_hidden, config.num_atoms, critic_key)
        opt_states = (optimizer.init(actor), optimizer.init(critic))
        agent = Agent(actor, critic, critic, *opt_states, RunningStats.create((obs_dim,)))
        keys = jax.random.split(env_key, config.num_envs)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(keys, env_params)
        zeros = jnp.zeros(config.num_envs)
        example = Transition(
            obs, jnp.zeros((config.num_envs, action_dim)), zeros, zeros > 0, zeros > 0, obs
        )
        buffer = ReplayBuffer.create(example, config.buffer_size)
        return TrainState(agent, buffer, env_state, obs, noise_stds(std_key, config), key)

    def update_critic(agent: Agent, batch: Transition, key: PRNGKeyArray) -> tuple:
        """A critic step on `batch`; the new agent, its metrics and the batch's observations as
        normalised for it (FastTD3's actor step reuses them)."""
        summed, discount, next_obs = n_step_target(
            batch.reward, batch.terminated, batch.truncated, batch.next_obs, config.gamma
        )
        stats, obs = observe(agent.obs_stats, batch.obs[:, 0])
        stats, next_obs = observe(stats, next_obs)
        noise = config.policy_noise * jax.random.normal(key, batch.action[:, 0].shape)
        noise = jnp.clip(noise, -config.noise_clip, config.noise_clip)
        next_action = jnp.clip(jnp.tanh(jax.vmap(agent.actor)(next_obs)) + noise, -1.0, 1.0)
        next_probs = jax.nn.softmax(jax.vmap(agent.target_critic)(next_obs, next_action))
        targets = distributional_target(next_probs, summed, discount, support, config.use_cdq)
        (loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(
            agent.critic, obs, batch.action[:, 0], targets, support
        )
        updates, critic_opt_state = optimizer.update(grads, agent.critic_opt_state, agent.critic)
        critic = optax.apply_updates(agent.critic, updates)
        # The target critics follow after every critic update (FastTD3: tau 0.1).
        target = jax.tree.map(lambda o, t: tau * o + (1 - tau) * t, critic, agent.target_critic)
        agent = Agent(agent.actor, critic, target, agent.actor_opt_state, critic_opt_state, stats)
        return agent, {"value_loss": loss, "q_values": q_mean}, obs

    def actor_loss(actor: MLP, critic: TwinCritic, obs: Array) -> Array:
        action = jnp.tanh(jax.vmap(actor)(obs))
        q = jnp.sum(jax.nn.softmax(jax.vmap(critic)(obs, action), axis=-1) * support, axis=-1)
        return -jnp.mean(q.min(axis=-1) if config.use_cdq else q.mean(axis=-1))

    def update_actor(agent: Agent, obs: Array) -> tuple[Agent, Array]:
        loss, grads = jax.value_and_grad(actor_loss)(agent.actor, agent.critic, obs)
        updates, actor_opt_state = optimizer.update(grads, agent.actor_opt_state, agent.actor)
        actor = optax.apply_updates(agent.actor, updates)
        return dataclasses.replace(agent, actor=actor, actor_opt_state=actor_opt_state), loss

    def update(agent: Agent, buffer: ReplayBuffer, key: PRNGKeyArray, count: Array) -> tuple:
        """Critic update number `count` (from 1, across vector steps) on a fresh batch, and the
        actor's after every policy_frequency-th (FastTD3 counts within each vector step: the
        same for its num_updates of 2 and 8)."""
        sample_key, noise_key = jax.random.split(key)
        batch = sample_windows(buffer, sample_key, per_env, config.n_steps)
        agent, stats, obs = update_critic(agent, batch, noise_key)
        due = count % config.policy_frequency == 0
        agent, pi_loss = trainer.when(due, update_actor, agent, obs)
        return agent, {**stats, "actor_loss": pi_loss}

    def learn(agent: Agent, buffer: ReplayBuffer, keys: Array, counts: Array) -> tuple:
        return jax.lax.scan(lambda a, x: update(a, buffer, *x), agent, (keys, counts))

    def step(state: TrainState, iteration: Int[Array, ""]) -> tuple[TrainState, dict]:
        bounds = (low, high)
        state = rollout_step(state, config=config, env=env, env_params=env_params, bounds=bounds)
        key, update_key = jax.random.split(state.key)
        counts = iteration * config.num_updates + jnp.arange(1, config.num_updates + 1)
        warm = iteration * config.num_envs > config.learning_starts  # FastTD3's `>`
        warm = jnp.logical_and(warm, state.buffer.size >= config.n_steps)  # whole windows
        keys = jax.random.split(update_key, config.num_updates)
        agent, stats = trainer.when(warm, learn, state.agent, state.buffer, keys, counts)
        episodes, env_state = ended_episodes(state.env_state)
        metrics = {**episodes, **jax.tree.map(jnp.nanmean, stats)}
        state = dataclasses.replace(state, agent=agent, env_state=env_state, key=key)
        return state, {**metrics, "env_steps": (iteration + 1.0) * config.num_envs}

    def act(state: TrainState, obs: Float[Array, "n obs_dim"]) -> Float[Array, "n action_dim"]:
        action = jnp.tanh(jax.vmap(state.agent.actor)(normalize_obs(obs, state.agent.obs_stats)))
        return to_bounds(action, (low, high))

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


# FastTD3's MuJoCo Playground configuration (hyperparams.py at 229ed59, MuJoCoPlaygroundArgs over
# BaseArgs): 1,024 envs, 10,240 replay rows per env, batches of 32,768, updates from the 12th
# vector step, 2 critic updates and 1 actor update per vector step, gamma 0.97, tau 0.1, AdamW lr
# 3e-4 with weight decay 0.1 (its cosine schedule ends at the same lr), noise std from U(0.001,
# 0.4), target smoothing 0.001 clipped at 0.5, 512-256-128 actor, 1024-512-256 critics, clipped
# double Q, normalised observations, 101 atoms on [-10, 10]; 150,000 vector steps (153,600,000
# env steps), evaluated every 5,000 (5,120,000 env steps) on 1,024 envs. Every DM Control task
# then takes CheetahRunArgs (3-step returns, atoms on [-500, 500], std from 0.1, smoothing 0.1),
# which FastTD3 calls its "example config for DeepMind Control Suite" that "will work for most
# DMC tasks": its code gives the class to CheetahRun alone, by name, and runs the other tasks
# with the values above (`--n-steps 1 --v-min -10 --v-max 10 --std-min 0.001 --policy-noise
# 0.001`; on CartpoleSwingup at CPU sizes they trailed it, docs/results.md). Deviations: FastTD3
# runs before its fix d2fc7e9 (2025-09-17, issue #27, which covers the paper's) drew the noise
# std from U(0.05, 0.8) whatever the config said; canter's evaluation plays fresh initial states
# each time (FastTD3's the same 1,024 every time, to the episode length), and FastTD3's bf16
# autocast is not followed (float32 throughout).
PLAYGROUND = dict(
    total_timesteps=153_600_000,
    eval_every=5_120_000,
    num_eval_envs=1_024,
    num_envs=1_024,
    buffer_size=10_240,
    batch_size=32_768,
    learning_starts=10_240,
    gamma=0.97,
    v_min=-10.0,
    v_max=10.0,
    actor_hidden=512,
    critic_hidden=1_024,
)
DM_CONTROL = dict(n_steps=3, v_min=-500.0, v_max=500.0, std_min=0.1, policy_noise=0.1)
PRESETS = {
    task: dict(PLAYGROUND, **DM_CONTROL, env=f"playground:{task}") for task in PLAYGROUND_TASKS
}
# FastTD3 has no Brax configuration; its code gives any task without a class of its own (neither
# HumanoidBench, IsaacLab nor MTBench) MuJoCoPlaygroundArgs, the values above, and so do these.
# Brax's ant and humanoid earn more per step than DM Control's 1 at most, so their discounted
# returns can pass the atoms' [-10, 10]: `--v-min`/`--v-max` widen them (FastTD3's HumanoidBench
# default: [-250, 250]). No FastTD3 number exists for them.
PRESETS |= {name: dict(PLAYGROUND, env=f"brax:{name}") for name in ("ant", "humanoid")}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

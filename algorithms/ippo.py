"""Independent PPO for cooperative teams of agents (de Witt et al. 2020, arXiv:2011.09533).

Every agent runs PPO on its own observation and its own reward, as if the others were part of
the environment; one network (actor and critic MLPs) is shared by all agents, so an update
learns from every agent's experience. Follows JaxMARL's `baselines/IPPO/ippo_ff_mpe.py` (FLAIROx/
JaxMARL at c793d09, read in docs/notes/jaxmarl-reference.md): PPO as ppo.py's (orthogonal init,
Adam eps 1e-5 after global-norm clipping, the learning rate annealed per update, advantages
normalised per minibatch, the value loss clipped by the policy's clip), separate 2x64 tanh actor
and critic MLPs, no agent id in the input, minibatches of single (agent, step) samples shuffled
across agents, and its configuration as the defaults. Deviations: a time limit is not a
termination (JaxMARL's API has no truncation signal, so its scripts cut every MPE episode, which
only ends by its limit; here a truncated episode bootstraps from the value of its final
observation, common/envs/jaxmarl.py); unavailable actions are masked where the env has masks
(SMAX), as JaxMARL's recurrent SMAX scripts do; `--agent-ids` appends a one-hot agent id to each
observation (JaxMARL's IPPO has none; MPE's speaker and listener need one to share a network).
The env is a JaxMARL team (`jaxmarl:...`, docs/environments.md); an env step is one step of the
whole team, as JaxMARL counts timesteps. The training return is the team's (the env's reward:
the agents' summed rewards in MPE) and, in SMAX, the win rate (`wins`) of the episodes ended.

    python algorithms/ippo.py --num-seeds 4  # jaxmarl:MPE_simple_spread_v3
    python algorithms/ippo.py --env jaxmarl:smax:3m --num-seeds 4
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
from canter.common.blocks.layers import MLP
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
    pytree_config,
)
from canter.common.envs import ended_episodes, make_env, vector_mask, vector_step
from canter.common.run.devices import shard_minibatch
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray, PyTree

ACTION_SPACE = "discrete"


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "jaxmarl:MPE_simple_spread_v3"
    """A JaxMARL team: `jaxmarl:<MPE env>`, `jaxmarl:smax:<map>` or
    `jaxmarl:overcooked:<layout>`. See docs/environments.md."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 1_024_000
    """Team steps per seed (every agent acts once in each); rounded down to whole iterations."""
    eval_every: PositiveInt = 102_400
    """Team steps per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 16
    """Environments (one episode each) per evaluation."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """What evaluation plays: each agent's most likely valid action ("greedy"), or a draw from
    its policy as in training ("sampled")."""
    num_envs: PositiveInt = 16
    """Parallel environments (teams) per seed."""
    num_steps: PositiveInt = 128
    """Steps per environment per rollout."""
    learning_rate: NonNegative = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 0.5
    """Global gradient-norm clipping threshold."""
    update_epochs: PositiveInt = 4
    """Passes over each rollout."""
    num_minibatches: PositiveInt = 4
    """Minibatches per epoch (of the rollout's agent steps)."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    gae_lambda: UnitInterval = 0.95
    """GAE lambda."""
    clip_coef: Positive = 0.2
    """Surrogate clipping coefficient (also clips the value update)."""
    ent_coef: NonNegative = 0.01
    """Entropy bonus coefficient."""
    vf_coef: NonNegative = 0.5
    """Value loss coefficient."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation of the MLPs' hidden layers."""
    hidden_size: PositiveInt = 64
    """Width of the hidden layers of actor and critic."""
    num_layers: PositiveInt = 2
    """Hidden layers of actor and critic (each its own MLP)."""
    agent_ids: bool = False
    """Append a one-hot agent id to each agent's observation (JaxMARL's IPPO: none)."""

    @property
    def batch_size(self) -> int:
        """Team steps per iteration."""
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


class ActorCritic(eqx.Module):
    """Separate actor (logits, output gain 0.01) and critic (value, output gain 1) MLPs, shared
    by every agent and applied to each agent's observation (with its one-hot id, `agent_ids`)."""

    actor: MLP
    critic: MLP
    agent_ids: bool = eqx.field(static=True)

    def __init__(self, obs_shape: tuple[int, int], num_actions: int, config: Config, key):
        actor_key, critic_key = jax.random.split(key)
        num_agents, obs_dim = obs_shape
        features = obs_dim + (num_agents if config.agent_ids else 0)
        activation, hidden, depth = config.activation, config.hidden_size, config.num_layers
        self.actor = MLP((features, hidden, num_actions), 0.01, actor_key, activation, depth)
        self.critic = MLP((features, hidden, 1), 1.0, critic_key, activation, depth)
        self.agent_ids = config.agent_ids

    def inputs(self, obs: Float[Array, "num_agents obs_dim"]) -> Float[Array, "num_agents ..."]:
        if not self.agent_ids:
            return obs
        return jnp.concatenate([obs, jnp.eye(obs.shape[0], dtype=obs.dtype)], axis=-1)

    def logits(self, obs: Float[Array, "num_agents obs_dim"]) -> Float[Array, "num_agents n"]:
        return jax.vmap(self.actor)(self.inputs(obs))

    def value(self, obs: Float[Array, "num_agents obs_dim"]) -> Float[Array, " num_agents"]:
        return jax.vmap(self.critic)(self.inputs(obs))[:, 0]


# --- state


class Transition(eqx.Module):
    """One rollout step of every environment: each agent's observation, action, valid actions,
    log-probability, own reward and the value of its final observation (the episode's last,
    pre-reset), and how the team's episode ended; `won` where the env reports wins (SMAX)."""

    obs: Float[Array, "num_envs num_agents obs_dim"]
    action: Int[Array, "num_envs num_agents"]
    mask: Bool[Array, "num_envs num_agents num_actions"]
    log_prob: Float[Array, "num_envs num_agents"]
    reward: Float[Array, "num_envs num_agents"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_value: Float[Array, "num_envs num_agents"]
    won: Bool[Array, " num_envs"] | None


class TrainState(eqx.Module):
    """Everything that changes during training."""

    model: ActorCritic
    opt_state: optax.OptState
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs num_agents obs_dim"]
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


def act(
    state: TrainState,
    obs: Float[Array, "n num_agents obs_dim"],
    mask: Array | None = None,
    key: PRNGKeyArray | None = None,
) -> Int[Array, "n num_agents"]:
    """Each agent's most likely valid action under the policy, or with `key` a draw from it."""
    logits = jax.vmap(state.model.logits)(obs)
    return masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_budget(config, config.batch_size)
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="ippo.py", agents=True)
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_agents, num_actions = obs_shape[0], int(env.action_space(env_params).n)
    samples = config.batch_size * num_agents  # one per agent and team step
    if samples % config.num_minibatches:
        raise ConfigError(
            f"num_minibatches = {config.num_minibatches} must divide the rollout's agent steps, "
            f"num_envs x num_steps x {num_agents} agents = {samples}."
        )
    reports_wins = getattr(env.unwrapped, "reports_wins", False)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = optax.chain(
        clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate_schedule(config), eps=1e-5),  # PPO detail: Adam eps 1e-5
    )
    gae = functools.partial(compute_gae, gamma=config.gamma, gae_lambda=config.gae_lambda)
    split = functools.partial(shuffled_minibatches, num_minibatches=config.num_minibatches)

    def init(key: PRNGKeyArray) -> TrainState:
        env_key, model_key, key = jax.random.split(key, 3)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        model = ActorCritic(obs_shape, num_actions, config, model_key)  # one for every agent
        return TrainState(model, optimizer.init(model), env_state, obs, key)

    def rollout_step(carry: tuple, _: None) -> tuple[tuple, Transition]:
        model, env_state, obs, key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        mask = valid(env_state, env_params)  # masked actions are never sampled
        action, log_prob = sample_masked(action_key, jax.vmap(model.logits)(obs), mask)
        next_obs, env_state, _, terminated, truncated, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, action, env_params
        )
        next_value = jax.vmap(model.value)(info["final_observation"])
        won = info["won"] if reports_wins else None
        reward = info["agent_rewards"]  # each agent learns from its own reward
        ends = (terminated, truncated)
        record = Transition(obs, action, mask, log_prob, reward, *ends, next_value, won)
        return (model, env_state, next_obs, key), record

    def loss_fn(model: ActorCritic, batch: tuple[Array, ...]) -> tuple[Array, dict]:
        obs, action, mask, old_log_prob, old_values, advantages, returns = batch
        logits, values = jax.vmap(model.actor)(obs), jax.vmap(model.critic)(obs)[:, 0]
        dist = distrax.Categorical(logits=masked_logits(logits, mask))  # entropy: valid actions
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        log_ratio = dist.log_prob(action) - old_log_prob
        pg_loss, clipfrac, approx_kl = policy_loss(log_ratio, advantages, config.clip_coef)
        v_loss = value_loss(values, old_values, returns, config.clip_coef, True)
        entropy = dist.entropy().mean()
        loss = pg_loss + config.vf_coef * v_loss - config.ent_coef * entropy
        stats = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy)
        return loss, {**stats, "approx_kl": approx_kl, "clipfrac": clipfrac}

    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, update_key = jax.random.split(state.key)
        carry = (state.model, state.env_state, state.obs, key)
        (_, env_state, obs, key), traj = scan(rollout_step, carry, None, config.num_steps)
        values = jax.vmap(jax.vmap(state.model.value))(traj.obs)  # [num_steps, num_envs, agents]
        # Each agent is one GAE stream; the team's episode ends end every agent's.
        per_agent = (config.num_steps, config.num_envs * num_agents)
        ends = [jnp.repeat(end, num_agents, axis=1) for end in (traj.terminated, traj.truncated)]
        flat = [x.reshape(per_agent) for x in (traj.reward, values, traj.next_value)]
        advantages, returns = (x.reshape(values.shape) for x in gae(*flat, *ends))
        # The model's inputs (with ids), one sample per agent step, shuffled across agents.
        inputs = jax.vmap(jax.vmap(state.model.inputs))(traj.obs)
        batch = (inputs, traj.action, traj.mask, traj.log_prob, values, advantages, returns)
        batch = jax.tree.map(lambda x: x.reshape((samples,) + x.shape[3:]), batch)
        model, opt_state, stats = update(state.model, state.opt_state, batch, update_key)
        episodes, env_state = ended_episodes(env_state)
        metrics = {**episodes, **jax.tree.map(jnp.mean, stats)}
        if reports_wins:  # the win rate of the episodes that ended in this rollout
            ended = jnp.sum(traj.terminated | traj.truncated)
            metrics["wins"] = jnp.where(ended > 0, jnp.sum(traj.won) / ended, jnp.nan)
        return TrainState(model, opt_state, env_state, obs, key), metrics

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


# JaxMARL's baselines/IPPO/config (c793d09) beyond its MPE defaults: ippo_rnn_smax.yaml's PPO
# (128 envs x 128 steps, lr 0.004 annealed, clip 0.05, grad norm 0.25, ReLU) on a feed-forward
# network (its GRU is not in this file), for SMAX's 3m; ippo_ff_overcooked.yaml (5e6 steps,
# 16 x 128, the MPE PPO) on cramped_room, its layout until 977191a, without its reward shaping,
# for 2,440 iterations (JaxMARL's 5e6 steps make 2,441; one fewer gives 10 whole evaluations).
SMAX = dict(
    total_timesteps=9_994_240,  # 610 iterations of 16,384, as JaxMARL's NUM_UPDATES
    eval_every=999_424,
    num_envs=128,
    learning_rate=0.004,
    clip_coef=0.05,
    max_grad_norm=0.25,
    activation="relu",
    hidden_size=128,
)
PRESETS = {
    "smax-3m": dict(SMAX, env="jaxmarl:smax:3m"),
    "smax-2s3z": dict(SMAX, env="jaxmarl:smax:2s3z"),
    "overcooked-cramped_room": dict(
        env="jaxmarl:overcooked:cramped_room", total_timesteps=4_997_120, eval_every=499_712
    ),
}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

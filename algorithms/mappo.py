"""MAPPO: PPO for cooperative teams with a centralised critic (Yu et al. 2022, arXiv:2103.01955).

Every agent acts from its own observation through one shared recurrent actor; the critic, also
recurrent and shared, values the world state (what no single agent sees: in SMAX every unit, in
MPE every agent's observation), so the value that scales each agent's advantage is learnt from
the whole team's situation while acting stays decentralised. Follows JaxMARL's
`baselines/MAPPO/mappo_rnn_mpe.py` and `mappo_rnn_smax.py` (FLAIROx/JaxMARL at c793d09, read in
docs/notes/jaxmarl-reference.md): separate actor and critic, each a ReLU embedding, a GRU and a
ReLU layer before its head (orthogonal gains sqrt 2, 2, and 0.01 or 1); each its own Adam (eps
1e-5) after its own global-norm clip, the learning rate annealed per update; the clipped
surrogate with an entropy bonus for the actor, the value loss clipped by the same clip for the
critic; minibatches of whole agent sequences, replayed from the hidden states the rollout
started with; each agent's own reward; the world state as JaxMARL's wrappers build it (SMAX:
the env's, with the agent's one-hot id, `--agent-ids`; MPE: every observation side by side),
and its MPE configuration as the defaults. Deviations: a truncated episode bootstraps from the
critic's value of the final world state (its memory going on), where JaxMARL treats every time
limit as a termination; the memories of every agent reset where the team's episode starts
(JaxMARL resets them on each agent's own done, which SMAX sets only on death, so a survivor's
memory ran on into the next episode); the GRU keeps Equinox's default init (flax's: LeCun
normal inputs, orthogonal recurrence). The return is the team's, and in SMAX the win rate
(`wins`) of the episodes ended (common/envs/jaxmarl.py).

    python algorithms/mappo.py --num-seeds 4  # jaxmarl:MPE_simple_spread_v3
    python algorithms/mappo.py --preset smax-3m --num-seeds 4
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
from canter.common.blocks.initializers import orthogonal_linear
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
from canter.common.envs import base_state, ended_episodes, make_env, vector_mask, vector_step
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
    learning_rate: NonNegative = 2e-3
    """Adam learning rate (actor's and critic's)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 0.5
    """Global gradient-norm clip, of the actor's and the critic's gradients apart."""
    update_epochs: PositiveInt = 4
    """Passes over each rollout."""
    num_minibatches: PositiveInt = 4
    """Minibatches per epoch, of whole agent sequences."""
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
    hidden_size: PositiveInt = 128
    """Width of the embeddings, the GRUs and the layers before the heads."""
    agent_ids: bool = False
    """Append the agent's one-hot id to the world state the critic reads (JaxMARL: on in SMAX,
    off in MPE)."""

    @property
    def batch_size(self) -> int:
        """Team steps per iteration."""
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


class RecurrentNet(eqx.Module):
    """A ReLU embedding (gain sqrt 2), a GRU, a ReLU layer (gain 2) and a linear head."""

    embed: eqx.nn.Linear
    cell: eqx.nn.GRUCell
    head: MLP

    def __init__(self, in_size: int, out_size: int, out_gain: float, hidden: int, key):
        keys = jax.random.split(key, 3)
        self.embed = orthogonal_linear(in_size, hidden, 2**0.5, keys[0])
        self.cell = eqx.nn.GRUCell(hidden, hidden, key=keys[1])
        self.head = MLP((hidden, hidden, out_size), out_gain, keys[2], "relu", 1, gain=2.0)

    def __call__(
        self, hidden: Float[Array, " hidden"], x: Float[Array, " in_size"], first: Bool[Array, ""]
    ) -> tuple[Float[Array, " hidden"], Float[Array, " out_size"]]:
        """One step: the memory after `x` (zeroed first where an episode starts), the output."""
        hidden = jnp.where(first, jnp.zeros_like(hidden), hidden)
        hidden = self.cell(jax.nn.relu(self.embed(x)), hidden)
        return hidden, self.head(hidden)


class MAPPONet(eqx.Module):
    """The shared actor (on an agent's observation) and the shared critic (on the world state
    as that agent's critic sees it)."""

    actor: RecurrentNet
    critic: RecurrentNet


def critic_inputs(world: Float[Array, " world_dim"], num_agents: int, ids: bool) -> Array:
    """The world state once per agent, with the agent's one-hot id (`ids`)."""
    rows = jnp.broadcast_to(world, (num_agents, world.shape[0]))
    return jnp.concatenate([rows, jnp.eye(num_agents)], axis=-1) if ids else rows


def labels(model: MAPPONet) -> MAPPONet:
    """Which optimiser each parameter belongs to: the actor's or the critic's."""
    actor = jax.tree.map(lambda _: "actor", model.actor)
    return MAPPONet(actor, jax.tree.map(lambda _: "critic", model.critic))


def team_step(net: RecurrentNet, hidden: Array, x: Array, first: Array) -> tuple[Array, Array]:
    """One step of `net` for every agent of every env ([num_envs, num_agents, ...]); where a
    team's episode starts (`first`, [num_envs]), every agent's memory resets."""
    return jax.vmap(jax.vmap(net, in_axes=(0, 0, None)))(hidden, x, first)


# --- state


class Transition(eqx.Module):
    """One rollout step of every env, per agent: the actor's and the critic's inputs, whether
    the team's episode starts there, the action, valid actions, log-probability, value, the
    agent's own reward, and the value of the final world state (the memory going on)."""

    obs: Float[Array, "num_envs num_agents obs_dim"]
    world: Float[Array, "num_envs num_agents world_in"]
    first: Bool[Array, " num_envs"]
    action: Int[Array, "num_envs num_agents"]
    mask: Bool[Array, "num_envs num_agents num_actions"]
    log_prob: Float[Array, "num_envs num_agents"]
    value: Float[Array, "num_envs num_agents"]
    reward: Float[Array, "num_envs num_agents"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_value: Float[Array, "num_envs num_agents"]
    won: Bool[Array, " num_envs"] | None


class TrainState(eqx.Module):
    """Everything that changes during training, every agent's two memories included."""

    model: MAPPONet
    opt_state: optax.OptState
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs num_agents obs_dim"]
    first: Bool[Array, " num_envs"]
    hidden: tuple[Array, Array]  # the actor's and the critic's, [num_envs, num_agents, hidden]
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


def unroll(
    net: RecurrentNet,
    hidden: Float[Array, "sequences hidden"],
    inputs: Float[Array, "num_steps sequences in_size"],
    first: Bool[Array, "num_steps sequences"],
) -> Float[Array, "num_steps sequences out_size"]:
    """The outputs of whole sequences, with the same per-step call as the rollout."""

    return jax.lax.scan(lambda h, step: jax.vmap(net)(h, *step), hidden, (inputs, first))[1]


def act(
    state: TrainState,
    obs: Float[Array, "n num_agents obs_dim"],
    hidden: Float[Array, "n num_agents hidden"],
    mask: Array | None = None,
    key: PRNGKeyArray | None = None,
) -> tuple[Int[Array, "n num_agents"], Array]:
    """Each agent's most likely valid action (with `key`, draws from its policy) and the actors'
    next memories; each evaluation env plays one episode from zero memories (`initial_carry`)."""
    first = jnp.zeros(obs.shape[:2], bool)
    hidden, logits = jax.vmap(jax.vmap(state.model.actor))(hidden, obs, first)
    action = masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]
    return action, hidden


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_budget(config, config.batch_size)
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="mappo.py", agents=True)
    num_agents, obs_dim = (int(n) for n in env.observation_space(env_params).shape)
    num_actions, sequences = int(env.action_space(env_params).n), config.num_envs * num_agents
    if sequences % config.num_minibatches:
        raise ConfigError(
            f"num_minibatches = {config.num_minibatches} must divide the rollout's agent "
            f"sequences, num_envs x {num_agents} agents = {sequences}."
        )
    reports_wins = getattr(env.unwrapped, "reports_wins", False)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    world_of = jax.vmap(lambda s: env.unwrapped.world_state(base_state(s)))
    per_agent = jax.vmap(
        functools.partial(critic_inputs, num_agents=num_agents, ids=config.agent_ids)
    )
    chain = optax.chain(  # PPO detail: Adam eps 1e-5; each network clipped apart (JaxMARL's)
        clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate_schedule(config), eps=1e-5),
    )
    optimizer = optax.multi_transform({"actor": chain, "critic": chain}, labels)
    gae = functools.partial(compute_gae, gamma=config.gamma, gae_lambda=config.gae_lambda)
    split = functools.partial(shuffled_minibatches, num_minibatches=config.num_minibatches)

    def init(key: PRNGKeyArray) -> TrainState:
        env_key, actor_key, critic_key, key = jax.random.split(key, 4)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        world_in = per_agent(world_of(env_state)).shape[-1]
        actor = RecurrentNet(obs_dim, num_actions, 0.01, config.hidden_size, actor_key)
        model = MAPPONet(actor, RecurrentNet(world_in, 1, 1.0, config.hidden_size, critic_key))
        first = jnp.ones(config.num_envs, bool)
        zeros = jnp.zeros((config.num_envs, num_agents, config.hidden_size))
        return TrainState(model, optimizer.init(model), env_state, obs, first, (zeros,) * 2, key)

    def rollout_step(carry: tuple, _: None) -> tuple[tuple, Transition]:
        model, env_state, obs, first, (actor_h, critic_h), key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        world = per_agent(world_of(env_state))
        actor_h, logits = team_step(model.actor, actor_h, obs, first)
        critic_h, value = team_step(model.critic, critic_h, world, first)
        mask = valid(env_state, env_params)  # masked actions are never sampled
        action, log_prob = sample_masked(action_key, logits, mask)
        next_obs, env_state, _, terminated, truncated, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, action, env_params
        )
        # It only matters where the episode was truncated: the critic's memory goes on.
        final_world = per_agent(info["final_world_state"])
        _, next_value = team_step(model.critic, critic_h, final_world, jnp.zeros_like(first))
        won = info["won"] if reports_wins else None
        rest = (info["agent_rewards"], terminated, truncated, next_value[..., 0], won)
        record = Transition(obs, world, first, action, mask, log_prob, value[..., 0], *rest)
        hidden = (actor_h, critic_h)  # the next step starts an episode where this one ended
        return (model, env_state, next_obs, terminated | truncated, hidden, key), record

    def loss_fn(model: MAPPONet, mb: dict[str, Array]) -> tuple[Array, dict]:
        # A minibatch holds whole agent sequences, sequence-major; `unroll` runs them time-major.
        (actor_h, critic_h), mb = mb["hidden"], {k: v for k, v in mb.items() if k != "hidden"}
        mb = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), mb)
        logits = unroll(model.actor, actor_h, mb["obs"], mb["first"])
        values = unroll(model.critic, critic_h, mb["world"], mb["first"])[..., 0]
        logits, values, mb = jax.tree.map(
            lambda x: x.reshape((-1,) + x.shape[2:]), (logits, values, mb)
        )
        dist = distrax.Categorical(logits=masked_logits(logits, mb["mask"]))  # valid actions
        advantages = (mb["advantages"] - mb["advantages"].mean()) / (mb["advantages"].std() + 1e-8)
        log_ratio = dist.log_prob(mb["action"]) - mb["log_prob"]
        pg_loss, clipfrac, approx_kl = policy_loss(log_ratio, advantages, config.clip_coef)
        v_loss = value_loss(values, mb["values"], mb["returns"], config.clip_coef, True)
        entropy = dist.entropy().mean()
        # The actor's and the critic's losses touch disjoint parameters: one sum, two optimisers.
        loss = pg_loss - config.ent_coef * entropy + config.vf_coef * v_loss
        stats = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy)
        return loss, {**stats, "approx_kl": approx_kl, "clipfrac": clipfrac}

    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, update_key = jax.random.split(state.key)
        carry = (state.model, state.env_state, state.obs, state.first, state.hidden, key)
        (_, env_state, obs, first, hidden, key), traj = jax.lax.scan(
            rollout_step, carry, None, config.num_steps
        )
        # Each agent is one GAE stream; the team's episode ends end every agent's.
        shape = (config.num_steps, sequences)
        ends = [jnp.repeat(end, num_agents, axis=1) for end in (traj.terminated, traj.truncated)]
        flat = [x.reshape(shape) for x in (traj.reward, traj.value, traj.next_value)]
        advantages, returns = gae(*flat, *ends)
        firsts = jnp.repeat(traj.first, num_agents, axis=1)
        sequences_of = dict(obs=traj.obs, world=traj.world, action=traj.action, mask=traj.mask)
        sequences_of |= dict(log_prob=traj.log_prob, values=traj.value)
        # [num_steps, num_envs, num_agents, ...] -> [num_steps, sequences, ...], then
        # sequence-major, so that a minibatch of whole sequences is a gather on the first axis.
        batch = jax.tree.map(lambda x: x.reshape(shape + x.shape[3:]), sequences_of)
        batch |= dict(first=firsts, advantages=advantages, returns=returns)
        batch = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)
        batch["hidden"] = jax.tree.map(lambda h: h.reshape(sequences, -1), state.hidden)
        model, opt_state, stats = update(state.model, state.opt_state, batch, update_key)
        episodes, env_state = ended_episodes(env_state)
        metrics = {**episodes, **jax.tree.map(jnp.mean, stats)}
        if reports_wins:  # the win rate of the episodes that ended in this rollout
            ended = jnp.sum(traj.terminated | traj.truncated)
            metrics["wins"] = jnp.where(ended > 0, jnp.sum(traj.won) / ended, jnp.nan)
        return TrainState(model, opt_state, env_state, obs, first, hidden, key), metrics

    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=act,
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.batch_size,
        initial_carry=lambda n: jnp.zeros((n, num_agents, config.hidden_size)),
    )


# --- presets


# JaxMARL's mappo_homogenous_rnn_smax.yaml (c793d09) on a map of 3 or 5 allies: 128 envs x 128
# steps (610 iterations, its NUM_UPDATES), lr 0.002 annealed, no entropy bonus, grad norm 0.25,
# the critic's world state with the agent's id. Its MAP_NAME is 2s3z; 3m is the smaller
# map at the same settings.
SMAX = dict(
    total_timesteps=9_994_240,
    eval_every=999_424,
    num_envs=128,
    ent_coef=0.0,
    max_grad_norm=0.25,
    agent_ids=True,
)
PRESETS = {f"smax-{m}": dict(SMAX, env=f"jaxmarl:smax:{m}") for m in ("3m", "2s3z")}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

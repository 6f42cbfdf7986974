"""Recurrent PPO (GRU actor-critic) for discrete actions (Schulman et al. 2017; PPO with memory).

Follows PureJaxRL's `ppo_rnn.py`: a ReLU embedding, one GRU cell shared by actor and critic,
ReLU heads, orthogonal init of the dense layers (gain sqrt(2) for the embedding, 2 for the
heads' hidden layers; the GRU keeps Equinox's default init), and its
CartPole config as defaults, except width 64 (not 128: ~5x faster on CPU) and lr 1e-3 (not
2.5e-4: needed on CartPole with hidden velocities). Minibatches are whole environment
sequences, replayed from the hidden state the rollout started with. Deviates on time limits, as
`ppo.py` does: a truncated episode bootstraps from the value of its final observation, computed
in the rollout (the memory continuing), so the rollout keeps one observation per step.

Reset convention: `first[t]` marks an observation that starts an episode (the previous step
ended one, or training just began). The hidden state entering step t is zeroed when `first[t]`,
before the cell reads `obs[t]`. The rollout stores `obs`, `first` and its initial hidden state,
so replaying it with unchanged parameters reproduces every step, across episode boundaries.

    python algorithms/ppo_rnn.py --env CartPole-v1 --num-seeds 4
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
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 500_000
    """Env steps per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 25_600
    """Env steps per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 8
    """Environments (one episode each) per evaluation."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """What evaluation plays: the most likely valid action ("greedy"), or a draw from the
    policy as in training ("sampled")."""
    num_envs: PositiveInt = 4
    """Parallel environments per seed."""
    num_steps: PositiveInt = 128
    """Steps per environment per rollout (the length of every replayed sequence)."""
    learning_rate: NonNegative = 1e-3
    """Adam learning rate (PureJaxRL: 2.5e-4; 1e-3 learns the partially observed task)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 0.5
    """Global gradient-norm clipping threshold."""
    update_epochs: PositiveInt = 4
    """Passes over each rollout."""
    num_minibatches: PositiveInt = 4
    """Minibatches per epoch; each holds num_envs / num_minibatches whole env sequences."""
    gamma: UnitInterval = 0.99
    """Discount factor."""
    gae_lambda: UnitInterval = 0.95
    """GAE lambda."""
    clip_coef: Positive = 0.2
    """Surrogate clipping coefficient (also clips the value update)."""
    clip_vloss: bool = True
    """Clip the value loss as in the PPO reference implementation."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    ent_coef: NonNegative = 0.01
    """Entropy bonus coefficient."""
    vf_coef: NonNegative = 0.5
    """Value loss coefficient."""
    hidden_size: PositiveInt = 64
    """Width of the embedding, the GRU state and the actor and critic hidden layers."""
    head_layers: PositiveInt = 1
    """Hidden layers of the actor and of the critic after the GRU (Craftax_Baselines: 2)."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


class RecurrentActorCritic(eqx.Module):
    """Embedding -> GRU -> separate actor (logits, gain 0.01) and critic (value, gain 1) heads
    of `head_layers` ReLU layers (gain 2, as PureJaxRL's and Craftax_Baselines' heads)."""

    embed: eqx.nn.Linear
    cell: eqx.nn.GRUCell
    actor: MLP
    critic: MLP

    def __init__(
        self, obs_dim: int, num_actions: int, hidden: int, head_layers: int, key: PRNGKeyArray
    ):
        keys = jax.random.split(key, 4)
        self.embed = orthogonal_linear(obs_dim, hidden, 2**0.5, keys[0])
        self.cell = eqx.nn.GRUCell(hidden, hidden, key=keys[1])
        head = functools.partial(MLP, activation="relu", depth=head_layers, gain=2.0)
        self.actor = head((hidden, hidden, num_actions), 0.01, keys[2])
        self.critic = head((hidden, hidden, 1), 1.0, keys[3])

    def __call__(
        self, hidden: Float[Array, " hidden"], obs: Float[Array, " obs_dim"], first: Bool[Array, ""]
    ) -> tuple[Float[Array, " hidden"], Float[Array, " num_actions"], Float[Array, ""]]:
        """One step: (hidden state after `obs`, logits, value); the reset convention is here."""
        hidden = jnp.where(first, jnp.zeros_like(hidden), hidden)
        hidden = self.cell(jax.nn.relu(self.embed(obs)), hidden)
        return hidden, self.actor(hidden), self.critic(hidden)[0]


def unroll(
    model: RecurrentActorCritic,
    hidden: Float[Array, "envs hidden"],
    obs: Float[Array, "num_steps envs obs_dim"],
    first: Bool[Array, "num_steps envs"],
) -> tuple[Float[Array, "num_steps envs num_actions"], Float[Array, "num_steps envs"]]:
    """Logits and values of whole sequences, with the same per-step call as the rollout."""

    def one_step(hidden: Array, step: tuple[Array, Array]) -> tuple[Array, tuple[Array, Array]]:
        hidden, logits, value = jax.vmap(model)(hidden, *step)
        return hidden, (logits, value)

    _, (logits, values) = jax.lax.scan(one_step, hidden, (obs, first))
    return logits, values


# --- state


class Transition(eqx.Module):
    """One rollout step of every env; `next_value` is the critic's value of the pre-reset final
    observation, read with the memory after `obs` (no reset); `mask` the valid actions (None
    for an env without action masks)."""

    obs: Float[Array, "num_envs obs_dim"]
    first: Bool[Array, " num_envs"]
    action: Int[Array, " num_envs"]
    mask: Bool[Array, "num_envs num_actions"] | None
    log_prob: Float[Array, " num_envs"]
    value: Float[Array, " num_envs"]
    reward: Float[Array, " num_envs"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_value: Float[Array, " num_envs"]


class TrainState(eqx.Module):
    """Everything that changes during training, the GRU state of every env included."""

    model: RecurrentActorCritic
    opt_state: optax.OptState
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs obs_dim"]
    first: Bool[Array, " num_envs"]
    hidden: Float[Array, "num_envs hidden"]
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
    check_divides(config, "num_envs", config.num_envs, "num_minibatches")
    check_budget(config, config.batch_size)
    env, env_params = make_env(config.env, action=ACTION_SPACE, algorithm="ppo_rnn.py")
    obs_dim = int(env.observation_space(env_params).shape[0])
    num_actions = int(env.action_space(env_params).n)
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
        model = RecurrentActorCritic(
            obs_dim, num_actions, config.hidden_size, config.head_layers, model_key
        )
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        first = jnp.ones(config.num_envs, bool)
        hidden = jnp.zeros((config.num_envs, config.hidden_size))
        return TrainState(model, optimizer.init(model), env_state, obs, first, hidden, key)

    def rollout_step(carry: tuple, _: None) -> tuple[tuple, Transition]:
        model, env_state, obs, first, hidden, key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        hidden, logits, value = jax.vmap(model)(hidden, obs, first)
        mask = valid(env_state, env_params)  # masked actions are never sampled
        action, log_prob = sample_masked(action_key, logits, mask)
        env_keys = jax.random.split(env_key, config.num_envs)
        next_obs, env_state, reward, terminated, truncated, info = env_step(
            env_keys, env_state, action, env_params
        )
        # It only matters where the episode was truncated: its memory goes on.
        no_reset = jnp.zeros(config.num_envs, bool)
        _, _, next_value = jax.vmap(model)(hidden, info["final_observation"], no_reset)
        transition = Transition(
            obs, first, action, mask, log_prob, value, reward, terminated, truncated, next_value
        )
        next_first = jnp.logical_or(terminated, truncated)
        return (model, env_state, next_obs, next_first, hidden, key), transition

    def loss_fn(model: RecurrentActorCritic, mb: dict[str, Array | None]) -> tuple[Array, dict]:
        # A minibatch holds whole sequences, env-major; `unroll` runs them time-major.
        hidden, mb = mb["hidden"], {name: x for name, x in mb.items() if name != "hidden"}
        mb = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), mb)
        logits, values = unroll(model, hidden, mb["obs"], mb["first"])
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), (logits, values, mb))
        logits, values, mb = flat
        dist = distrax.Categorical(logits=masked_logits(logits, mb.get("mask")))  # valid actions
        advantages = mb["advantages"]
        if config.norm_adv:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        log_ratio = dist.log_prob(mb["action"]) - mb["log_prob"]
        pg_loss, clipfrac, approx_kl = policy_loss(log_ratio, advantages, config.clip_coef)
        v_loss = value_loss(
            values, mb["values"], mb["returns"], config.clip_coef, config.clip_vloss
        )
        entropy = dist.entropy().mean()
        loss = pg_loss + config.vf_coef * v_loss - config.ent_coef * entropy
        stats = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy)
        return loss, {**stats, "approx_kl": approx_kl, "clipfrac": clipfrac}

    # One optimiser step per minibatch, `update_epochs` passes per rollout.
    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, update_key = jax.random.split(state.key)
        carry = (state.model, state.env_state, state.obs, state.first, state.hidden, key)
        (_, env_state, obs, first, hidden, key), traj = jax.lax.scan(
            rollout_step, carry, None, config.num_steps
        )
        advantages, returns = gae(
            traj.reward, traj.value, traj.next_value, traj.terminated, traj.truncated
        )
        sequences = dict(
            obs=traj.obs,
            first=traj.first,
            action=traj.action,
            mask=traj.mask,
            log_prob=traj.log_prob,
            values=traj.value,
            advantages=advantages,
            returns=returns,
        )
        # Env-major, so that a minibatch of whole sequences is a gather along the first axis.
        batch = {**jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), sequences), "hidden": state.hidden}
        model, opt_state, stats = update(state.model, state.opt_state, batch, update_key)
        residual = jnp.var(returns - traj.value)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,
            **jax.tree.map(jnp.mean, stats),
            "explained_variance": 1.0 - residual / jnp.maximum(jnp.var(returns), 1e-8),
        }
        return TrainState(model, opt_state, env_state, obs, first, hidden, key), metrics

    def act(
        state: TrainState,
        obs: Array,
        hidden: Array,
        mask: Array | None = None,
        key: PRNGKeyArray | None = None,
    ) -> tuple:
        """The most likely valid actions (with `key`, draws from the policy) and the next GRU
        state; each evaluation env plays one episode from a zero state (`initial_carry`), so
        no reset inside."""
        first = jnp.zeros(obs.shape[0], bool)
        hidden, logits, _ = jax.vmap(state.model)(hidden, obs, first)
        action = masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]
        return action, hidden

    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=act,
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.batch_size,
        initial_carry=lambda n: jnp.zeros((n, config.hidden_size)),
    )


# --- presets


# Craftax_Baselines' ppo_rnn.py at 7ce36fa (argparse defaults L496-534, the network L40-119;
# read in docs/notes/craftax-reference.md): 4 epochs x 8 minibatches of whole env sequences,
# Adam lr annealed once per update, gamma 0.99, GAE lambda 0.8, clip 0.2 (the value loss clipped
# too), entropy 0.01, value 0.5, grad norm 1, raw observations, a ReLU embedding of 512 (gain
# sqrt(2)) into a GRU of 512 shared by actor and critic heads of 2 x 512 ReLU (gain 2; outputs
# 0.01 and 1), the hidden state zeroed where an episode starts, a world generated per 16 envs
# each step for resets (canter's Craftax adapter does the same). Its defaults (1024 envs x 64
# steps, lr 2e-4) are the 1e9 configuration: `Craftax-Symbolic-v1-1e9`. No source states the
# paper's PPO-RNN 1M settings (no 1M PPO-RNN config in any CB branch); the 1M preset takes PPO's
# (algorithms/ppo.py: 256 envs x 16 steps, lr 3e-4, from CB issue #4 and CB's 1M sweeps), the
# same choice for both rows the README sets side by side. Craftax's README reports PPO-RNN at
# 2.3% of the maximum score (226) at 1e6: CB's logged training statistic (ppo_rnn.py L405-409),
# so evaluation samples from the policy, as training does. Deviations: the GRU keeps Equinox's
# default init (flax's GRUCell: LeCun-normal input and orthogonal recurrent weights); canter
# bootstraps at the 100,000-step time limit (CB never does; no episode reaches it here).
CRAFTAX = dict(
    num_eval_envs=16,
    eval_policy="sampled",
    num_minibatches=8,
    gae_lambda=0.8,
    max_grad_norm=1.0,
    hidden_size=512,
    head_layers=2,
)
CRAFTAX_1M = dict(
    CRAFTAX,
    total_timesteps=1_000_000,
    eval_every=249_856,  # 61 iterations of 4,096: 4 evaluations
    num_envs=256,
    num_steps=16,
    learning_rate=3e-4,
)
CRAFTAX_1E9 = dict(
    CRAFTAX,
    total_timesteps=1_000_000_000,
    eval_every=50_003_968,  # 763 iterations of 65,536: 20 evaluations, the last 761
    num_envs=1024,
    num_steps=64,
    learning_rate=2e-4,
)
PRESETS = {game: dict(CRAFTAX_1M, env=f"craftax:{game}") for game in CRAFTAX_GAMES}
PRESETS |= {f"{game}-1e9": dict(CRAFTAX_1E9, env=f"craftax:{game}") for game in CRAFTAX_GAMES}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

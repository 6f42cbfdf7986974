"""PPO for discrete actions (Schulman et al. 2017, arXiv:1707.06347).

Follows the implementation details of CleanRL's `ppo.py` and PureJaxRL's `ppo.py` (orthogonal
init, Adam eps 1e-5, global-norm clipping, linear lr annealing, per-minibatch advantage
normalisation, clipped value loss); the defaults are PureJaxRL's CartPole config. Deviates from
both on time limits: a truncated episode bootstraps from the value of its final observation
instead of being treated as a termination. Where an env's truncations come at least a rollout
apart (gymnax's time limits), each env keeps its truncated final observation in one slot and
the critic values the slots once per rollout; elsewhere it values every step's final
observation in the rollout, so that the rollout keeps one observation per step, not two (one
seed of the Craftax preset peaked at 7.9 GB instead of 11.7). The values of the observations
are computed once per rollout, batched, after the environment steps (the parameters do not
change during a rollout).

MinAtar (`--preset Breakout-MinAtar`, one per game) follows gymnax-blines' PPO config: a ReLU
MLP of 2x256 on the flattened 10x10xC grid; `--network cnn` puts MinAtar's convolution (16 3x3
filters, Young & Tian 2019) under both heads instead, shared as in CleanRL's Atari PPO.

    python algorithms/ppo.py --env CartPole-v1 --num-seeds 4
    python algorithms/ppo.py --preset Breakout-MinAtar --num-seeds 4
"""

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Literal

import distrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from canter.algorithms import trainer
from canter.common.blocks.clipping import clip_by_global_norm  # one sum off the CPU
from canter.common.blocks.initializers import orthogonal
from canter.common.blocks.layers import MLP, Conv2d  # Conv2d: a patch matmul on the CPU
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
from canter.common.envs import MINATAR_GAMES, ended_episodes, make_env, vector_mask, vector_step
from canter.common.envs.registry import CRAFTAX_GAMES, truncation_gap
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
    """Steps per environment per rollout."""
    rollout_unroll: PositiveInt = 1
    """Rollout steps per loop trip in a program compiled for a GPU or TPU (the CPU runs one):
    fewer, larger kernels per step, the same arithmetic, a longer compile for a large env step."""
    learning_rate: NonNegative = 2.5e-4
    """Adam learning rate."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to zero over the run."""
    max_grad_norm: PositiveOrInf = 0.5
    """Global gradient-norm clipping threshold."""
    update_epochs: PositiveInt = 4
    """Passes over each rollout."""
    num_minibatches: PositiveInt = 4
    """Minibatches per epoch."""
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
    network: Literal["mlp", "cnn"] = "mlp"
    """Torso: none (MLPs on the flat observation), or a CNN shared by actor and critic (images)."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation of the MLPs' hidden layers."""
    hidden_size: PositiveInt = 64
    """Width of the hidden layers of actor and critic."""
    num_layers: PositiveInt = 2
    """Hidden layers of actor and critic (each its own MLP)."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.batch_size


# --- networks


class ConvTorso(eqx.Module):
    """MinAtar's convolution (Young & Tian 2019): 16 3x3 filters, stride 1, no padding, ReLU;
    flattened. Orthogonal weights of gain sqrt(2), zero bias (CleanRL's Atari PPO init)."""

    conv: Conv2d

    def __init__(self, channels: int, key: PRNGKeyArray):
        conv = Conv2d(channels, 16, kernel_size=3, key=key)
        weight = orthogonal(key, (16, channels * 9), 2**0.5).reshape(conv.weight.shape)
        self.conv = eqx.tree_at(lambda c: (c.weight, c.bias), conv, (weight, conv.bias * 0))

    def __call__(self, x: Float[Array, "height width channels"]) -> Float[Array, " features"]:
        return jax.nn.relu(self.conv(jnp.transpose(x, (2, 0, 1)))).reshape(-1)  # channels-first


class ActorCritic(eqx.Module):
    """Separate actor (logits, output gain 0.01) and critic (value, output gain 1) MLPs, on the
    flat observation or on the features of one `ConvTorso` that both share."""

    torso: ConvTorso | None
    actor: MLP
    critic: MLP

    def __init__(
        self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key: PRNGKeyArray
    ):
        actor_key, critic_key = jax.random.split(key)
        self.torso, features = None, math.prod(obs_shape)
        if config.network == "cnn":
            height, width, channels = obs_shape
            self.torso = ConvTorso(channels, jax.random.fold_in(key, 2))
            features = 16 * (height - 2) * (width - 2)
        activation, hidden, depth = config.activation, config.hidden_size, config.num_layers
        self.actor = MLP((features, hidden, num_actions), 0.01, actor_key, activation, depth)
        self.critic = MLP((features, hidden, 1), 1.0, critic_key, activation, depth)

    def features(self, obs: Float[Array, "*obs_shape"]) -> Float[Array, " features"]:
        return obs.reshape(-1) if self.torso is None else self.torso(obs)

    def logits(self, obs: Float[Array, "*obs_shape"]) -> Float[Array, " num_actions"]:
        return self.actor(self.features(obs))

    def value(self, obs: Float[Array, "*obs_shape"]) -> Float[Array, ""]:
        return self.critic(self.features(obs))[0]

    def __call__(self, obs: Float[Array, "*obs_shape"]) -> tuple[Array, Array]:
        """Logits and value, with the torso computed once."""
        features = self.features(obs)
        return self.actor(features), self.critic(features)[0]


# --- state


class Transition(eqx.Module):
    """One rollout step of every environment; `next_value` is the critic's value of the
    pre-reset final observation (None where the rollout keeps final observations in slots),
    `mask` the valid actions (None for an env without masks)."""

    obs: Float[Array, "num_envs ..."]
    action: Int[Array, " num_envs"]
    mask: Bool[Array, "num_envs num_actions"] | None
    log_prob: Float[Array, " num_envs"]
    reward: Float[Array, " num_envs"]
    terminated: Bool[Array, " num_envs"]
    truncated: Bool[Array, " num_envs"]
    next_value: Float[Array, " num_envs"] | None


class TrainState(eqx.Module):
    """Everything that changes during training."""

    model: ActorCritic
    opt_state: optax.OptState
    env_state: eqx.Module  # vmapped over num_envs
    obs: Float[Array, "num_envs ..."]
    key: PRNGKeyArray


# --- losses


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


def shuffled_minibatches(key: PRNGKeyArray, num_samples: int, num_minibatches: int) -> Array:
    """A random partition of `num_samples` sample indices: `[num_minibatches, minibatch]`.

    One sort of random bits: jax.random.permutation sorts several times, and a sort of 16,384
    entries took 6.0 ms against 2.8 ms on XLA:CPU (benchmarks/README.md).
    """
    return jnp.argsort(jax.random.bits(key, (num_samples,))).reshape(num_minibatches, -1)


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
    obs: Float[Array, "n ..."],
    mask: Array | None = None,
    key: PRNGKeyArray | None = None,
) -> Array:
    """The most likely valid action under the policy, or with `key` a draw from it."""
    logits = jax.vmap(state.model.logits)(obs)
    return masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    check_divides(config, "num_envs * num_steps", config.batch_size, "num_minibatches")
    check_budget(config, config.batch_size)
    env, env_params = make_env(
        config.env,
        action=ACTION_SPACE,
        algorithm="ppo.py",
        image=config.network == "cnn",
        sticky_action_prob=config.sticky_action_prob,
    )
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    reset = jax.vmap(env.reset, in_axes=(0, None))
    env_step, valid = vector_step(env), vector_mask(env)
    optimizer = optax.chain(
        clip_by_global_norm(config.max_grad_norm),
        optax.adam(learning_rate_schedule(config), eps=1e-5),  # PPO detail: Adam eps 1e-5
    )
    # Hyperparameters bound once, so that `step` reads as the algorithm.
    gae = functools.partial(compute_gae, gamma=config.gamma, gae_lambda=config.gae_lambda)
    # A truncated episode bootstraps from the value of its final observation. If one env's
    # truncations come at least a rollout apart, each env keeps its last one in a slot and the
    # critic runs on num_envs slots per rollout, not on num_envs final observations per step
    # (8% of a MinAtar run; the same numbers: tests/test_probes.py).
    gap = truncation_gap(env, env_params)
    slots = gap is not None and config.num_steps <= gap
    split = functools.partial(shuffled_minibatches, num_minibatches=config.num_minibatches)

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, env_key, key = jax.random.split(key, 3)
        model = ActorCritic(obs_shape, num_actions, config, model_key)
        obs, env_state = reset(jax.random.split(env_key, config.num_envs), env_params)
        return TrainState(model, optimizer.init(model), env_state, obs, key)

    def rollout_step(carry: tuple, _: None) -> tuple[tuple, Transition]:
        model, env_state, obs, finals, key = carry
        key, action_key, env_key = jax.random.split(key, 3)
        mask = valid(env_state, env_params)  # masked actions are never sampled
        action, log_prob = sample_masked(action_key, jax.vmap(model.logits)(obs), mask)
        next_obs, env_state, reward, terminated, truncated, info = env_step(
            jax.random.split(env_key, config.num_envs), env_state, action, env_params
        )
        final_obs, next_value = info["final_observation"], None
        if slots:  # each env's last truncated final observation, valued after the rollout
            finals = jax.vmap(jnp.where)(truncated, final_obs, finals)
        else:
            next_value = jax.vmap(model.value)(final_obs)
        record = Transition(obs, action, mask, log_prob, reward, terminated, truncated, next_value)
        return (model, env_state, next_obs, finals, key), record

    def loss_fn(model: ActorCritic, batch: tuple[Array | None, ...]) -> tuple[Array, dict]:
        obs, action, mask, old_log_prob, old_values, advantages, returns = batch
        logits, values = jax.vmap(model)(obs)
        dist = distrax.Categorical(logits=masked_logits(logits, mask))  # entropy: valid actions
        if config.norm_adv:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        log_ratio = dist.log_prob(action) - old_log_prob
        pg_loss, clipfrac, approx_kl = policy_loss(log_ratio, advantages, config.clip_coef)
        v_loss = value_loss(values, old_values, returns, config.clip_coef, config.clip_vloss)
        entropy = dist.entropy().mean()
        loss = pg_loss + config.vf_coef * v_loss - config.ent_coef * entropy
        stats = dict(policy_loss=pg_loss, value_loss=v_loss, entropy=entropy)
        return loss, {**stats, "approx_kl": approx_kl, "clipfrac": clipfrac}

    # One optimiser step per minibatch, `update_epochs` passes per rollout.
    update = functools.partial(update_epochs, loss_fn, optimizer, split, config.update_epochs)

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, update_key = jax.random.split(state.key)
        finals = jnp.zeros_like(state.obs) if slots else None
        carry = (state.model, state.env_state, state.obs, finals, key)
        (_, env_state, obs, finals, key), traj = scan(
            rollout_step, carry, None, config.num_steps, unroll=config.rollout_unroll
        )
        # One batched critic call for the values of every observation.
        critic = jax.vmap(state.model.value)
        values = jax.vmap(critic)(traj.obs)
        next_values = traj.next_value
        if slots:  # the next step's value, or the slot's where the episode was truncated
            following = jnp.concatenate([values[1:], critic(obs)[None]])
            next_values = jnp.where(traj.truncated, critic(finals)[None], following)
        ends = (traj.terminated, traj.truncated)
        advantages, returns = gae(traj.reward, values, next_values, *ends)
        batch = (traj.obs, traj.action, traj.mask, traj.log_prob, values, advantages, returns)
        batch = jax.tree.map(lambda x: x.reshape((config.batch_size,) + x.shape[2:]), batch)
        model, opt_state, stats = update(state.model, state.opt_state, batch, update_key)
        residual = jnp.var(returns - values)
        episodes, env_state = ended_episodes(env_state)
        metrics = {
            **episodes,
            **jax.tree.map(jnp.mean, stats),
            "explained_variance": 1.0 - residual / jnp.maximum(jnp.var(returns), 1e-8),
        }
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


# gymnax-blines' MinAtar PPO (agents/<game>/ppo.yaml at 3f029d6, all games alike; Seaquest has
# none and takes the same): 64 envs x 128 steps, 4 epochs x 8 minibatches, lr 5e-4 constant (its
# schedule runs from 5e-4 to 5e-4), gamma 0.999, ReLU MLPs 2x256, 1e7 env steps, the budget of
# its published numbers (one seed, the sampled policy, so evaluation samples too); no sticky
# actions, as gymnax's MinAtar has none (MinAtar's own: 0.1).
MINATAR = dict(
    total_timesteps=10_000_000,
    eval_every=409_600,  # 50 iterations
    num_eval_envs=32,
    eval_policy="sampled",
    num_envs=64,
    num_minibatches=8,
    learning_rate=5e-4,
    anneal_lr=False,
    gamma=0.999,
    activation="relu",
    hidden_size=256,
    rollout_unroll=4,  # canter's: on a GPU 30 kernels per env step against 45 (not the CPU's)
)
PRESETS = {f"{game}-MinAtar": dict(MINATAR, env=f"{game}-MinAtar") for game in MINATAR_GAMES}

# Craftax_Baselines' ppo.py at 7ce36fa (argparse defaults L669-722, read in
# docs/notes/craftax-reference.md): 4 epochs x 8 minibatches, Adam lr annealed once per update,
# gamma 0.99, GAE lambda 0.8, clip 0.2 (the value loss clipped too), entropy 0.01, value 0.5,
# grad norm 1, raw observations, separate actor and critic MLPs of 3 x 512 tanh (orthogonal,
# gains sqrt(2), 0.01 and 1), a world generated per 16 envs each step for resets (canter's
# Craftax adapter does the same). Its defaults (1024 envs x 64 steps, lr 2e-4) are the 1e9
# configuration: `Craftax-Symbolic-v1-1e9`. The 1M preset is the paper's 1M run, 256 envs x 16
# steps (244 updates) at lr 3e-4: the command line quoted from the paper in Craftax_Baselines
# issue #4 (`--num_envs 256 --num_steps 16 --lr 3e-4 --total_timesteps 1e6`, with ICM flags),
# and the 256 x 16 of CB's own 1M sweeps (branches rnd-sweep and icm-fix: sweeps/*_1m.yaml,
# which keep lr 2e-4). Craftax's README reports PPO at 2.2% of the maximum score (226) at 1e6:
# CB's logged training statistic (ppo.py L448-452: the mean return of the episodes ended in an
# update), so evaluation samples from the policy, as training does (greedy, every policy plays
# one action everywhere at 1e6). Deviation: canter bootstraps at the 100,000-step time limit (CB
# never does; no episode reaches it at these budgets).
CRAFTAX = dict(
    num_eval_envs=16,
    eval_policy="sampled",
    num_minibatches=8,
    gae_lambda=0.8,
    max_grad_norm=1.0,
    hidden_size=512,
    num_layers=3,
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
PRESETS |= {game: dict(CRAFTAX_1M, env=f"craftax:{game}") for game in CRAFTAX_GAMES}
PRESETS |= {f"{game}-1e9": dict(CRAFTAX_1E9, env=f"craftax:{game}") for game in CRAFTAX_GAMES}

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

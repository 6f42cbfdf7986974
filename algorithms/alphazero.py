"""Gumbel AlphaZero for two-player board games (Silver et al. 2018; Danihelka et al. 2022,
"Policy improvement by planning with Gumbel", ICLR).

Follows pgx's `examples/alphazero/train.py` and `network.py` (sotetsuk/pgx at 079b2d7, the
example last changed at 18799f8): each iteration plays `selfplay_batch_size` fresh games of
pgx's game for `max_num_steps` plies, both sides choosing their moves by `mctx`'s Gumbel MuZero
policy over the true game (pgx's `step` as the search's model: the mover's reward, discount -1
between the alternating players, 0 at the end); the network (a pre-activation residual tower
with BatchNorm, a policy head and a tanh value head) then takes one pass over those positions
in minibatches, the policy trained towards the search's improved policy (mctx's
`action_weights`) by cross-entropy and the value towards the game's outcome for the player to
move by half the squared error; plain Adam. No replay: every position is used once.
The env is `pgx:<game>[-vs-<opponent>]` (common/envs/pgx.py): self-play plays pgx's game
itself, and evaluation plays the network's policy without search (masked argmax, or sampled
with `--eval-policy sampled`) against the named opponent (uniform random by default), so the
evaluation return is the mean outcome, +1 a win, 0 a draw, -1 a loss, the agent taking either
colour as pgx draws it. The training statistic (`episodic_return`) is the first mover's mean
outcome over the self-play games that ended in an iteration (perfect tic-tac-toe draws: 0).
Deviations: Equinox's BatchNorm (`mode="batch"`, momentum 0.9) keeps running averages without
Haiku's zero-debiasing and with the unbiased variance; the network is initialised from the
seed's key (pgx: PRNGKey(0) for every seed) with Equinox's defaults (Haiku: truncated normal);
a game pgx truncates (none of its board games here does) is left out of the value loss like the
unfinished last game of each row, whose outcome is unknown (pgx ignores truncation); evaluation
masks illegal moves (pgx samples from unmasked logits against its baseline models, which it
downloads at run time, so canter plays its own opponents instead); the minibatches are the
positions of one iteration in a random order, the remainder past whole minibatches left out.
The defaults are canter's tic-tac-toe configuration for a CPU (measured, docs/results.md);
`--preset go_9x9` (and othello, hex, animal_shogi, gardner_chess) is pgx's own, for a GPU.

    python algorithms/alphazero.py --env pgx:tic_tac_toe-vs-minimax --num-seeds 4
    python algorithms/alphazero.py --preset connect_four
"""

import dataclasses
import functools
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import mctx
import optax
from canter.algorithms import trainer
from canter.common.blocks.layers import Conv2d  # eqx.nn.Conv2d, a patch matmul on the CPU
from canter.common.blocks.masking import masked_argmax, masked_logits, sample_masked
from canter.common.config import (
    ConfigError,
    NonNegative,
    NonNegativeInt,
    PositiveInt,
    check_budget,
    pytree_config,
)
from canter.common.envs import make_env
from canter.common.envs.suites import PGX_PREFIX
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

ACTION_SPACE = "discrete"


@pytree_config
@dataclasses.dataclass(frozen=True)
class Config:
    env: str = "pgx:tic_tac_toe"
    """A pgx board game and the opponent evaluation plays: `pgx:<game>[-vs-<opponent>]`, the
    opponent `random` (default), `mcts<N>` or, for tic_tac_toe, `minimax`. See
    docs/environments.md."""
    seed: int = 0
    """Seed of the first run; seed i of a multi-seed run is `seed + i`."""
    num_seeds: PositiveInt = 1
    """Independent seeds trained at once (vmapped, one compiled program)."""
    total_timesteps: PositiveInt = 409_600
    """Self-play positions (plies, both players') per seed; rounded down to whole iterations."""
    eval_every: PositiveInt = 40_960
    """Positions per seed between evaluations, in whole iterations (at least one)."""
    num_eval_envs: PositiveInt = 64
    """Games (one each) per evaluation against the env's opponent."""
    eval_simulations: NonNegativeInt = 32
    """Simulations of the search evaluation plays with from the true position (the search's own
    choice, without Gumbel noise: AlphaZero as it plays); 0 plays the network's policy alone."""
    eval_policy: Literal["greedy", "sampled"] = "greedy"
    """Without search (`eval_simulations` 0): the network's most likely legal move ("greedy"),
    or a draw from its policy ("sampled")."""
    selfplay_batch_size: PositiveInt = 128
    """Games played at once in self-play; each iteration starts them afresh."""
    max_num_steps: PositiveInt = 32
    """Plies of self-play per iteration; a game that ends starts another in its place."""
    num_simulations: PositiveInt = 32
    """Simulations of the Gumbel search per move."""
    max_num_considered_actions: PositiveInt = 16
    """Actions the search's sequential halving starts from at the root (mctx's default)."""
    opening_plies: NonNegativeInt = 4
    """Plies at the start of each self-play game played uniformly at random among the legal
    moves (their positions still train on the search's improved policy), so that self-play
    meets the openings its own sharpening policy would stop playing; later plies play the
    search's choice (pgx's example: 0, the search's choice at every ply)."""
    training_batch_size: PositiveInt = 256
    """Positions per gradient step; an iteration takes one pass over its positions."""
    learning_rate: NonNegative = 1e-3
    """Adam learning rate (constant)."""
    num_channels: PositiveInt = 32
    """Channels of the residual tower."""
    num_layers: PositiveInt = 2
    """Residual blocks in the tower."""

    @property
    def env_steps_per_iteration(self) -> int:
        return self.selfplay_batch_size * self.max_num_steps

    @property
    def num_updates(self) -> int:
        return self.env_steps_per_iteration // self.training_batch_size

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // self.env_steps_per_iteration


# --- networks


class Block(eqx.Module):
    """A pre-activation residual block: x + conv(relu(bn(conv(relu(bn(x))))))."""

    norm1: eqx.nn.BatchNorm
    conv1: Conv2d
    norm2: eqx.nn.BatchNorm
    conv2: Conv2d

    def __init__(self, channels: int, key: PRNGKeyArray):
        key1, key2 = jax.random.split(key)
        self.norm1, self.norm2 = batch_norm(channels), batch_norm(channels)
        self.conv1 = Conv2d(channels, channels, 3, padding=1, key=key1)
        self.conv2 = Conv2d(channels, channels, 3, padding=1, key=key2)

    def __call__(self, x: Array, state: eqx.nn.State) -> tuple[Array, eqx.nn.State]:
        y, state = self.norm1(x, state)
        y = self.conv1(jax.nn.relu(y))
        y, state = self.norm2(y, state)
        return x + self.conv2(jax.nn.relu(y)), state


def batch_norm(channels: int) -> eqx.nn.BatchNorm:
    """pgx's BatchNorm: batch statistics in training, running averages (decay 0.9) otherwise;
    eps 1e-5. Called under `vmap(axis_name="batch")`."""
    return eqx.nn.BatchNorm(channels, "batch", momentum=0.9, mode="batch")


class AZNet(eqx.Module):
    """pgx's AlphaZero network on a game's planes (height x width x channels): a 3x3 stem,
    `num_layers` pre-activation residual blocks, BatchNorm and ReLU; the policy head a 1x1
    convolution to 2 channels, BatchNorm, ReLU and a linear layer to the logits; the value head a
    1x1 convolution to 1 channel, BatchNorm, ReLU, 128 (num_channels in pgx) ReLU units and tanh.
    Equinox's default init."""

    stem: Conv2d
    blocks: tuple[Block, ...]
    norm: eqx.nn.BatchNorm
    policy_conv: Conv2d
    policy_norm: eqx.nn.BatchNorm
    policy_out: eqx.nn.Linear
    value_conv: Conv2d
    value_norm: eqx.nn.BatchNorm
    value_hidden: eqx.nn.Linear
    value_out: eqx.nn.Linear

    def __init__(self, obs_shape: tuple[int, ...], num_actions: int, config: Config, key):
        height, width, planes = obs_shape
        channels, cells = config.num_channels, height * width
        keys = jax.random.split(key, config.num_layers + 6)
        self.stem = Conv2d(planes, channels, 3, padding=1, key=keys[0])
        self.blocks = tuple(Block(channels, k) for k in keys[6:])
        self.norm = batch_norm(channels)
        self.policy_conv = Conv2d(channels, 2, 1, key=keys[1])
        self.policy_norm = batch_norm(2)
        self.policy_out = eqx.nn.Linear(2 * cells, num_actions, key=keys[2])
        self.value_conv = Conv2d(channels, 1, 1, key=keys[3])
        self.value_norm = batch_norm(1)
        self.value_hidden = eqx.nn.Linear(cells, channels, key=keys[4])
        self.value_out = eqx.nn.Linear(channels, 1, key=keys[5])

    def __call__(
        self, obs: Float[Array, "height width planes"], state: eqx.nn.State
    ) -> tuple[tuple[Float[Array, " num_actions"], Float[Array, ""]], eqx.nn.State]:
        x = self.stem(jnp.moveaxis(obs, -1, 0))  # Equinox's convolutions are channels-first
        for block in self.blocks:
            x, state = block(x, state)
        x, state = self.norm(x, state)
        x = jax.nn.relu(x)
        p, state = self.policy_norm(self.policy_conv(x), state)
        logits = self.policy_out(jax.nn.relu(p).reshape(-1))
        v, state = self.value_norm(self.value_conv(x), state)
        v = jax.nn.relu(self.value_hidden(jax.nn.relu(v).reshape(-1)))
        return (logits, jnp.tanh(self.value_out(v)[0])), state


def forward(
    network: AZNet, norms: eqx.nn.State, obs: Float[Array, "batch ..."], train: bool = False
) -> tuple[Float[Array, "batch num_actions"], Float[Array, " batch"], eqx.nn.State]:
    """Logits and values of a batch: in training with the batch's statistics (and the running
    averages updated), otherwise with the running averages (pgx's `is_eval`)."""
    model = network if train else eqx.nn.inference_mode(network)
    batched = jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))
    (logits, value), norms = batched(obs, norms)
    return logits, value, norms


# --- state


class TrainState(eqx.Module):
    """Everything that changes during training: the network's arrays (`params`; its fixed
    parts, BatchNorm's axis name and mode flags, are the static `skeleton`), BatchNorm's running
    averages, Adam's state and the key."""

    params: AZNet
    norms: eqx.nn.State
    opt_state: optax.OptState
    key: PRNGKeyArray
    skeleton: AZNet = eqx.field(static=True)

    @property
    def network(self) -> AZNet:
        return eqx.combine(self.params, self.skeleton)


class Sample(eqx.Module):
    """One self-play position: its planes, the search's improved policy, and the outcome known
    so far (`reward` for the mover, `discount` -1 between plies, 0 where the game ended)."""

    obs: Float[Array, "..."]
    policy: Float[Array, "... num_actions"]
    reward: Float[Array, "..."]
    discount: Float[Array, "..."]
    truncated: Bool[Array, "..."]
    plies: Int[Array, "..."]  # the game's length where it ended on this ply (its rules or pgx's
    # truncation), else 0


# --- losses


def value_targets(samples: Sample) -> tuple[Float[Array, "T B"], Bool[Array, "T B"]]:
    """Each position's outcome for its player to move (v_t = r_t + discount_t v_{t+1}, the sign
    flipping every ply, from v_T = 0), and whether it is known: the game ended by its rules
    within the window (not the unfinished last game of a row, nor one pgx truncated)."""

    def back(carry: tuple, sample: Sample) -> tuple[tuple, tuple]:
        value, known = carry
        value = sample.reward + sample.discount * value
        known = jnp.where(sample.plies > 0, ~sample.truncated, known)
        return (value, known), (value, known)

    width = samples.reward.shape[1]
    start = (jnp.zeros(width), jnp.zeros(width, bool))
    _, (values, known) = jax.lax.scan(back, start, samples, reverse=True)
    return values, known


def loss_fn(network: AZNet, norms: eqx.nn.State, minibatch: tuple) -> tuple[Array, tuple]:
    """Cross-entropy to the improved policy plus half the squared value error, the latter on the
    positions of known outcome, averaged over the whole minibatch (pgx's masked mean), the
    network normalised by the minibatch's statistics; its parts and the running averages."""
    obs, policy, target, known = minibatch
    logits, values, norms = forward(network, norms, obs, train=True)
    policy_loss = optax.softmax_cross_entropy(logits, policy).mean()
    value_loss = jnp.mean(0.5 * (values - target) ** 2 * known)
    return policy_loss + value_loss, ((policy_loss, value_loss), norms)


def act(
    state: TrainState,
    obs: Float[Array, "n ..."],
    mask: Array | None = None,
    key: PRNGKeyArray | None = None,
) -> Array:
    """The network's policy without search: its most likely legal move, or (`key`) a sample."""
    logits, _, _ = forward(state.network, state.norms, obs)
    return masked_argmax(logits, mask) if key is None else sample_masked(key, logits, mask)[0]


# --- search


def search(
    game: object,
    network: AZNet,
    norms: eqx.nn.State,
    games: object,
    key: PRNGKeyArray,
    config: Config,
    num_simulations: int | None = None,
    gumbel_scale: float = 1.0,
) -> mctx.PolicyOutput:
    """mctx's Gumbel MuZero policy over pgx's true game from a batch of positions: the move to
    play (`action`) and the improved policy (`action_weights`), illegal moves excluded;
    `num_simulations` (default the config's) and `gumbel_scale` (0: no noise) for evaluation."""
    logits, value, _ = forward(network, norms, games.observation.astype(jnp.float32))
    root = mctx.RootFnOutput(prior_logits=logits, value=value, embedding=games)
    return mctx.gumbel_muzero_policy(
        (network, norms),
        key,
        root,
        functools.partial(recurrent_fn, game),
        num_simulations or config.num_simulations,
        invalid_actions=~games.legal_action_mask,
        max_num_considered_actions=config.max_num_considered_actions,
        gumbel_scale=gumbel_scale,
    )


def recurrent_fn(
    game: object, model: tuple, key: PRNGKeyArray, action: Int[Array, " batch"], games: object
) -> tuple[mctx.RecurrentFnOutput, object]:
    """The search's model: pgx's own step, the new position valued by the network for its
    player to move, which is the opponent: discount -1 turns that value into the mover's (0 at
    the game's end, where the value is 0 too); the reward is the mover's."""
    network, norms = model
    mover = games.current_player
    games = jax.vmap(game.step)(games, action)
    logits, value, _ = forward(network, norms, games.observation.astype(jnp.float32))
    reward = jnp.take_along_axis(games.rewards, mover[:, None], axis=1)[:, 0]
    logits = masked_logits(logits - logits.max(-1, keepdims=True), games.legal_action_mask)
    discount = jnp.where(games.terminated, 0.0, -1.0)
    value = jnp.where(games.terminated, 0.0, value)
    out = mctx.RecurrentFnOutput(reward=reward, discount=discount, prior_logits=logits, value=value)
    return out, games


# --- training


def make_train(config: Config) -> trainer.Train:
    """Validate `config` and build the pure training run."""
    if not config.env.startswith(PGX_PREFIX):
        raise ConfigError(
            f"alphazero.py plays pgx's two-player games, not {config.env}: use --env "
            f"{PGX_PREFIX}tic_tac_toe, {PGX_PREFIX}connect_four, ... (docs/environments.md)."
        )
    if config.num_updates < 1:
        raise ConfigError(
            f"training_batch_size = {config.training_batch_size} is larger than one iteration's "
            f"{config.env_steps_per_iteration} positions (selfplay_batch_size x max_num_steps)."
        )
    check_budget(config, config.env_steps_per_iteration)
    env, env_params = make_env(
        config.env, action=ACTION_SPACE, algorithm="alphazero.py", image=True
    )
    game = env.unwrapped.pgx  # pgx's game, both sides, for self-play and the search
    obs_shape = tuple(int(n) for n in env.observation_space(env_params).shape)
    num_actions = int(env.action_space(env_params).n)
    optimizer = optax.adam(config.learning_rate)
    batch = config.selfplay_batch_size

    def init(key: PRNGKeyArray) -> TrainState:
        model_key, key = jax.random.split(key)
        network, norms = eqx.nn.make_with_state(AZNet)(obs_shape, num_actions, config, model_key)
        params, skeleton = eqx.partition(network, eqx.is_array)
        return TrainState(params, norms, optimizer.init(params), key, skeleton)

    def selfplay_step(
        network: AZNet, norms: eqx.nn.State, games: object, key: PRNGKeyArray
    ) -> tuple[object, Sample]:
        search_key, opening_key, reset_key = jax.random.split(key, 3)
        obs = games.observation.astype(jnp.float32)
        out = search(game, network, norms, games, search_key, config)
        drawn = jax.random.categorical(opening_key, jnp.log(games.legal_action_mask))
        action = jnp.where(games._step_count < config.opening_plies, drawn, out.action)
        mover = games.current_player
        games = jax.vmap(game.step)(games, action)
        reward = jnp.take_along_axis(games.rewards, mover[:, None], axis=1)[:, 0]
        ended = games.terminated | games.truncated
        discount = jnp.where(ended, 0.0, -1.0)
        plies = jnp.where(ended, games._step_count, 0)  # pgx counts a game's plies
        sample = Sample(obs, out.action_weights, reward, discount, games.truncated, plies)
        # A game that ended starts afresh in its place (pgx's auto_reset).
        fresh = jax.vmap(game.init)(jax.random.split(reset_key, batch))
        games = jax.vmap(lambda e, f, g: jax.tree.map(lambda a, b: jnp.where(e, a, b), f, g))(
            ended, fresh, games
        )
        return games, sample

    def update(skeleton: AZNet, carry: tuple, minibatch: tuple) -> tuple[tuple, tuple]:
        params, norms, opt_state = carry
        network = eqx.combine(params, skeleton)
        grads, (parts, norms) = eqx.filter_grad(loss_fn, has_aux=True)(network, norms, minibatch)
        updates, opt_state = optimizer.update(eqx.filter(grads, eqx.is_array), opt_state)
        return (eqx.apply_updates(params, updates), norms, opt_state), parts

    def step(state: TrainState, iteration: Array) -> tuple[TrainState, dict[str, Array]]:
        key, start_key, play_key, shuffle_key = jax.random.split(state.key, 4)
        games = jax.vmap(game.init)(jax.random.split(start_key, batch))
        play = functools.partial(selfplay_step, state.network, state.norms)
        _, samples = jax.lax.scan(play, games, jax.random.split(play_key, config.max_num_steps))
        targets, known = value_targets(samples)
        # One pass over the iteration's positions in a random order, whole minibatches.
        data = (samples.obs, samples.policy, targets, known)
        flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), data)
        order = jax.random.permutation(shuffle_key, config.env_steps_per_iteration)
        used = order[: config.num_updates * config.training_batch_size]
        minibatches = jax.tree.map(
            lambda x: x[used].reshape(config.num_updates, -1, *x.shape[1:]), flat
        )
        carry = (state.params, state.norms, state.opt_state)
        (params, norms, opt_state), (policy_loss, value_loss) = jax.lax.scan(
            functools.partial(update, state.skeleton), carry, minibatches
        )
        metrics = dict(
            selfplay_statistics(samples),
            policy_loss=policy_loss.mean(),
            value_loss=value_loss.mean(),
            env_steps=((iteration + 1) * config.env_steps_per_iteration).astype(jnp.float32),
        )
        return TrainState(params, norms, opt_state, key, state.skeleton), metrics

    def play(state: TrainState, obs: Array, mask: Array | None = None, **more: object) -> Array:
        """Evaluation's move: the search's choice from the true position (the env's state)."""
        if not config.eval_simulations:
            return act(state, obs, mask, **more)
        games = more["env_state"].game
        key = jax.random.key(0)  # unused without Gumbel noise
        out = search(
            game, state.network, state.norms, games, key, config, config.eval_simulations, 0.0
        )
        return out.action

    return trainer.Train.from_config(
        config,
        init=init,
        step=step,
        act=play,
        plans=config.eval_simulations > 0,
        env=env,
        env_params=env_params,
        env_steps_per_iteration=config.env_steps_per_iteration,
    )


def selfplay_statistics(samples: Sample) -> dict[str, Float[Array, ""]]:
    """Of the self-play games that ended: the first mover's mean outcome (`episodic_return`),
    their mean length in plies (`episodic_length`) and their number (`episodes`)."""
    length = samples.plies
    ended = length > 0
    count = ended.sum()
    # The reward of the ply that ended a game is its last mover's outcome; moves alternate, so
    # the first mover made that ply where the game took an odd number of plies.
    first_mover = jnp.where(length % 2 == 1, samples.reward, -samples.reward)
    some = count > 0
    per = 1.0 / jnp.maximum(count, 1)
    return {
        "episodic_return": jnp.where(some, jnp.sum(first_mover * ended) * per, jnp.nan),
        "episodic_length": jnp.where(some, jnp.sum(length * ended) * per, jnp.nan),
        "episodes": count.astype(jnp.float32),
    }


# --- presets


# pgx's examples/alphazero/train.py (079b2d7) Config, the one configuration behind its README's
# Elo curves (animal_shogi, gardner_chess, go_9x9, hex, othello: each above pgx's baseline model
# after about 2e7-5e7 frames): 1024 games x 256 plies (262,144 positions) per iteration, 32
# simulations, 64 steps of 4,096, Adam 1e-3, 6 blocks of 128 channels, 400 iterations (1.05e8
# positions). A GPU's configuration: one iteration takes hours on a 2-core CPU.
PGX = dict(
    total_timesteps=104_857_600,
    eval_every=1_310_720,  # 5 iterations, pgx's eval_interval
    num_eval_envs=1024,
    selfplay_batch_size=1024,
    max_num_steps=256,
    num_simulations=32,
    training_batch_size=4096,
    opening_plies=0,
    learning_rate=1e-3,
    num_channels=128,
    num_layers=6,
)
PGX_GAMES = ("go_9x9", "othello", "hex", "animal_shogi", "gardner_chess")
# canter's Connect Four for a CPU (pgx publishes no configuration for it): pgx's iteration shape
# scaled down (256 games x 64 plies, 64 steps of 256), 4 blocks of 64 channels; measured in
# docs/results.md.
CONNECT_FOUR = dict(
    env="pgx:connect_four",
    total_timesteps=1_638_400,  # 100 iterations of 16,384
    eval_every=163_840,
    selfplay_batch_size=256,
    max_num_steps=64,
    training_batch_size=256,
    num_channels=64,
    num_layers=4,
)
PRESETS = {game: dict(PGX, env=f"{PGX_PREFIX}{game}") for game in PGX_GAMES}
PRESETS["connect_four"] = CONNECT_FOUR

if __name__ == "__main__":
    trainer.cli(Config, make_train, PRESETS)

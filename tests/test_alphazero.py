"""AlphaZero: value targets and self-play statistics against loops, the search on positions of
known value (the move, the improved policy from its visits, the sign of the opponent's value),
masks, the run's invariants, resume, the CLI, and tic-tac-toe against the perfect player."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.config import ConfigError

from tests.checks import (
    assert_evaluates_and_renders,
    assert_resume_equals_whole_run,
    cli_run,
    needs,
)

pytestmark = needs("pgx", "pgx")


def alphazero():
    from canter.algorithms import alphazero

    return alphazero


# --- math against loops


def random_samples(seed: int = 0, plies: int = 9, width: int = 3):
    """Self-play records of random games: each row a run of games, each ending at random."""
    az = alphazero()
    rng = np.random.default_rng(seed)
    ended = rng.random((plies, width)) < 0.3
    truncated = ended & (rng.random((plies, width)) < 0.3)
    reward = np.where(ended & ~truncated, rng.choice([-1.0, 0.0, 1.0], (plies, width)), 0.0)
    discount = np.where(ended, 0.0, -1.0)
    length = np.zeros((plies, width), np.int32)  # each game's length where it ended
    for b in range(width):
        start = 0
        for t in range(plies):
            if ended[t, b]:
                length[t, b], start = t - start + 1, t + 1
    obs = np.zeros((plies, width, 1))
    policy = np.zeros((plies, width, 2))
    arrays = (obs, policy, reward, discount, truncated, length)
    return az.Sample(*map(jnp.asarray, arrays)), (reward, ended, truncated, length)


def test_value_targets_flip_sign_each_ply_and_know_only_ended_games():
    az = alphazero()
    samples, (reward, ended, truncated, _) = random_samples()
    values, known = az.value_targets(samples)
    plies, width = reward.shape
    for b in range(width):
        for t in range(plies):
            # Walk forward to the game's last ply: its reward, negated once per ply between.
            end = next((u for u in range(t, plies) if ended[u, b]), None)
            expected = 0.0 if end is None else reward[end, b] * (-1.0) ** (end - t)
            assert values[t, b] == pytest.approx(expected), (t, b)
            assert bool(known[t, b]) == (end is not None and not truncated[end, b]), (t, b)


def test_selfplay_statistics_are_the_first_movers_outcomes():
    az = alphazero()
    samples, (reward, ended, _, length) = random_samples(seed=1, plies=12, width=4)
    stats = az.selfplay_statistics(samples)
    # The last mover is the first where the game took an odd number of plies.
    outcomes = [
        reward[t, b] * (1 if length[t, b] % 2 else -1)
        for t, b in zip(*np.nonzero(ended), strict=True)
    ]
    assert float(stats["episodes"]) == len(outcomes) > 0
    assert float(stats["episodic_return"]) == pytest.approx(np.mean(outcomes))
    assert float(stats["episodic_length"]) == pytest.approx(length[ended].mean())


# --- the search on positions of known value


def constant_network(config, value: float):
    """A network whose policy is uniform (logits 0) and whose value is `value` everywhere."""
    az = alphazero()
    network, norms = eqx.nn.make_with_state(az.AZNet)((3, 3, 2), 9, config, jax.random.key(0))
    zero = lambda x: jnp.zeros_like(x)  # noqa: E731
    network = eqx.tree_at(
        lambda n: (n.policy_out.weight, n.policy_out.bias, n.value_out.weight),
        network,
        replace_fn=zero,
    )
    network = eqx.tree_at(lambda n: n.value_out.bias, network, jnp.full((1,), np.arctanh(value)))
    return network, norms


def position(moves):
    import pgx

    game = pgx.make("tic_tac_toe")
    state = game.init(jax.random.key(0))
    for move in moves:
        state = game.step(state, move)
    return game, jax.tree.map(lambda x: x[None], state)


def test_the_search_plays_the_win_and_its_target_follows_its_visits():
    az = alphazero()
    config = az.Config(num_simulations=5)  # one visit to each of the 5 legal moves
    network, norms = constant_network(config, 0.25)
    # The first colour (to move) holds 0 and 1 against 3 and 4: 2 wins; 5 legal moves.
    game, games = position([0, 3, 1, 4])
    out = jax.jit(lambda key: az.search(game, network, norms, games, key, config))(
        jax.random.key(0)
    )  # compiled: the search's eager ops took 17 s
    assert int(out.action[0]) == 2
    weights = np.asarray(out.action_weights[0])
    legal = np.asarray(games.legal_action_mask[0])
    assert (weights[~legal] == 0).all() and weights.argmax() == 2
    # Every child's value from the mover's side: the win +1 (reward 1, the game over), every
    # other move -0.25 (the opponent to move, valued 0.25 for itself: discount -1).
    tree = out.search_tree
    visits = np.asarray(tree.children_visits[0, 0])
    q = np.asarray(tree.qvalues(jnp.zeros(1, jnp.int32))[0])
    assert (visits[legal] == 1).all()
    np.testing.assert_allclose(q[legal], np.where(np.flatnonzero(legal) == 2, 1.0, -0.25))
    # The improved policy by hand (mctx's completed Q with its defaults): softmax over the legal
    # moves of prior logits (0) + (50 + max visits) x 0.1 x q rescaled to [0, 1].
    scaled = (q[legal] - q[legal].min()) / (q[legal].max() - q[legal].min())
    logits = (50 + visits.max()) * 0.1 * scaled
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    np.testing.assert_allclose(weights[legal], expected, rtol=1e-4)


def test_the_model_gives_the_movers_reward_and_negates_the_next_players_value():
    az = alphazero()
    config = az.Config()
    network, norms = constant_network(config, 0.5)
    game, games = position([0, 3, 1, 4])
    both = jax.tree.map(lambda x: jnp.concatenate([x, x]), games)
    out, after = az.recurrent_fn(game, (network, norms), jax.random.key(0), jnp.array([2, 5]), both)
    np.testing.assert_allclose(out.reward, [1.0, 0.0])  # the mover's win; nothing yet
    np.testing.assert_allclose(out.discount, [0.0, -1.0])
    np.testing.assert_allclose(out.value, [0.0, 0.5], atol=1e-6)  # a finished game is worth 0
    # The next position's illegal moves are masked in its prior.
    assert (np.asarray(out.prior_logits[1])[~np.asarray(after.legal_action_mask[1])] < -1e30).all()


# --- the run's invariants

TINY = dict(
    total_timesteps=3 * 8 * 12,
    eval_every=8 * 12,
    num_eval_envs=4,
    selfplay_batch_size=8,
    max_num_steps=12,
    num_simulations=4,
    max_num_considered_actions=4,
    training_batch_size=32,
    num_channels=8,
    num_layers=1,
)


@pytest.fixture(scope="module")
def vmapped():
    from canter.algorithms import trainer

    az = alphazero()
    train = az.make_train(az.Config(**TINY))  # evaluation searches (`Train.plans`)
    return jax.jit(jax.vmap(train))(trainer.seed_keys(0, 2))


def test_leaves_metrics_updates_and_seeds(vmapped):
    state, metrics = vmapped
    train = metrics["train"]
    assert {"policy_loss", "value_loss", "episodic_return", "episodes"} <= set(train)
    assert np.isfinite(train["policy_loss"]).all() and np.isfinite(train["value_loss"]).all()
    # 3 iterations of 96 positions, 3 steps of 32 each.
    assert int(state.opt_state[0].count[0]) == 9
    weights = state.params.stem.weight
    assert not np.allclose(weights[0], weights[1])  # seeds differ
    outcomes = metrics["eval"]["episodic_return"]
    assert ((outcomes >= -1) & (outcomes <= 1)).all()
    # BatchNorm's running averages moved from their start (mean 0).
    running = [leaf for leaf in jax.tree.leaves(state.norms) if leaf.ndim == 2]
    assert any(np.abs(np.asarray(leaf)).max() > 0 for leaf in running)


def test_evaluation_plays_the_searchs_move_from_the_true_position():
    """With eval_simulations the evaluation's `act` searches from the env's own states (the
    runner passes them: `Train.plans`); without, it plays the network's policy."""
    from canter.common.envs import base_state, make_env

    az = alphazero()
    config = az.Config(**TINY, eval_simulations=5)
    train = az.make_train(config)
    assert train.plans and not az.make_train(az.Config(**TINY, eval_simulations=0)).plans
    state = train.init(jax.random.key(0))
    network, norms = constant_network(config, 0.25)
    state = eqx.tree_at(
        lambda s: (s.params, s.norms), state, (eqx.filter(network, eqx.is_array), norms)
    )
    # The agent (the first colour) holds 0 and 1 against 3 and 4: the search finds 2.
    env, params = make_env("pgx:tic_tac_toe", image=True)
    _, env_state = env.reset(jax.random.key(0), params)
    bare = base_state(env_state)
    game, games = position([0, 3, 1, 4])
    bare = jax.tree.map(
        lambda x: x[None], eqx.tree_at(lambda v: v.game, bare, jax.tree.map(lambda x: x[0], games))
    )
    obs = games.observation.astype(jnp.float32)
    mask = games.legal_action_mask
    assert int(train.act(state, obs, mask, env_state=bare)[0]) == 2
    # Without the search: the uniform policy's first legal move.
    np.testing.assert_array_equal(az.act(state, obs, mask), [np.flatnonzero(mask[0])[0]])


def test_act_plays_legal_moves_only(vmapped):
    az = alphazero()
    state, _ = vmapped
    one = jax.tree.map(lambda x: x[0], state)
    obs = jnp.zeros((2, 3, 3, 2))
    mask = jnp.array([[False] * 8 + [True], [True] + [False] * 8])
    assert np.asarray(az.act(one, obs, mask)).tolist() == [8, 0]
    sampled = az.act(one, obs, mask, key=jax.random.key(0))
    assert np.asarray(sampled).tolist() == [8, 0]


def test_bad_configs_are_refused_before_compiling():
    az = alphazero()
    with pytest.raises(ConfigError, match="alphazero.py plays pgx's two-player games"):
        az.make_train(az.Config(env="CartPole-v1"))
    with pytest.raises(ConfigError, match="training_batch_size = 8192 is larger"):
        az.make_train(az.Config(training_batch_size=8192))


# --- resume, command line


@pytest.mark.slow  # three runs compile: about 40 s
def test_resume_equals_the_whole_run(tmp_path):
    az = alphazero()
    config = az.Config(**TINY, num_seeds=2)
    assert_resume_equals_whole_run(config, az.make_train, "alphazero", tmp_path)


@pytest.mark.slow  # a CLI run, evaluation and a GIF of the board
def test_cli_run_then_evaluate_and_render(tmp_path, monkeypatch, capsys):
    args = [f"--{k.replace('_', '-')}={v}" for k, v in TINY.items()]
    run = tmp_path / "run"
    done = cli_run(
        "alphazero", monkeypatch, capsys, *args, "--num-seeds", "2", "--run-dir", str(run)
    )
    assert done.returncode == 0, done.stderr
    assert_evaluates_and_renders(run, tmp_path / "game.gif", 2)


# --- learning


@pytest.mark.learning_extra  # 4 seeds of the defaults: about 10 min on 2 cores
def test_tic_tac_toe_never_loses_to_the_perfect_player():
    from canter.algorithms import trainer

    from benchmarks.returns import pgx_opponents

    az = alphazero()
    # The defaults (canter's CPU configuration), 4 seeds; each seed's final network with its
    # evaluation search plays 64 games as each colour against the perfect player, which cannot
    # lose: a mean below 0 is a lost game, a failure (docs/results.md, board games: 0 on every
    # seed and colour over 128 games).
    config = az.Config(env="pgx:tic_tac_toe-vs-minimax", num_seeds=4)
    result = trainer.run(config, az.make_train, algo="alphazero", verbose=False)
    train = az.make_train(config)
    for colour in (0, 1):
        outcomes = pgx_opponents.outcomes(train, result.state, "minimax", colour, 64)
        assert (np.asarray(outcomes) == 0).all(), (colour, outcomes)

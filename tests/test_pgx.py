"""pgx's board games against a fixed opponent (common/envs/pgx.py): colours, rewards, masks,
the perfect tic-tac-toe player, the MCTS opponent and the refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from canter.common.config import ConfigError

from tests.checks import needs

pytestmark = needs("pgx", "pgx")


def board(cells: str) -> np.ndarray:
    """A tic-tac-toe board from 9 characters (`.` empty, `x` the first colour, `o` the second)
    in pgx's encoding (-1 empty, 0 and 1 the colours)."""
    return np.array([{".": -1, "x": 0, "o": 1}[c] for c in cells], np.int32)


def index(cells: str) -> int:
    return int(sum((v + 1) * 3**i for i, v in enumerate(board(cells))))


def test_solved_tic_tac_toe_knows_wins_blocks_and_the_draw():
    from canter.common.envs import pgx as adapter

    best = adapter.solve_tic_tac_toe()
    assert best[index(".........")].all()  # every first move keeps the draw
    # x to move with two in the top row: only the win keeps the best outcome.
    assert np.flatnonzero(best[index("xx.oo....")]).tolist() == [2]
    # o to move, x threatens the top row: only the block keeps the draw; a corner opening
    # leaves o one move that draws, the centre.
    assert np.flatnonzero(best[index("xx..o....")]).tolist() == [2]
    assert np.flatnonzero(best[index("x........")]).tolist() == [4]
    assert not best[index("xxxoo....")].any()  # the game is over
    # A loop over the same positions: best moves are legal, and every legal move is best or not.
    for cells in ("x...o....", "x.o.x....", "xo.......", "xoxo....."):
        legal = board(cells) == -1
        assert best[index(cells)].any() and not (best[index(cells)] & ~legal).any()


@pytest.fixture(scope="module")
def games():
    """64 episodes of a uniformly random agent against each opponent, as in evaluation."""
    from canter.common.envs import make_env, vector_mask, vector_step

    def play(name: str, n: int = 64, plies: int = 25):
        env, params = make_env(name, action="discrete")
        reset, step, valid = jax.vmap(env.reset, (0, None)), vector_step(env), vector_mask(env)

        def run(key):
            obs, state = reset(jax.random.split(key, n), params)
            first = obs

            def body(carry, key):
                obs, state, ret, done, illegal = carry
                mask = valid(state, params)
                action_key, step_key = jax.random.split(key)
                logits = jnp.where(mask, 0.0, -jnp.inf)
                action = jax.random.categorical(action_key, logits)
                illegal = illegal | ~jnp.take_along_axis(mask, action[:, None], 1)[:, 0]
                obs, state, reward, term, trunc, _ = step(
                    jax.random.split(step_key, n), state, action, params
                )
                ret = ret + jnp.where(done, 0.0, reward)
                return (obs, state, ret, done | term | trunc, illegal), None

            start = (obs, state, jnp.zeros(n), jnp.zeros(n, bool), jnp.zeros(n, bool))
            (_, _, ret, done, illegal), _ = jax.lax.scan(body, start, jax.random.split(key, plies))
            return first, ret, done, illegal

        return jax.jit(run)(jax.random.key(0))

    return {name: play(name) for name in ("pgx:tic_tac_toe", "pgx:tic_tac_toe-vs-minimax")}


def test_random_agents_finish_with_outcomes_and_both_colours(games):
    first, returns, done, illegal = games["pgx:tic_tac_toe"]
    assert done.all() and not illegal.any()
    assert set(np.unique(returns)) <= {-1.0, 0.0, 1.0}
    # pgx draws who moves first: the agent sees an empty board (it moves first) or one mark.
    marks = np.asarray(first).reshape(64, 9, 2).sum(axis=(1, 2))
    assert set(np.unique(marks)) == {0.0, 1.0} and 16 < (marks == 0).sum() < 48
    # The planes are the agent's pieces then the opponent's: the first mark is the opponent's.
    assert np.asarray(first).reshape(64, 9, 2)[marks == 1][:, :, 0].sum() == 0


def test_the_perfect_player_never_loses(games):
    _, returns, done, _ = games["pgx:tic_tac_toe-vs-minimax"]
    assert done.all() and (np.asarray(returns) <= 0).all()
    assert (np.asarray(returns) < 0).mean() > 0.7  # and punishes random play


def test_a_step_is_the_agents_move_and_the_opponents_reply():
    from canter.common.envs.pgx import Versus

    env = Versus("tic_tac_toe", "minimax", colour=0)
    params = env.default_params
    obs, state = env.reset(jax.random.key(1), params)
    assert np.asarray(obs).sum() == 0  # the agent moves first: an empty board
    obs, state, reward, terminated, truncated, info = env.step(jax.random.key(2), state, 4, params)
    # The agent's mark in the centre and the opponent's one reply, the agent to move again.
    planes = np.asarray(obs).reshape(9, 2)
    assert planes[4, 0] == 1 and planes[:, 0].sum() == 1 and planes[:, 1].sum() == 1
    assert float(reward) == 0.0 and not terminated and not truncated
    assert int(state.game.current_player) == int(state.agent)
    assert not np.asarray(info["final_action_mask"])[4]  # the centre is taken
    second = Versus("tic_tac_toe", "random", colour=1)
    obs, _ = second.reset(jax.random.key(1), params)
    assert np.asarray(obs)[..., 1].sum() == 1  # the opponent has moved first


def test_an_illegal_move_loses_and_a_winning_one_wins():
    from canter.common.envs.pgx import Versus, VersusState

    env = Versus("tic_tac_toe", "random", colour=0)
    params = env.default_params
    _, state = env.reset(jax.random.key(0), params)
    _, after, *_ = env.step(jax.random.key(1), state, 0, params)
    _, _, reward, terminated, *_ = env.step(jax.random.key(2), after, 0, params)  # taken
    assert float(reward) == -1.0 and bool(terminated)
    # x (the agent) holds 0 and 1 against o's 3 and 4: 2 wins at once.
    game = state.game
    for move in (0, 3, 1, 4):
        game = env.pgx.step(game, move)
    state = VersusState(game, state.agent, state.time, state.truncated)
    _, _, reward, terminated, *_ = env.step(jax.random.key(3), state, 2, params)
    assert float(reward) == 1.0 and bool(terminated)


@pytest.mark.slow  # 512 simulations of random playouts, five times: about 10 s
def test_mcts_opponent_takes_a_win_and_blocks_a_loss():
    import pgx
    from canter.common.envs.pgx import mcts_opponent

    game = pgx.make("tic_tac_toe")

    def position(moves):
        state = game.init(jax.random.key(0))
        for move in moves:
            state = game.step(state, move)
        return state

    # The mover (the first colour) has 0 and 1: 2 wins, found by 64 simulations. The second
    # colour, to move against that threat, must block at 2: 64 simulations of random playouts
    # miss it on 2 keys of 5 (256: 1), 512 block on each.
    keys = jax.random.split(jax.random.key(3), 5)
    win = jax.vmap(mcts_opponent(game, 64), (0, None))(keys, position([0, 4, 1, 8]))
    block = jax.vmap(mcts_opponent(game, 512), (0, None))(keys, position([0, 4, 1]))
    assert np.asarray(win).tolist() == [2] * 5 and np.asarray(block).tolist() == [2] * 5


def test_bad_names_are_refused_before_building():
    from canter.common.envs import make_env

    with pytest.raises(ConfigError, match="Unknown pgx game 'connect4'"):
        make_env("pgx:connect4")
    with pytest.raises(ConfigError, match="Unknown pgx opponent 'alphabeta'"):
        make_env("pgx:tic_tac_toe-vs-alphabeta")
    with pytest.raises(ConfigError, match="minimax opponent is solved for tic_tac_toe only"):
        make_env("pgx:connect_four-vs-minimax")
    with pytest.raises(ConfigError, match="mcts<N>"):
        make_env("pgx:connect_four-vs-mcts0")


def test_frames_draw_the_board():
    from canter.common.envs.pgx import Versus

    env = Versus("connect_four", "random")
    params = env.default_params
    _, state = env.reset(jax.random.key(0), params)
    _, later, *_ = env.step(jax.random.key(1), state, 3, params)
    frames = env.frames([state, later], size=140)
    assert frames[0].shape == (120, 140, 3) and not np.array_equal(frames[0], frames[1])
    with pytest.raises(ConfigError, match="has no frames"):
        Versus("chess", "random").frames([state])

"""pgx's board games (Koyamada et al. 2023) as one player's env against a fixed opponent.

`--env pgx:connect_four` is Connect Four played against a uniformly random opponent;
`pgx:connect_four-vs-mcts128` against a plain Monte Carlo tree search of 128 simulations;
`pgx:tic_tac_toe-vs-minimax` against a perfect player. The `pgx` extra (`pip install -e
".[pgx]"`, pgx 2.6.0) provides the games, mctx (a core dependency) the MCTS opponent's search.
This adapter gives every two-player game gymnax's `Environment` interface from one player's
side, so that:

- **any discrete algorithm trains against the opponent** (ppo.py, dqn.py, ...), and
- **a self-play algorithm** (alphazero.py, which plays both sides of pgx's game itself) is
  **evaluated** against it: the episode's return is the game's outcome for the agent, +1 a win,
  0 a draw, -1 a loss, so the runner's evaluation return is the mean outcome against that
  opponent (docs/design.md, "Environments").

The game, step by step:

- **Colours.** pgx's `init` draws which player moves first; the agent is player 0, so it plays
  first in about half of the episodes and second in the rest (`colour=None`). `Versus(game,
  opponent, colour=0)` (or 1) always gives the agent the first (second) move, for an
  evaluation per colour (benchmarks/returns/pgx_opponents.py).
- **A step** is the agent's move and then the opponent's replies until the agent is to move
  again or the game ends; its reward is the agent's share of pgx's `rewards` over those moves
  (nonzero only on the move that ends the game). An illegal move ends the game with -1 (pgx's
  rule); the mask below keeps the algorithms off them.
- **Observations** are pgx's, from the agent's side (`observe(state, agent)`: for the board
  games planes of the agent's and the opponent's pieces, H x W x C), as floats.
- **Action masks** are pgx's `legal_action_mask` (`action_mask(state, params)`), and
  `info["final_action_mask"]` for the state a step led to.
- **Terminated and truncated apart.** A game that ends by its rules is terminated; a game pgx
  cuts at its own move limit (Go, the shogis, chess) is truncated, and so is one reaching
  `max_steps_in_episode` agent moves (1,000), which none of the offered games reaches first.

Opponents (`-vs-<name>`; none named is `random`):

- `random`: a legal move uniformly at random.
- `mcts<N>`: PUCT search (mctx's `muzero_policy`) over pgx's true game with N simulations, a
  uniform prior over the legal moves, each new node valued by one uniformly random playout to
  the game's end (classic Monte Carlo tree search), no exploration noise at the root; it plays
  the most visited move (ties at random).
- `minimax` (tic_tac_toe only): a perfect player. Every position's value is solved once, by
  negamax over the 5,478 legal positions, when the env is built; it plays uniformly among the
  moves that keep the best outcome, so it never loses and wins whenever the agent errs.

pgx fetches nothing at run time; its baseline models (`pgx.make_baseline_model`) download
their weights, so canter does not offer them as opponents.
"""

import functools
import re
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from canter.common.config import ConfigError
from canter.common.envs.suites import PGX_GAMES, PGX_INSTALL, PGX_PREFIX
from gymnax.environments import environment, spaces
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

PREFIX, GAMES, INSTALL = PGX_PREFIX, PGX_GAMES, PGX_INSTALL

MAX_STEPS = 1_000  # the agent's moves in an episode; pgx's own limits cut every game sooner
Opponent = Callable[[PRNGKeyArray, Any], Int[Array, ""]]


class PgxParams(eqx.Module):
    """The episode limit canter reads from every env's params (pgx's settings live in the env
    object)."""

    max_steps_in_episode: int = eqx.field(static=True)


class VersusState(eqx.Module):
    """pgx's game state, the agent's player id, the agent's moves so far, and whether the step
    that led here truncated the game."""

    game: Any
    agent: Int[Array, ""]
    time: Int[Array, ""]
    truncated: Bool[Array, ""]


class Versus(environment.Environment):
    """A pgx two-player game from one player's side, the other played by `opponent`."""

    def __init__(self, game: str, opponent: str = "random", colour: int | None = None):
        super().__init__()
        import pgx

        self.game, self.opponent_name, self.colour = game, opponent, colour
        self.pgx = pgx.make(game)
        self.opponent = make_opponent(self.pgx, game, opponent)

    @property
    def name(self) -> str:
        suffix = "" if self.opponent_name == "random" else f"-vs-{self.opponent_name}"
        return PREFIX + self.game + suffix

    @property
    def default_params(self) -> PgxParams:
        return PgxParams(MAX_STEPS)

    def reset_env(self, key: PRNGKeyArray, params: PgxParams) -> tuple[Array, VersusState]:
        game_key, reply_key = jax.random.split(key)
        game = self.pgx.init(game_key)
        if self.colour is None:
            agent = jnp.int32(0)  # pgx draws who moves first
        else:  # the first mover's id, or the other's
            agent = jnp.where(self.colour == 0, game.current_player, 1 - game.current_player)
        game, _ = self.replies(reply_key, game, agent)
        state = VersusState(game, agent, jnp.zeros((), jnp.int32), jnp.array(False))
        return self.pgx.observe(game, agent), state

    def step_env(
        self, key: PRNGKeyArray, state: VersusState, action: Any, params: PgxParams
    ) -> tuple:
        game = self.pgx.step(state.game, jnp.asarray(action, jnp.int32))
        reward = game.rewards[state.agent]
        game, replies_reward = self.replies(key, game, state.agent)
        time = state.time + 1
        terminated = game.terminated
        ended = game.terminated | game.truncated | (time >= params.max_steps_in_episode)
        truncated = ended & ~terminated
        state = VersusState(game, state.agent, time, truncated)
        info = {"final_action_mask": game.legal_action_mask}
        obs = self.pgx.observe(game, state.agent)
        return obs, state, reward + replies_reward, terminated, info

    def replies(self, key: PRNGKeyArray, game: Any, agent: Int[Array, ""]) -> tuple[Any, Array]:
        """The opponent's moves until the agent is to move or the game is over, and the agent's
        reward over them."""

        def theirs(carry: tuple) -> Bool[Array, ""]:
            _, game, _ = carry
            return ~(game.terminated | game.truncated) & (game.current_player != agent)

        def reply(carry: tuple) -> tuple:
            key, game, reward = carry
            key, move_key = jax.random.split(key)
            game = self.pgx.step(game, self.opponent(move_key, game))
            return key, game, reward + game.rewards[agent]

        _, game, reward = jax.lax.while_loop(theirs, reply, (key, game, jnp.float32(0.0)))
        return game, reward

    def is_truncated(self, state: VersusState, params: PgxParams) -> Bool[Array, ""]:
        return state.truncated

    def action_mask(self, state: VersusState, params: PgxParams) -> Bool[Array, " num_actions"]:
        """The agent's legal moves in `state` (pgx's `legal_action_mask`)."""
        return state.game.legal_action_mask

    def frames(self, states: list, size: int = 400) -> list[np.ndarray]:
        """RGB frames of (unbatched) states: the board from the agent's side (its pieces dark,
        the opponent's light), drawn with Pillow, for the games whose first two observation
        planes are the two players' pieces."""
        if self.game not in DRAWN:
            raise ConfigError(
                f"{self.name} has no frames: canter draws {', '.join(DRAWN)} (pgx draws the "
                "others as SVG, which would need a converter canter does not install)."
            )
        return [draw_board(np.asarray(self.pgx.observe(s.game, s.agent)), size) for s in states]

    @property
    def num_actions(self) -> int:
        return int(self.pgx.num_actions)

    def action_space(self, params: PgxParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def observation_space(self, params: PgxParams | None = None) -> spaces.Box:
        return spaces.Box(0.0, 1.0, tuple(self.pgx.observation_shape), jnp.float32)


# The games whose observation's planes 0 and 1 are the agent's and the opponent's pieces.
DRAWN = ("tic_tac_toe", "connect_four", "othello", "go_9x9")


def draw_board(obs: np.ndarray, size: int) -> np.ndarray:
    """A board from its first two observation planes: a grid, the agent's pieces dark and the
    opponent's light."""
    from PIL import Image, ImageDraw

    rows, cols = obs.shape[:2]
    cell = size // max(rows, cols)
    image = Image.new("RGB", (cols * cell, rows * cell), (214, 178, 112))
    draw = ImageDraw.Draw(image)
    for r in range(rows):
        for c in range(cols):
            box = (c * cell, r * cell, (c + 1) * cell - 1, (r + 1) * cell - 1)
            draw.rectangle(box, outline=(90, 60, 20))
            inner = (box[0] + cell // 8, box[1] + cell // 8, box[2] - cell // 8, box[3] - cell // 8)
            if obs[r, c, 0]:
                draw.ellipse(inner, fill=(20, 20, 20))
            elif obs[r, c, 1]:
                draw.ellipse(inner, fill=(245, 245, 245), outline=(20, 20, 20))
    return np.asarray(image)


def random_move(key: PRNGKeyArray, mask: Bool[Array, " num_actions"]) -> Int[Array, ""]:
    """A legal move uniformly at random."""
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


def make_opponent(env: Any, game: str, name: str) -> Opponent:
    """The opponent `name` for pgx's `env` (see the module docstring), refused clearly."""
    if name == "random":
        return lambda key, state: random_move(key, state.legal_action_mask)
    if name == "minimax":
        if game != "tic_tac_toe":
            raise ConfigError(f"The minimax opponent is solved for tic_tac_toe only, not {game}.")
        return minimax_opponent()
    simulations = re.fullmatch(r"mcts([1-9][0-9]*)", name)
    if simulations:
        return mcts_opponent(env, int(simulations.group(1)))
    raise ConfigError(
        f"Unknown pgx opponent '{name}': use random, mcts<N> (N simulations, e.g. mcts128), or "
        "minimax (tic_tac_toe)."
    )


def playout_value(env: Any, key: PRNGKeyArray, state: Any) -> Float[Array, ""]:
    """The outcome, for the player to move in `state`, of one game played on from it with
    uniformly random moves (0 if `state` is over)."""
    player = state.current_player

    def going(carry: tuple) -> Bool[Array, ""]:
        return ~(carry[1].terminated | carry[1].truncated)

    def move(carry: tuple) -> tuple:
        key, state = carry
        key, move_key = jax.random.split(key)
        return key, env.step(state, random_move(move_key, state.legal_action_mask))

    _, end = jax.lax.while_loop(going, move, (key, state))
    over = state.terminated | state.truncated
    return jnp.where(over, 0.0, end.rewards[player])


def mcts_opponent(env: Any, num_simulations: int) -> Opponent:
    """Plain MCTS: PUCT over the true game, a uniform prior on the legal moves, new nodes valued
    by a random playout; the most visited move, ties at random."""
    import mctx

    def uniform(mask: Bool[Array, "batch num_actions"]) -> Float[Array, "batch num_actions"]:
        return jnp.where(mask, 0.0, jnp.finfo(jnp.float32).min)

    def recurrent_fn(params: None, key: PRNGKeyArray, action: Array, states: Any) -> tuple:
        mover = states.current_player
        states = jax.vmap(env.step)(states, action)
        reward = jnp.take_along_axis(states.rewards, mover[:, None], axis=1)[:, 0]
        over = states.terminated | states.truncated
        keys = jax.random.split(key, action.shape[0])
        value = jax.vmap(functools.partial(playout_value, env))(keys, states)
        # Zero-sum, players alternating: the child's value is its mover's, negated for ours.
        discount = jnp.where(over, 0.0, -1.0)
        prior = uniform(states.legal_action_mask)
        out = mctx.RecurrentFnOutput(
            reward=reward, discount=discount, prior_logits=prior, value=value
        )
        return out, states

    def opponent(key: PRNGKeyArray, state: Any) -> Int[Array, ""]:
        search_key, value_key, tie_key = jax.random.split(key, 3)
        states = jax.tree.map(lambda x: x[None], state)
        value = playout_value(env, value_key, state)[None]
        root = mctx.RootFnOutput(
            prior_logits=uniform(states.legal_action_mask), value=value, embedding=states
        )
        out = mctx.muzero_policy(
            None,
            search_key,
            root,
            recurrent_fn,
            num_simulations,
            invalid_actions=~states.legal_action_mask,
            dirichlet_fraction=0.0,
        )
        visits = out.action_weights[0] + 1e-6 * jax.random.uniform(tie_key, (env.num_actions,))
        return jnp.argmax(jnp.where(state.legal_action_mask, visits, -1.0)).astype(jnp.int32)

    return opponent


def solve_tic_tac_toe() -> np.ndarray:
    """For each board (9 cells, base 3: 0 empty, 1 and 2 the colours' marks, cell i the 3**i
    digit), the moves that keep the best outcome for the colour to move (the one with fewer
    marks, the first colour on a tie), by negamax; all false where the game is over."""
    lines = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]
    best = np.zeros((3**9, 9), bool)

    @functools.cache
    def value(board: tuple) -> int:  # for the colour to move: 1 win, 0 draw, -1 loss
        mover = 1 if board.count(1) == board.count(2) else 2
        if any(board[a] == board[b] == board[c] != 0 for a, b, c in lines):
            return -1  # the last move won
        moves = [i for i in range(9) if board[i] == 0]
        if not moves:
            return 0
        outcomes = [-value(board[:i] + (mover,) + board[i + 1 :]) for i in moves]
        top = max(outcomes)
        index = sum(cell * 3**i for i, cell in enumerate(board))
        best[index, [m for m, o in zip(moves, outcomes, strict=True) if o == top]] = True
        return top

    value((0,) * 9)
    return best


def minimax_opponent() -> Opponent:
    """A perfect tic-tac-toe player: uniformly among the moves that keep the best outcome."""
    best = jnp.asarray(solve_tic_tac_toe())
    digits = 3 ** jnp.arange(9)

    def opponent(key: PRNGKeyArray, state: Any) -> Int[Array, ""]:
        index = jnp.sum((state._x.board + 1) * digits)  # pgx: -1 empty, 0 and 1 the colours
        return random_move(key, best[index] & state.legal_action_mask)

    return opponent


def parse_name(name: str) -> tuple[str, str]:
    """(game, opponent) of `pgx:<game>[-vs-<opponent>]`, refused clearly if unknown."""
    game, _, opponent = name.removeprefix(PREFIX).partition("-vs-")
    if game not in GAMES:
        raise ConfigError(
            f"Unknown pgx game '{game}': canter offers {', '.join(PREFIX + g for g in GAMES)} "
            f"(pgx's two-player board games; {INSTALL})."
        )
    return game, opponent or "random"


def make_pgx_env(name: str) -> tuple[Versus, PgxParams]:
    """`pgx:<game>[-vs-<opponent>]` and its params, after checking that pgx is installed."""
    game, opponent = parse_name(name)
    try:
        import pgx  # noqa: F401
    except ImportError:
        raise ConfigError(f"{name} needs pgx: {INSTALL}") from None
    env = Versus(game, opponent)
    return env, env.default_params

"""The outer loop every canter algorithm shares: the pure `train(key)`, and the entry point.

An algorithm's `make_train(config)` returns a `Train`: `init(key) -> state`, `step(state) ->
(state, metrics)` (one iteration: collect and update) and `act` (greedy or deterministic
actions), with the environment it trains on. `Train` composes them into the whole run, and
builds evaluation from `act`. Nothing here can change a learning curve for a fixed seed
(docs/design.md, "the numbers test"), except `when`, the one rule for skipped work.

Two rules a fork trips on: under the runner, `make_train` is vmapped over the Config, so its
float fields are tracers there (branch on them with `jnp.where` / `lax.cond`, never a Python
`if`); and every leaf of the state is an array (activations are applied in `__call__`, not
stored), so plain `jax.grad`, `optax` and `jax.vmap` work on whole Modules without filters.

The host runner (`run`: seeds, sweeps, devices, run directory, checkpoints, progress; `check`:
its checks alone) lives in common/run/runner.py and the command line in common/run/cli.py; both
are re-exported here.
"""

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from canter.common.blocks.loops import scan
from canter.common.config import ConfigError
from canter.common.run.batch import seed_keys
from canter.common.run.evaluation import evaluate
from canter.common.run.runner import Interval, RunResult, check, run
from jaxtyping import Array, Int, PRNGKeyArray

__all__ = ["Train", "when", "cli", "run", "check", "RunResult", "Interval", "seed_keys"]

Metrics = dict[str, Array]
EVAL_POLICIES = ("greedy", "sampled")


@dataclasses.dataclass(frozen=True)
class Train:
    """A whole run as pure functions: `Train(...)(key) -> (state, metrics)` is jittable.

    The run is `num_intervals` evaluation intervals of `interval_iterations` iterations, each
    followed by one evaluation on `num_eval_envs` fresh environments. When `interval_iterations`
    does not divide `num_iterations`, the surplus iterations of the last interval are skipped
    (`when`), so every interval is the same program.

    `step(state, iteration) -> (state, metrics)` is one iteration; `iteration` is its index in
    the run, the same for every vmapped seed and sweep point, so a `lax.cond` on it (replay
    warm-up, TD3's delayed actor) runs one branch, where one on a counter in the (batched)
    state would run both and select.

    `act(state, obs) -> actions` maps a batch of observations to greedy actions. A policy with
    memory gives `initial_carry(num_envs)`, its memory at an episode's start, and then
    `act(state, obs, carry) -> (actions, carry)`. A discrete `act` also takes `mask=`, the
    valid actions of each observation's state, for an env with action masks. A stochastic
    policy's `act` also takes `key=`: given one, it samples from the policy instead.

    `eval_policy` is what evaluation plays: "greedy" (the most likely action, or the mean of a
    continuous policy) or "sampled" (a draw from the policy, as it acts in training; its keys
    ride along in the carry).

    A policy that plans on the true game (alphazero.py's search) sets `plans`: its `act` then
    also takes `env_state=`, the bare env's state of each observation (`base_state`), and
    searches from it; evaluation and rendering pass it.
    """

    init: Callable[[PRNGKeyArray], Any]
    step: Callable[[Any, Int[Array, ""]], tuple[Any, Metrics]]
    act: Callable[..., Any]
    env: Any
    env_params: Any
    num_iterations: int
    interval_iterations: int
    env_steps_per_iteration: int
    num_eval_envs: int
    initial_carry: Callable[[int], Any] | None = None
    unroll: int = 1  # iterations per loop trip in a program compiled for a GPU or TPU
    eval_policy: str = "greedy"
    plans: bool = False
    done_iterations: int = 0  # skipped: trained before a cut interval (common/run/resume.py)

    @classmethod
    def from_config(cls, config: Any, **parts: Any) -> "Train":
        """A `Train` whose run sizes come from `config` (`num_iterations`, `num_eval_envs`,
        and `eval_every` in env steps, rounded down to whole iterations, at least one and at
        most the run: the runner says the cadence it makes);
        `parts` are the rest: init, step, act, env, env_params, env_steps_per_iteration and, for
        a policy with memory, initial_carry; `unroll` if not 1. `config.eval_policy`, where the
        algorithm has one (a stochastic policy), chooses what evaluation plays."""
        per_interval = max(1, config.eval_every // parts["env_steps_per_iteration"])
        return cls(
            num_iterations=config.num_iterations,
            interval_iterations=min(per_interval, config.num_iterations),
            num_eval_envs=config.num_eval_envs,
            eval_policy=getattr(config, "eval_policy", "greedy"),
            **parts,
        )

    def __post_init__(self) -> None:
        if self.eval_policy not in EVAL_POLICIES:
            raise ConfigError(
                f"eval_policy={self.eval_policy!r}: choose one of {', '.join(EVAL_POLICIES)}."
            )

    @property
    def num_intervals(self) -> int:
        return math.ceil(self.num_iterations / self.interval_iterations)

    @property
    def eval_every(self) -> int:
        """Env steps of one seed between evaluations."""
        return self.interval_iterations * self.env_steps_per_iteration

    def evaluate(self, state: Any, key: PRNGKeyArray) -> Metrics:
        """Mean return and length of one episode of `eval_policy` on each of `num_eval_envs`
        envs, without training-only wrappers (common/run/evaluation.py, `evaluate`)."""
        return evaluate(self, state, key)

    def start(self, key: PRNGKeyArray) -> tuple[Any, PRNGKeyArray]:
        """The initial state and the key every evaluation of this seed derives from."""
        init_key, eval_key = jax.random.split(key)
        return self.init(init_key), eval_key

    def interval(
        self, state: Any, eval_key: PRNGKeyArray, index: Int[Array, ""]
    ) -> tuple[Any, dict[str, Metrics]]:
        """`interval_iterations` iterations then one evaluation (train metrics:
        `interval_metrics`)."""
        skips = self.num_iterations % self.interval_iterations != 0 or self.done_iterations

        def iteration(state: Any, offset: Int[Array, ""]) -> tuple[Any, Metrics]:
            i = index * self.interval_iterations + offset
            if not skips:
                return self.step(state, i)
            todo = (i >= self.done_iterations) & (i < self.num_iterations)
            return when(todo, self.step, state, i)

        # `unroll` iterations per loop trip off the CPU: fewer, larger kernels (blocks/loops.py).
        iterations = jnp.arange(self.interval_iterations)
        state, metrics = scan(iteration, state, iterations, unroll=self.unroll)
        train_metrics = interval_metrics(metrics)
        eval_metrics = self.evaluate(state, jax.random.fold_in(eval_key, index))
        return state, {"train": train_metrics, "eval": eval_metrics}

    def __call__(self, key: PRNGKeyArray) -> tuple[Any, dict[str, Metrics]]:
        state, eval_key = self.start(key)
        indices = jnp.arange(self.num_intervals)
        return jax.lax.scan(lambda s, i: self.interval(s, eval_key, i), state, indices)

    def env_steps(self, interval: int) -> int:
        """Env steps of one seed after `interval` + 1 intervals."""
        iterations = min((interval + 1) * self.interval_iterations, self.num_iterations)
        return iterations * self.env_steps_per_iteration


EPISODE_STATS = ("episodic_return", "episodic_length")


def interval_metrics(metrics: Metrics) -> Metrics:
    """An interval's train metrics from its iterations' (`[iterations, ...]` each).

    The episode statistics (`episodic_return`, `episodic_length`: the mean over the episodes
    that ended during an iteration, NaN where none did) are those of the interval's last
    iteration in which an episode ended, the point of the references' training curve at the
    interval's end; `episodes` is how many ended in the whole interval. Every other metric is
    its mean over the iterations, NaN (skipped work: `when`) left out.
    """
    reduced = {name: jnp.nanmean(value, axis=0) for name, value in metrics.items()}
    if "episodes" not in metrics:
        return reduced
    ended = metrics["episodes"] > 0  # False in a skipped iteration too (NaN > 0)
    last = jnp.max(jnp.where(ended, jnp.arange(ended.shape[0]), -1))
    for name in EPISODE_STATS:
        reduced[name] = jnp.where(last >= 0, metrics[name][jnp.maximum(last, 0)], jnp.nan)
    reduced["episodes"] = jnp.nansum(metrics["episodes"], axis=0)
    return reduced


def when(pred: Array, fn: Callable[..., tuple[Any, Metrics]], carry: Any, *args: Any) -> tuple:
    """`fn(carry, *args) -> (carry, metrics)` where `pred` holds; else `carry` unchanged and
    NaN metrics of the same structure (NaN: "did not happen"; interval means skip it).

    The one rule for skipped work: a ragged last interval, updates during replay warm-up,
    TD3's delayed actor updates. Under vmap both branches run and a select picks one.
    """
    _, shapes = jax.eval_shape(fn, carry, *args)
    nan_metrics = jax.tree.map(lambda s: jnp.full(s.shape, jnp.nan, s.dtype), shapes)
    return jax.lax.cond(pred, fn, lambda c, *_: (c, nan_metrics), carry, *args)


def cli(config_cls: type, make_train: Callable[[Any], Train], presets: dict | None = None) -> Any:
    """The entry point of an algorithm file: every Config field a flag, then `run`.

    `presets` name sets of field values (`--preset NAME`; other flags override them).
    Bad input exits with code 2 and a message, before anything compiles (common/run/cli.py).
    """
    from canter.common.run.cli import main

    return main(config_cls, make_train, presets or {})
